package side

import (
	"bytes"
	"strings"
	"testing"
)

func TestParseGGTrain(t *testing.T) {
	const out = `== op by op ==
trained                  loss 2.3 -> 2.0, 900 µs per step (median over 5 timed chunks)
                         device time 880 µs per step (events)
== captured graph, replayed ==
trained                  loss 2.3893 -> 2.0089, 417.2 µs per step (median over 5 timed chunks)
                         device time 0.42 ms per step (events on the stream around each timed chunk's steps, median)
`
	r, err := parseGGTrain(out)
	if err != nil || r.wall != 417.2 || r.gpu != 420 {
		t.Fatalf("parseGGTrain = %+v, %v; want wall 417.2, gpu 420 (the captured section, ms read as 1000 µs)", r, err)
	}
	for _, bad := range []string{"", "== op by op ==\ntrained x, 1 µs per step\n", "== captured graph\nno numbers\n"} {
		if _, err := parseGGTrain(bad); err == nil {
			t.Errorf("parseGGTrain(%q) accepted", bad)
		}
	}
}

func TestParseTorchStep(t *testing.T) {
	cases := []struct {
		name, out string
		ok        bool
		wall      float64
	}{
		{"result", "noise\ntorch_step model=reference tf32=0 torch=2.11 wall_us=502.5 gpu_chunk_us=501.7 gpu_replay_us=481.3 flops=1.05e+10 fp32_peak_us=156.7\n", true, 502.5},
		{"smoke test line only", "torch_step check=cpu torch=2.11 losses=1,2\n", false, 0},
		{"missing field", "torch_step wall_us=1 gpu_chunk_us=2\n", false, 0},
		{"not a number", "torch_step wall_us=x gpu_chunk_us=2 gpu_replay_us=3\n", false, 0},
		{"nothing", "", false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := parseTorchStep(tc.out)
			if (err == nil) != tc.ok || (tc.ok && r.wall != tc.wall) {
				t.Fatalf("parseTorchStep = %+v, %v; want ok %v, wall %v", r, err, tc.ok, tc.wall)
			}
		})
	}
}

func TestPrintTorchTable(t *testing.T) {
	gg := []trainRun{{wall: 400, gpu: 398}, {wall: 420, gpu: 410}, {wall: 410, gpu: 405}}
	pt := []trainRun{{wall: 500, gpu: 499, replay: 480, fields: map[string]string{"torch": "2.11", "cuda": "13.0", "device": "H100", "flops": "1.05e+10", "fp32_peak_us": "156.7"}},
		{wall: 510, gpu: 505, replay: 482}, {wall: 505, gpu: 500, replay: 481}}
	var b bytes.Buffer
	printTorchTable(&b, TorchConfig{Reps: 3, Steps: 300}, gg, pt)
	for _, want := range []string{"gpugraph / PyTorch: wall 0.81, device 0.81", "410.0  [400.0 420.0 410.0]", "at 39% of it, PyTorch's at 31%"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
