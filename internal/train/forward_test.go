package train

import (
	"bytes"
	"cmp"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// forwardRef is the forward pass on the host, in float64.
func forwardRef(cfg Config, params, x []float32, rows int) []float64 {
	in, out := cfg.dims()
	a := make([]float64, len(x))
	for i, v := range x {
		a[i] = float64(v)
	}
	off := 0
	for l := range in {
		w, b := params[off:off+out[l]*in[l]], params[off+out[l]*in[l]:off+out[l]*in[l]+out[l]]
		off += out[l]*in[l] + out[l]
		h := make([]float64, rows*out[l])
		for r := range rows {
			for o := range out[l] {
				s := float64(b[o])
				for i := range in[l] {
					s += a[r*in[l]+i] * float64(w[o*in[l]+i])
				}
				if l < len(in)-1 && s < 0 {
					s = 0
				}
				h[r*out[l]+o] = s
			}
		}
		a = h
	}
	return a
}

func forwardOn(t *testing.T, m *Model, s *gg.Stream, x []float32, rows int) []float32 {
	t.Helper()
	xp := upload(t, s, x)
	defer s.FreeAsync(xp)
	z, err := m.Forward(s, xp, rows)
	ok(t, err)
	got := make([]float32, rows*m.cfg.Classes)
	ok(t, s.Memcpy(gg.DtoH(gg.Bytes(got), z)))
	ok(t, s.FreeAsync(z))
	ok(t, s.Synchronize())
	return got
}

// Forward matches a float64 reference, and each row's logits are the same
// bits whatever the number of rows around it: padding a batch changes no
// real row.
func TestForwardRowsAreIndependent(t *testing.T) {
	for _, be := range []string{gg.BackendHost, gg.BackendCUDA} {
		t.Run(be, func(t *testing.T) {
			var s *gg.Stream
			if be == gg.BackendHost {
				_, s = openHost(t)
			} else {
				_, s = openCUDA(t)
			}
			cfg := Small()
			m, err := NewModel(s, cfg)
			ok(t, err)
			defer m.Destroy()
			params, err := m.ReadParams(s)
			ok(t, err)
			r := rand.New(rand.NewPCG(3, 4))
			const rows = 37
			x := make([]float32, rows*cfg.In)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			all := forwardOn(t, m, s, x, rows)
			ref := forwardRef(cfg, params, x, rows)
			for i, v := range all {
				if math.Abs(float64(v)-ref[i]) > 1e-4*(1+math.Abs(ref[i])) {
					t.Fatalf("logit %d = %v, reference %v", i, v, ref[i])
				}
			}
			for _, row := range []int{0, 17, rows - 1} {
				one := forwardOn(t, m, s, x[row*cfg.In:(row+1)*cfg.In], 1)
				if !slices.Equal(one, all[row*cfg.Classes:(row+1)*cfg.Classes]) {
					t.Errorf("row %d alone %v, in a batch of %d %v", row, one, rows, all[row*cfg.Classes:(row+1)*cfg.Classes])
				}
			}
			if _, err := m.Forward(s, 0, 1); !errors.Is(err, gg.ErrInvalidValue) {
				t.Errorf("nil input: %v", err)
			}
			if _, err := m.Forward(s, 1, 0); !errors.Is(err, gg.ErrInvalidValue) {
				t.Errorf("0 rows: %v", err)
			}
		})
	}
}

// The forward pass captured in a graph set, one graph per batch size,
// gives what it gives op by op.
func TestForwardGraphSet(t *testing.T) {
	d, s := openHost(t)
	cfg := Small()
	m, err := NewModel(s, cfg)
	ok(t, err)
	defer m.Destroy()
	x, err := d.Malloc(4 * 16 * cfg.In)
	ok(t, err)
	defer d.Free(x)
	h := make([]float32, 16*cfg.In)
	for i := range h {
		h[i] = float32(i%13) / 7
	}
	ok(t, s.Memcpy(gg.HtoD(x, gg.Bytes(h))))
	set, err := gg.NewGraphSet(s, func(s *gg.Stream, rows int) ([]gg.DevicePtr, error) {
		z, err := m.Forward(s, x, rows)
		return []gg.DevicePtr{z}, err
	}, gg.GraphSetConfig[int]{Keys: []int{1, 4, 16}, Compare: cmp.Compare[int], OnMissing: gg.MissingPad})
	ok(t, err)
	defer set.Close()
	st := set.Stats()
	if st.GraphBytes != st.Members[0].GraphBytes || st.Members[0].Key != 16 {
		t.Errorf("stats %+v", st)
	}
	for _, rows := range []int{16, 3, 1, 9} {
		outs, err := set.Replay(rows)
		ok(t, err)
		got := make([]float32, rows*cfg.Classes)
		ok(t, outs[0].Read(gg.Bytes(got)))
		want := forwardOn(t, m, s, h[:rows*cfg.In], rows)
		if !slices.Equal(got, want) {
			t.Errorf("%d rows: graph %v, op by op %v", rows, got[:4], want[:4])
		}
	}
}

func TestCheckpointRoundTrip(t *testing.T) {
	cfg := Small()
	c := Checkpoint{Config: cfg, Params: make([]float32, cfg.NumParams()), Keys: []int{1, 2, 4}}
	for i := range c.Params {
		c.Params[i] = float32(i) / 3
	}
	path := filepath.Join(t.TempDir(), "m.ckpt")
	ok(t, SaveCheckpoint(path, c))
	back, err := LoadCheckpoint(path)
	ok(t, err)
	if back.Config != c.Config || !slices.Equal(back.Params, c.Params) || !slices.Equal(back.Keys, c.Keys) {
		t.Fatalf("round trip changed the checkpoint")
	}
	raw, err := os.ReadFile(path)
	ok(t, err)
	flip := bytes.Clone(raw)
	flip[len(flip)-10] ^= 1
	bad := []struct {
		name string
		data []byte
		msg  string
	}{
		{"empty", nil, "ends inside the magic"},
		{"other file", []byte("PK\x03\x04 not a checkpoint at all"), "not a gpugraph model checkpoint"},
		{"cut short", raw[:len(raw)-100], "ends inside the parameters"},
		{"damaged", flip, "checksum mismatch"},
	}
	for _, b := range bad {
		_, err := ReadCheckpoint(bytes.NewReader(b.data))
		if !errors.Is(err, gg.ErrInvalidValue) || !strings.Contains(err.Error(), b.msg) {
			t.Errorf("%s: %v, want %q", b.name, err, b.msg)
		}
	}
	c.Params = c.Params[1:]
	if err := SaveCheckpoint(path, c); !errors.Is(err, gg.ErrInvalidValue) {
		t.Errorf("wrong parameter count saved: %v", err)
	}
	c.Params, c.Keys = back.Params, []int{2, 2}
	if err := SaveCheckpoint(path, c); !errors.Is(err, gg.ErrInvalidValue) {
		t.Errorf("duplicate keys saved: %v", err)
	}
}

// The precision travels in the checkpoint; an FP32 one is written as
// before the field existed (it is omitted), so older readers read it.
func TestCheckpointPrecision(t *testing.T) {
	for _, p := range []string{"", FP32, TF32, BF16} {
		cfg := tiny(SGD)
		cfg.Precision = p
		c := Checkpoint{Config: cfg, Params: make([]float32, cfg.NumParams())}
		var b bytes.Buffer
		_, err := c.WriteTo(&b)
		ok(t, err)
		if has := strings.Contains(b.String(), `"Precision"`); has != (p != "") {
			t.Errorf("precision %q: header mentions it: %v", p, has)
		}
		back, err := ReadCheckpoint(&b)
		ok(t, err)
		if back.Config != cfg {
			t.Errorf("precision %q: read back %+v", p, back.Config)
		}
	}
}

// Forward computes in FP32 from the master weights in every precision:
// the same logits, bit for bit, from the same parameters.
func TestForwardPrecision(t *testing.T) {
	_, s := openHost(t)
	cfg := tiny(SGD)
	r := newRand(4, 4)
	params, x := randVec(r, cfg.NumParams()), randVec(r, 5*cfg.In)
	var want []float32
	for _, p := range Precisions {
		cfg.Precision = p
		m, err := NewModel(s, cfg)
		ok(t, err)
		ok(t, m.WriteParams(s, params))
		got := forwardOn(t, m, s, x, 5)
		ok(t, m.Destroy())
		if want == nil {
			want = got
			continue
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: logits %v, fp32 %v", p, got[:3], want[:3])
		}
	}
}

func TestServeKeys(t *testing.T) {
	k := ServeKeys(512)
	if len(k) != 51 || k[0] != 1 || k[3] != 8 || k[33] != 248 || k[34] != 256 || k[50] != 512 {
		t.Errorf("ServeKeys(512) = %v", k)
	}
	if k := ServeKeys(20); !slices.Equal(k, []int{1, 2, 4, 8, 16}) {
		t.Errorf("ServeKeys(20) = %v", k)
	}
}
