package gpugraph

import (
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"testing"

	"github.com/gpugraph/gpugraph/internal/host"
	"github.com/gpugraph/gpugraph/internal/vmem"
)

// These tests call the pool hooks (poolFreeAsync, poolBytes, poolsAfterSync,
// closePools) directly, the way Stream.FreeAsync, memcpy validation,
// Synchronize and Close will.

const mib = 1 << 20

// poolDevice opens a host device whose pools are released at the end of
// the test.
func poolDevice(t *testing.T) *Device {
	t.Helper()
	d, err := Open("host")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.Close()
	})
	return d
}

func poolStream(t *testing.T, d *Device) *Stream {
	t.Helper()
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func poolNew(t *testing.T, d *Device, props MemPoolProps) *MemPool {
	t.Helper()
	p, err := d.NewMemPool(props)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func poolMalloc(t *testing.T, s *Stream, n int, p *MemPool) DevicePtr {
	t.Helper()
	ptr, err := s.MallocFromPoolAsync(n, p)
	if err != nil {
		t.Fatal(err)
	}
	return ptr
}

// freeAsync frees ptr in s the way Stream.FreeAsync will.
func freeAsync(t *testing.T, s *Stream, ptr DevicePtr) {
	t.Helper()
	handled, err := poolFreeAsync(s.dev, ptr, s)
	if !handled || err != nil {
		t.Fatalf("poolFreeAsync(%#x) = %v, %v", uint64(ptr), handled, err)
	}
}

// syncStream synchronizes s and applies the release thresholds, as
// Stream.Synchronize will.
func syncStream(t *testing.T, s *Stream) {
	t.Helper()
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	trimPools(s.dev)
}

// block holds back s until the returned function is called (at the latest
// when the test ends, so that Close does not wait forever).
func block(t *testing.T, s *Stream) (release func()) {
	t.Helper()
	gate := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	if err := s.LaunchHostFunc(func() { <-gate }); err != nil {
		t.Fatal(err)
	}
	return release
}

// checkPool verifies the pool's bookkeeping: every byte is exactly one of
// free, live or pending; each granule's reference count is the number of
// live and pending ranges touching it; used is what live allocations asked
// for.
func checkPool(t *testing.T, p *MemPool) {
	t.Helper()
	if msg := poolProblem(p); msg != "" {
		t.Fatal(msg)
	}
}

// poolProblem is checkPool for goroutines other than the test's.
func poolProblem(p *MemPool) string {
	if err := hostPool(p).Verify(); err != nil {
		return err.Error()
	}
	return ""
}

func poolListed(d *Device, p *MemPool) bool {
	for _, q := range hostDev(d).Pools() {
		if q == hostPool(p) {
			return true
		}
	}
	return false
}

func wantCode(t *testing.T, err error, want *Code) {
	t.Helper()
	var e *Error
	if !errors.Is(err, want) || !errors.As(err, &e) || e.Op == "" {
		t.Fatalf("got error %v, want an *Error naming its operation with %s", err, want.Name())
	}
}

// poolFill writes the value v to n uint32 words at p.
var poolFill = &Kernel{
	Name:   "poolFill",
	Params: []ParamType{Pointer, Uint32, Int32},
	Go: func(b Block, a Args) {
		x := Slice[uint32](a.Ptr(0), a.Int(2))
		for t := 0; t < b.Dim.X; t++ {
			if i := b.Idx.X*b.Dim.X + t; i < len(x) {
				x[i] = a.Uint32(1)
			}
		}
	},
}

func TestMallocAsyncMemoryIsUsable(t *testing.T) {
	d := poolDevice(t)
	s := poolStream(t, d)
	const n = 100_000
	p, err := s.MallocAsync(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	if p%host.PoolAlign != 0 {
		t.Fatalf("address %#x not aligned to %d", uint64(p), host.PoolAlign)
	}
	if err := s.Launch(poolFill, Dim1((n+255)/256), Dim1(256), p, uint32(7), n); err != nil {
		t.Fatal(err)
	}
	bad := -1
	if err := s.LaunchHostFunc(func() {
		for i, v := range Slice[uint32](p, n) {
			if v != 7 {
				bad = i
				return
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	freeAsync(t, s, p)
	syncStream(t, s)
	if bad >= 0 {
		t.Fatalf("word %d not written", bad)
	}
	if z, err := s.MallocAsync(0); z != 0 || err != nil {
		t.Fatalf("MallocAsync(0) = %#x, %v; want 0, nil (as cudaMallocAsync)", uint64(z), err)
	}
	if got := d.DefaultMemPool(); got != d.DefaultMemPool() || got == nil {
		t.Fatal("DefaultMemPool is not one pool per device")
	}
}

// The driver (CUDA 13.0) hands memory freed in a stream to the next
// allocations in that stream before the free has run, splitting the range.
func TestPoolSameStreamReuseBeforeFreeRuns(t *testing.T) {
	d := poolDevice(t)
	p := poolNew(t, d, MemPoolProps{})
	s := poolStream(t, d)
	a := poolMalloc(t, s, 3*mib, p)
	other := poolMalloc(t, s, mib, p)
	release := block(t, s)
	freeAsync(t, s, a)
	b := poolMalloc(t, s, mib, p)
	c := poolMalloc(t, s, mib, p)
	if b != a || c != a+mib {
		t.Fatalf("after freeing %#x in the stream: got %#x and %#x, want %#x and %#x", uint64(a), uint64(b), uint64(c), uint64(a), uint64(a+mib))
	}
	checkPool(t, p)
	e := poolMalloc(t, s, 2*mib, p) // 1 MiB of a is left: too small
	if e < other+mib {
		t.Fatalf("2 MiB allocation at %#x overlaps what is live", uint64(e))
	}
	release()
	syncStream(t, s)
	// The free has run: the last MiB of a went back to the pool.
	if f := poolMalloc(t, s, mib, p); f != a+2*mib {
		t.Fatalf("after the free ran: got %#x, want the rest of a at %#x", uint64(f), uint64(a+2*mib))
	}
	checkPool(t, p)
}

// Another stream gets memory freed elsewhere only once the free has run.
func TestPoolCrossStreamReuseAfterFreeRuns(t *testing.T) {
	d := poolDevice(t)
	p := poolNew(t, d, MemPoolProps{})
	s1, s2 := poolStream(t, d), poolStream(t, d)
	a := poolMalloc(t, s1, 3*mib, p)
	release := block(t, s1)
	freeAsync(t, s1, a)
	b := poolMalloc(t, s2, 3*mib, p)
	if b == a {
		t.Fatal("another stream reused memory whose free had not run")
	}
	if err := s2.Query(); err != nil {
		t.Fatalf("s2 waits for something: %v", err)
	}
	release()
	syncStream(t, s1)
	if c := poolMalloc(t, s2, 3*mib, p); c != a {
		t.Fatalf("after the free ran: got %#x, want %#x", uint64(c), uint64(a))
	}
}

// With nothing else left, the driver hands out memory whose free is pending
// in another stream, and makes the allocating stream wait for that free
// (cudaMemPoolReuseAllowInternalDependencies).
func TestPoolFullPoolWaitsForPendingFree(t *testing.T) {
	d := poolDevice(t)
	p := poolNew(t, d, MemPoolProps{MaxSize: 4 * mib})
	s1, s2 := poolStream(t, d), poolStream(t, d)
	a := poolMalloc(t, s1, 3*mib, p)
	release := block(t, s1)
	freeAsync(t, s1, a)
	b := poolMalloc(t, s2, 3*mib, p)
	if b != a {
		t.Fatalf("got %#x, want the pending range %#x", uint64(b), uint64(a))
	}
	ran := false
	if err := s2.LaunchHostFunc(func() { ran = true }); err != nil {
		t.Fatal(err)
	}
	if err := s2.Query(); !errors.Is(err, ErrNotReady) {
		t.Fatalf("s2 does not wait for s1's free: Query = %v", err)
	}
	if _, err := s2.MallocFromPoolAsync(3*mib, p); !errors.Is(err, ErrMemoryAllocation) {
		t.Fatalf("a range was handed out twice: %v", err)
	}
	checkPool(t, p)
	release()
	syncStream(t, s2)
	if !ran {
		t.Fatal("s2's work did not run")
	}
}

// A host function that fails makes the device drop its queued frees: a
// stream waiting for one of them must not hang.
func TestPoolWaitGivesUpOnFailedDevice(t *testing.T) {
	d := poolDevice(t)
	p := poolNew(t, d, MemPoolProps{MaxSize: 4 * mib})
	s1, s2 := poolStream(t, d), poolStream(t, d)
	a := poolMalloc(t, s1, 3*mib, p)
	release := block(t, s1)
	if err := s1.LaunchHostFunc(func() { panic("host function fails") }); err != nil {
		t.Fatal(err)
	}
	freeAsync(t, s1, a)
	if b := poolMalloc(t, s2, 3*mib, p); b != a {
		t.Fatalf("got %#x, want %#x", uint64(b), uint64(a))
	}
	release()
	if err := s2.Synchronize(); err == nil {
		t.Fatal("Synchronize after a failed host function reports no error")
	}
	if _, err := s2.MallocAsync(8); err == nil {
		t.Fatal("MallocAsync on a failed device succeeded")
	}
}

// No range is ever held by two live allocations, and no stream sees its
// memory overwritten by another's while it is live, whatever the mix of
// streams, sizes, pending frees and full-pool waits.
func TestPoolNeverHandsOutLiveMemory(t *testing.T) {
	d := poolDevice(t)
	p := poolNew(t, d, MemPoolProps{MaxSize: mib})
	const streams, rounds = 4, 300
	var (
		mu      sync.Mutex
		live    = map[DevicePtr]int{} // API-live allocations
		corrupt = make(chan string, streams*rounds)
		wg      sync.WaitGroup
	)
	for w := 0; w < streams; w++ {
		s := poolStream(t, d)
		wg.Add(1)
		go func(w int, s *Stream) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			for r := 0; r < rounds; r++ {
				n := 4 * (1 + rng.Intn(16<<10))
				var ptr DevicePtr
				for try := 0; ; try++ {
					var err error
					if ptr, err = s.MallocFromPoolAsync(n, p); err == nil {
						break
					}
					if !errors.Is(err, ErrMemoryAllocation) || try == 100 {
						corrupt <- fmt.Sprintf("stream %d: %v", w, err)
						return
					}
					d.be.Synchronize() // let every stream's frees run, then try again
				}
				mu.Lock()
				for q, m := range live {
					if ptr < q+DevicePtr(m) && q < ptr+DevicePtr(n) {
						corrupt <- fmt.Sprintf("[%#x,+%d) overlaps live [%#x,+%d)", uint64(ptr), n, uint64(q), m)
					}
				}
				live[ptr] = n
				mu.Unlock()
				tag := uint32(w<<16 | r)
				s.LaunchHostFunc(func() {
					x := Slice[uint32](ptr, n/4)
					for i := range x {
						x[i] = tag
					}
				})
				s.LaunchHostFunc(func() {
					for i, v := range Slice[uint32](ptr, n/4) {
						if v != tag {
							corrupt <- fmt.Sprintf("stream %d round %d: word %d is %#x, want %#x", w, r, i, v, tag)
							return
						}
					}
				})
				mu.Lock()
				delete(live, ptr)
				mu.Unlock()
				if r%50 == 0 {
					if msg := poolProblem(p); msg != "" {
						corrupt <- msg
					}
				}
				if handled, err := poolFreeAsync(d, ptr, s); !handled || err != nil {
					corrupt <- fmt.Sprintf("free: %v %v", handled, err)
				}
			}
			s.be.Synchronize()
		}(w, s)
	}
	wg.Wait()
	close(corrupt)
	for msg := range corrupt {
		t.Fatal(msg)
	}
	checkPool(t, p)
	trimPools(d)
	checkPool(t, p)
	if st := p.Stats(); st.UsedCurrent != 0 || st.ReservedCurrent != 0 {
		t.Fatalf("after all frees ran: %+v, want nothing used or reserved", st)
	}
}

func TestPoolStats(t *testing.T) {
	d := poolDevice(t)
	p := poolNew(t, d, MemPoolProps{})
	s := poolStream(t, d)
	const g = vmem.Granularity
	a := poolMalloc(t, s, 1, p)
	want := MemPoolStats{ReservedCurrent: g, ReservedHigh: g, UsedCurrent: 1, UsedHigh: 1}
	if st := p.Stats(); st != want {
		t.Fatalf("after 1 byte: %+v, want %+v", st, want)
	}
	// At offset 512: touches granules 0, 1 and 2.
	b := poolMalloc(t, s, 5*mib+1, p)
	want = MemPoolStats{ReservedCurrent: 3 * g, ReservedHigh: 3 * g, UsedCurrent: 5*mib + 2, UsedHigh: 5*mib + 2}
	if st := p.Stats(); st != want {
		t.Fatalf("after 5 MiB + 1: %+v, want %+v", st, want)
	}
	// Used falls when FreeAsync is called, even before the free runs.
	release := block(t, s)
	freeAsync(t, s, b)
	want.UsedCurrent = 1
	if st := p.Stats(); st != want {
		t.Fatalf("after FreeAsync, free pending: %+v, want %+v", st, want)
	}
	p.ResetHigh()
	want.ReservedHigh, want.UsedHigh = want.ReservedCurrent, 1
	if st := p.Stats(); st != want {
		t.Fatalf("after ResetHigh: %+v, want %+v", st, want)
	}
	release()
	syncStream(t, s) // threshold 0: granules 1 and 2 go
	want.ReservedCurrent = g
	if st := p.Stats(); st != want {
		t.Fatalf("after the free ran and a sync: %+v, want %+v", st, want)
	}
	freeAsync(t, s, a)
	syncStream(t, s)
	if st := p.Stats(); st.ReservedCurrent != 0 || st.UsedCurrent != 0 || st.ReservedHigh != 3*g {
		t.Fatalf("after all frees: %+v", st)
	}
}

func TestPoolReleaseThreshold(t *testing.T) {
	const g = vmem.Granularity
	cases := []struct {
		name      string
		threshold uint64
		want      uint64 // reserved after the sync
	}{
		{"zero releases all idle memory", 0, 0},
		{"keeps at least the threshold", 3 * mib, 2 * g},
		{"exactly a granule", 2 * g, 2 * g},
		{"high keeps everything", 1 << 40, 8 * g},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := poolDevice(t)
			p := poolNew(t, d, MemPoolProps{})
			s := poolStream(t, d)
			if err := p.SetReleaseThreshold(c.threshold); err != nil {
				t.Fatal(err)
			}
			if got := p.ReleaseThreshold(); got != c.threshold {
				t.Fatalf("ReleaseThreshold = %d, want %d", got, c.threshold)
			}
			freeAsync(t, s, poolMalloc(t, s, 16*mib, p))
			if got := p.Stats().ReservedCurrent; got != 8*g {
				t.Fatalf("before the sync: reserved %d, want %d", got, 8*g)
			}
			syncStream(t, s)
			if got := p.Stats().ReservedCurrent; got != c.want {
				t.Fatalf("after the sync: reserved %d, want %d", got, c.want)
			}
		})
	}
	if got := poolDevice(t).DefaultMemPool().ReleaseThreshold(); got != 0 {
		t.Fatalf("default release threshold %d, want 0 as in CUDA", got)
	}
}

// A sync releases nothing whose free has not run yet.
func TestPoolSyncKeepsPendingMemory(t *testing.T) {
	d := poolDevice(t)
	p := poolNew(t, d, MemPoolProps{})
	s1, s2 := poolStream(t, d), poolStream(t, d)
	a := poolMalloc(t, s1, 8*mib, p)
	release := block(t, s1)
	freeAsync(t, s1, a)
	syncStream(t, s2) // another stream's sync
	if err := p.TrimTo(0); err != nil {
		t.Fatal(err)
	}
	if got := p.Stats().ReservedCurrent; got != 8*mib {
		t.Fatalf("memory of a pending free was released: reserved %d", got)
	}
	release()
	syncStream(t, s1)
	if got := p.Stats().ReservedCurrent; got != 0 {
		t.Fatalf("after the free ran: reserved %d, want 0", got)
	}
}

func TestPoolTrimTo(t *testing.T) {
	d := poolDevice(t)
	p := poolNew(t, d, MemPoolProps{})
	s := poolStream(t, d)
	if err := p.SetReleaseThreshold(1 << 40); err != nil {
		t.Fatal(err)
	}
	keep := poolMalloc(t, s, 4*mib, p) // granules 0 and 1, live
	big := poolMalloc(t, s, 32*mib, p) // granules 2 to 17
	if err := s.Launch(poolFill, Dim1(4), Dim1(256), keep, uint32(42), 1024); err != nil {
		t.Fatal(err)
	}
	freeAsync(t, s, big)
	syncStream(t, s)
	if got := p.Stats().ReservedCurrent; got != 36*mib {
		t.Fatalf("reserved %d before the trim, want %d", got, 36*mib)
	}
	checkPool(t, p)
	for _, c := range []struct{ keep, want uint64 }{
		{64 * mib, 36 * mib}, // below the minimum already: nothing to do
		{20*mib + 1, 22 * mib},
		{0, 4 * mib}, // the live allocation stays
	} {
		if err := p.TrimTo(c.keep); err != nil {
			t.Fatal(err)
		}
		if got := p.Stats().ReservedCurrent; got != c.want {
			t.Fatalf("TrimTo(%d): reserved %d, want %d", c.keep, got, c.want)
		}
		checkPool(t, p)
	}
	if v := Slice[uint32](keep, 1024); v[0] != 42 || v[1023] != 42 {
		t.Fatal("trim lost the data of a live allocation")
	}
	// The trimmed range is usable again.
	again := poolMalloc(t, s, 32*mib, p)
	if err := s.Launch(poolFill, Dim1(1), Dim1(256), again, uint32(1), 256); err != nil {
		t.Fatal(err)
	}
	syncStream(t, s)
}

func TestNewMemPool(t *testing.T) {
	d := poolDevice(t)
	s := poolStream(t, d)
	_, err := d.NewMemPool(MemPoolProps{Location: 1})
	wantCode(t, err, ErrInvalidValue) // as cudaMemPoolCreate for an ordinal with no device
	_, err = d.NewMemPool(MemPoolProps{Location: -1})
	wantCode(t, err, ErrInvalidValue)
	p := poolNew(t, d, MemPoolProps{MaxSize: 4 * mib})
	if p == d.DefaultMemPool() {
		t.Fatal("NewMemPool returned the default pool")
	}
	poolMalloc(t, s, 3*mib, p)
	_, err = s.MallocFromPoolAsync(2*mib, p)
	wantCode(t, err, ErrMemoryAllocation) // as the driver, past MaxSize
	if st := p.Stats(); st.UsedCurrent != 3*mib {
		t.Fatalf("a failed allocation changed the stats: %+v", st)
	}
}

func TestPoolAccess(t *testing.T) {
	d := poolDevice(t)
	for _, p := range []*MemPool{d.DefaultMemPool(), poolNew(t, d, MemPoolProps{})} {
		cases := []struct {
			device int
			flags  AccessFlags
			want   *Code // as the driver answers cudaMemPoolSetAccess
		}{
			{0, AccessReadWrite, nil},
			{0, AccessRead, ErrNotSupported},
			{0, AccessNone, ErrInvalidDevice},
			{1, AccessReadWrite, ErrInvalidDevice},
			{1, AccessNone, ErrInvalidDevice},
			{-1, AccessReadWrite, ErrInvalidDevice},
			{0, AccessFlags(2), ErrInvalidValue},
		}
		for _, c := range cases {
			err := p.SetAccess(c.device, c.flags)
			if c.want == nil {
				if err != nil {
					t.Fatalf("SetAccess(%d, %v): %v", c.device, c.flags, err)
				}
				continue
			}
			wantCode(t, err, c.want)
		}
		if p.Access(0) != AccessReadWrite || p.Access(1) != AccessNone {
			t.Fatalf("Access(0) = %v, Access(1) = %v", p.Access(0), p.Access(1))
		}
	}
}

func TestPoolDestroy(t *testing.T) {
	d := poolDevice(t)
	s := poolStream(t, d)
	wantCode(t, d.DefaultMemPool().Destroy(), ErrInvalidValue)

	p := poolNew(t, d, MemPoolProps{})
	a := poolMalloc(t, s, 1000, p)
	if err := p.Destroy(); err != nil {
		t.Fatal(err)
	}
	_, err := s.MallocFromPoolAsync(8, p)
	wantCode(t, err, ErrInvalidValue)
	wantCode(t, p.Destroy(), ErrInvalidValue)
	wantCode(t, p.TrimTo(0), ErrInvalidValue)
	wantCode(t, p.SetReleaseThreshold(1), ErrInvalidValue)
	// The live allocation still works until it is freed.
	if err := s.Launch(poolFill, Dim1(1), Dim1(250), a, uint32(3), 250); err != nil {
		t.Fatal(err)
	}
	if b, handled, err := poolBytes(d, a, 1000); !handled || err != nil || b[999] != 0 {
		t.Fatalf("poolBytes of a live allocation of a destroyed pool: %v %v", handled, err)
	}
	release := block(t, s)
	freeAsync(t, s, a)
	if !poolListed(d, p) {
		t.Fatal("the pool went before its last free ran")
	}
	release()
	syncStream(t, s)
	if poolListed(d, p) {
		t.Fatal("destroyed pool still listed after its last free ran")
	}
	if st := p.Stats(); st.ReservedCurrent != 0 {
		t.Fatalf("destroyed pool still reserves %d bytes", st.ReservedCurrent)
	}
	func() {
		defer func() {
			if _, ok := recover().(IllegalAddressError); !ok {
				t.Fatal("Slice of a released pool's memory does not fail")
			}
		}()
		Slice[byte](a, 1)
	}()
	// A pool whose only outstanding work is a pending free goes when the
	// free has run (the driver counts such frees as outstanding).
	r := poolNew(t, d, MemPoolProps{})
	ra := poolMalloc(t, s, 64, r)
	release = block(t, s)
	freeAsync(t, s, ra)
	if err := r.Destroy(); err != nil {
		t.Fatal(err)
	}
	if !poolListed(d, r) {
		t.Fatal("pool released while a free was pending")
	}
	release()
	syncStream(t, s)
	if poolListed(d, r) {
		t.Fatal("destroyed pool still listed after its pending free ran")
	}
	// A pool with nothing outstanding goes at once.
	q := poolNew(t, d, MemPoolProps{})
	freeAsync(t, s, poolMalloc(t, s, 8, q))
	syncStream(t, s)
	if err := q.Destroy(); err != nil {
		t.Fatal(err)
	}
	if poolListed(d, q) {
		t.Fatal("destroyed idle pool still listed")
	}
}

func TestPoolInvalidInputs(t *testing.T) {
	d := poolDevice(t)
	s := poolStream(t, d)
	p := poolNew(t, d, MemPoolProps{})
	other := poolDevice(t)
	foreign := other.DefaultMemPool()
	a := poolMalloc(t, s, 4096, p)
	before := p.Stats()

	mallocs := []struct {
		name string
		n    int
		pool *MemPool
		want *Code
	}{
		{"negative size", -1, p, ErrInvalidValue},
		{"nil pool", 8, nil, ErrInvalidValue},
		{"pool of another device", 8, foreign, ErrInvalidValue},
		{"larger than the pool", 1 << 62, p, ErrMemoryAllocation},
	}
	for _, c := range mallocs {
		ptr, err := s.MallocFromPoolAsync(c.n, c.pool)
		if ptr != 0 {
			t.Errorf("%s: got address %#x", c.name, uint64(ptr))
		}
		wantCode(t, err, c.want)
	}
	_, err := s.MallocAsync(-5)
	wantCode(t, err, ErrInvalidValue)

	m, err := d.Malloc(64)
	if err != nil {
		t.Fatal(err)
	}
	frees := []struct {
		name        string
		ptr         DevicePtr
		wantHandled bool
	}{
		{"interior pointer", a + 512, true},
		{"past the allocation", a + 8192, true},
		{"Malloc memory", m, false},
		{"not device memory", 0x1000, false},
		{"zero", 0, false},
	}
	for _, c := range frees {
		handled, err := poolFreeAsync(d, c.ptr, s)
		if handled != c.wantHandled {
			t.Errorf("poolFreeAsync, %s: handled = %v", c.name, handled)
		}
		if c.wantHandled {
			wantCode(t, err, ErrInvalidValue)
		} else if err != nil {
			t.Errorf("poolFreeAsync, %s: %v", c.name, err)
		}
		handled, err = poolFree(d, c.ptr)
		if handled != c.wantHandled {
			t.Errorf("poolFree, %s: handled = %v", c.name, handled)
		}
		if c.wantHandled {
			wantCode(t, err, ErrInvalidValue)
		}
	}
	if st := p.Stats(); st != before {
		t.Fatalf("invalid calls changed the stats: %+v, want %+v", st, before)
	}
	checkPool(t, p)

	// Double free.
	freeAsync(t, s, a)
	handled, err := poolFreeAsync(d, a, s)
	if !handled {
		t.Fatal("double free not handled")
	}
	wantCode(t, err, ErrInvalidValue)
	handled, err = poolFree(d, a)
	if !handled {
		t.Fatal("double free not handled")
	}
	wantCode(t, err, ErrInvalidValue)

	// A destroyed stream, with the free refused and nothing changed.
	b := poolMalloc(t, s, 64, p)
	dead := poolStream(t, d)
	if err := dead.Destroy(); err != nil {
		t.Fatal(err)
	}
	handled, err = poolFreeAsync(d, b, dead)
	if !handled {
		t.Fatal("free in a destroyed stream not handled")
	}
	wantCode(t, err, ErrInvalidResourceHandle)
	_, err = dead.MallocAsync(8)
	wantCode(t, err, ErrInvalidResourceHandle)
	freeAsync(t, s, b) // still live
	syncStream(t, s)

	var nilPool *MemPool
	wantCode(t, nilPool.Destroy(), ErrInvalidValue)
	wantCode(t, nilPool.TrimTo(0), ErrInvalidValue)
	wantCode(t, nilPool.SetReleaseThreshold(0), ErrInvalidValue)
	wantCode(t, nilPool.SetAccess(0, AccessReadWrite), ErrInvalidValue)
	if nilPool.Stats() != (MemPoolStats{}) || nilPool.Access(0) != AccessNone || nilPool.ReleaseThreshold() != 0 {
		t.Fatal("nil pool reports something")
	}
	nilPool.ResetHigh()
}

func TestPoolBytes(t *testing.T) {
	d := poolDevice(t)
	s := poolStream(t, d)
	a, err := s.MallocAsync(1000)
	if err != nil {
		t.Fatal(err)
	}
	m, err := d.Malloc(64)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name        string
		ptr         DevicePtr
		n           int
		wantHandled bool
		wantErr     bool
	}{
		{"whole allocation", a, 1000, true, false},
		{"interior range", a + 100, 900, true, false},
		{"empty range", a + 10, 0, true, false},
		{"past the end", a + 100, 901, true, true},
		{"in the rounding", a + 1000, 1, true, true},
		{"negative size", a, -1, true, true},
		{"unallocated pool memory", a + 4096, 1, true, true},
		{"Malloc memory", m, 8, false, false},
		{"not device memory", 0x1000, 8, false, false},
	}
	for _, c := range cases {
		b, handled, err := poolBytes(d, c.ptr, c.n)
		if handled != c.wantHandled || (err != nil) != c.wantErr {
			t.Errorf("%s: handled %v, error %v", c.name, handled, err)
			continue
		}
		if handled && !c.wantErr && len(b) != c.n {
			t.Errorf("%s: %d bytes, want %d", c.name, len(b), c.n)
		}
	}
	b, _, _ := poolBytes(d, a, 1000)
	b[0], b[999] = 1, 2
	if v := Slice[byte](a, 1000); v[0] != 1 || v[999] != 2 {
		t.Fatal("poolBytes is not the allocation's memory")
	}
	freeAsync(t, s, a)
	if _, handled, err := poolBytes(d, a, 8); !handled || err == nil {
		t.Fatalf("poolBytes of freed memory: handled %v, error %v", handled, err)
	}
}

func TestPoolClosedDevice(t *testing.T) {
	d, err := Open("host")
	if err != nil {
		t.Fatal(err)
	}
	s := poolStream(t, d)
	p := poolNew(t, d, MemPoolProps{})
	a := poolMalloc(t, s, 8, p)
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	def := d.DefaultMemPool()
	pAddr, defAddr := hostPool(p).Addr(), hostPool(def).Addr()
	d.Close()
	for _, a := range []uintptr{pAddr, defAddr} {
		if vmem.Find(a, 1) != nil {
			t.Fatal("a pool's reservation is still registered after Close")
		}
	}
	_, err = s.MallocFromPoolAsync(8, p)
	wantCode(t, err, ErrContextIsDestroyed)
	_, err = s.MallocAsync(8)
	wantCode(t, err, ErrContextIsDestroyed)
	wantCode(t, p.TrimTo(0), ErrContextIsDestroyed)
	wantCode(t, d.DefaultMemPool().SetReleaseThreshold(0), ErrContextIsDestroyed)
	_, err = d.NewMemPool(MemPoolProps{})
	wantCode(t, err, ErrContextIsDestroyed)
	if handled, _ := poolFreeAsync(d, a, s); handled {
		t.Fatal("a closed device's pool still answers for its memory")
	}
	hostDev(d).Close() // twice is harmless
	if len(hostDev(d).Pools()) != 0 {
		t.Fatal("pools listed after the host device closed")
	}
}

// poolBytes resolves [ptr, ptr+n) in d's pools: handled is false if ptr is
// in none of them.
func poolBytes(d *Device, ptr DevicePtr, n int) (b []byte, handled bool, err error) {
	p := hostDev(d).PoolAt(uint64(ptr))
	if p == nil {
		return nil, false, nil
	}
	if n < 0 {
		return nil, true, fmt.Errorf("negative size %d", n)
	}
	b, err = p.Bytes(uint64(ptr), n)
	return b, true, err
}

// poolFreeAsync is the pool side of Stream.FreeAsync: handled is false,
// and nothing happens, if ptr is in none of d's pools.
func poolFreeAsync(d *Device, ptr DevicePtr, s *Stream) (handled bool, err error) {
	p := hostDev(d).PoolAt(uint64(ptr))
	if p == nil {
		return false, nil
	}
	if err := s.usable("Stream.FreeAsync"); err != nil {
		return true, err
	}
	return true, fromBackend("Stream.FreeAsync", p.FreeAsync(uint64(ptr), s.be, s.be.(*host.Stream).Call))
}

// poolFree is the pool side of Device.Free.
func poolFree(d *Device, ptr DevicePtr) (handled bool, err error) {
	p := hostDev(d).PoolAt(uint64(ptr))
	if p == nil {
		return false, nil
	}
	return true, fromBackend("Device.Free", p.Free(uint64(ptr)))
}

// trimPools applies every pool's release threshold, as a synchronization
// does once it has waited.
func trimPools(d *Device) {
	for _, p := range hostDev(d).Pools() {
		p.Trim()
	}
}

// hostPool is the host backend's pool behind p.
func hostPool(p *MemPool) *host.Pool { return p.be.(*host.MemPool).P }

// hostDev is d's host backend device.
func hostDev(d *Device) *host.Device { return d.be.(*host.Device) }
