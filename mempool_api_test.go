package gpugraph_test

import (
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// TestMallocAsyncThroughTheStreamAPI uses pool memory with stream copies,
// memsets and FreeAsync, and checks the pool's release at Synchronize.
func TestMallocAsyncThroughTheStreamAPI(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	p := must[gg.DevicePtr](t)(s.MallocAsync(4096))
	ok(t, s.Memset(gg.Memset32(p, 7, 1024)))
	out := make([]uint32, 1024)
	ok(t, s.Memcpy(gg.DtoH(gg.Bytes(out), p)))
	isCode(t, s.Memset(gg.Memset32(p, 7, 1025)), gg.ErrInvalidValue) // past the end
	ok(t, s.FreeAsync(p))
	isCode(t, s.FreeAsync(p), gg.ErrInvalidValue)
	ok(t, s.FreeAsync(0))
	ok(t, s.Synchronize())
	if out[0] != 7 || out[1023] != 7 {
		t.Fatalf("read %v", out[:2])
	}
	if st := d.DefaultMemPool().Stats(); st.ReservedCurrent != 0 || st.UsedCurrent != 0 {
		t.Fatalf("release threshold 0: memory kept after Synchronize: %+v", st)
	}
	q := must[gg.DevicePtr](t)(s.MallocAsync(64))
	ok(t, d.Free(q)) // synchronous free of pool memory
	isCode(t, d.Free(q), gg.ErrInvalidValue)
}
