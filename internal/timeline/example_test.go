package timeline_test

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/gpugraph/gpugraph/internal/timeline"
)

// Two activations, the second reusing the first's range after its free,
// and an output that outlives the graph.
func ExampleRender() {
	const mib = 1 << 20
	l := timeline.Layout{
		Title: "example",
		Steps: []string{"fc1 fwd", "fc2 fwd", "fc2 bwd", "fc1 bwd"},
		Allocs: []timeline.Alloc{
			{Name: "act1", Offset: 0, Size: 2 * mib, Start: 0, End: 2, Phys: []int{0}},
			{Name: "act2", Offset: 0, Size: 2 * mib, Start: 2, End: 3, Phys: []int{0}},
			{Name: "out", Offset: 2 * mib, Size: mib, Start: 1, End: 4, Phys: []int{1}},
		},
		ChunkBytes:      2 * mib,
		ReservedBytes:   4 * mib,
		LowerBoundBytes: 3 * mib,
	}
	var b bytes.Buffer
	if err := timeline.Render(&b, l); err != nil {
		fmt.Println(err)
		return
	}
	svg := b.String()
	fmt.Println(strings.HasPrefix(svg, "<svg "), strings.Contains(svg, "reserved 4.0 MiB · lower bound 3.0 MiB (×1.33)"))
	// Output: true true
}
