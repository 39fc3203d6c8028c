package gpugraph

import (
	"reflect"
	"testing"

	"github.com/gpugraph/gpugraph/internal/host"
)

// TestBodyLayout checks what goBody relies on: Kernel.Go's parameter types
// have the memory layouts of host.Body's, field for field.
func TestBodyLayout(t *testing.T) {
	var same func(a, b reflect.Type) bool
	same = func(a, b reflect.Type) bool {
		if a == b {
			return true
		}
		if a.Kind() != b.Kind() || a.Size() != b.Size() || a.Align() != b.Align() {
			return false
		}
		switch a.Kind() {
		case reflect.Struct:
			if a.NumField() != b.NumField() {
				return false
			}
			for i := range a.NumField() {
				fa, fb := a.Field(i), b.Field(i)
				if fa.Offset != fb.Offset || !same(fa.Type, fb.Type) {
					return false
				}
			}
		case reflect.Slice, reflect.Array:
			return same(a.Elem(), b.Elem())
		}
		return true
	}
	for _, c := range []struct {
		name string
		a, b reflect.Type
	}{
		{"Dim3", reflect.TypeFor[Dim3](), reflect.TypeFor[host.Dim3]()},
		{"Block", reflect.TypeFor[Block](), reflect.TypeFor[host.Block]()},
		{"Args", reflect.TypeFor[Args](), reflect.TypeFor[host.Args]()},
	} {
		if !same(c.a, c.b) {
			t.Errorf("%s and host.%s differ in layout: goBody would corrupt a kernel's arguments", c.name, c.name)
		}
	}
	ft, bt := reflect.TypeFor[func(Block, Args)](), reflect.TypeFor[host.Body]()
	if ft.NumIn() != bt.NumIn() || ft.NumOut() != bt.NumOut() {
		t.Fatal("Kernel.Go and host.Body take different parameters")
	}
	// And the conversion calls the body with what the backend passed.
	var got Block
	var gotArgs Args
	k := &Kernel{Go: func(b Block, a Args) { got, gotArgs = b, a }}
	goBody(k)(host.Block{Idx: host.Dim3{X: 1, Y: 2, Z: 3}, Dim: host.Dim3{X: 4, Y: 5, Z: 6}, Grid: host.Dim3{X: 7, Y: 8, Z: 9}, Shared: []byte{42}},
		host.Args{W: []uint64{10, 11}})
	if got.Idx != (Dim3{1, 2, 3}) || got.Dim != (Dim3{4, 5, 6}) || got.GridDim != (Dim3{7, 8, 9}) || got.Shared[0] != 42 || gotArgs.Uint64(1) != 11 {
		t.Fatalf("body got %+v %+v", got, gotArgs)
	}
}
