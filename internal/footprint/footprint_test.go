package footprint

import (
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

func TestLowerBoundSmallCases(t *testing.T) {
	d, err := gg.Open("host")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	cases := []struct {
		name  string
		build func(b *builder)
		want  int64
	}{
		{"empty", func(*builder) {}, 0},
		{"one", func(b *builder) { b.use(3 * MiB) }, 3 * MiB},
		{"chain", func(b *builder) { b.use(5*MiB, b.use(3*MiB)) }, 5 * MiB},
		{"never freed", func(b *builder) { a, _ := b.alloc(2 * MiB); b.use(3*MiB, a) }, 5 * MiB},
		{"diamond", Scenarios[2].Build, 128 * MiB},
		{"reuse", Scenarios[4].Build, 128 * MiB},
		{"free not after alloc of the other", func(b *builder) {
			a, p := b.alloc(MiB)
			b.free(p, a)
			b.use(2 * MiB) // independent: both may be live together
		}, 3 * MiB},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, _ := d.NewGraph()
			b := &builder{g: g}
			tc.build(b)
			if b.err != nil {
				t.Fatal(b.err)
			}
			lb, _, err := LowerBound(g)
			if err != nil || lb != tc.want {
				t.Fatalf("bound %d MiB (%v), want %d MiB", lb/MiB, err, tc.want/MiB)
			}
		})
	}
}

// TestFootprintTargets: every scenario reserves at most 1.10 times its lower
// bound, graphs in one stream reserve the largest of them, and graphs in a
// stream each reserve no more than the sum.
func TestFootprintTargets(t *testing.T) {
	if testing.Short() {
		t.Skip("maps about 2 GiB")
	}
	d, err := gg.Open("host")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	rows, err := Measure(d)
	if err != nil {
		t.Fatal(err)
	}
	n := len(Scenarios)
	var sum int64
	for _, r := range rows[:n] {
		t.Logf("%-70s bound %5d MiB reserved %5d MiB", r.Name, r.LowerBound/MiB, r.Reserved/MiB)
		if float64(r.Reserved) > 1.10*float64(r.LowerBound) || r.Reserved < r.LowerBound {
			t.Errorf("%s: reserved %d MiB against a bound of %d MiB", r.Name, r.Reserved/MiB, r.LowerBound/MiB)
		}
		sum += r.Reserved
	}
	if one := rows[n]; one.Reserved != one.LowerBound {
		t.Errorf("one stream: reserved %d MiB, want the largest graph's %d MiB", one.Reserved/MiB, one.LowerBound/MiB)
	}
	// Launches in different streams share memory only once earlier ones
	// are done, which depends on timing: between the largest and the sum.
	if each := rows[n+1]; each.Reserved < each.LowerBound || each.Reserved > sum {
		t.Errorf("a stream each: reserved %d MiB, want between the largest %d MiB and the sum %d MiB", each.Reserved/MiB, each.LowerBound/MiB, sum/MiB)
	}
}
