//go:build linux

package driver

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestSymbolsCalled checks, without a GPU, that the entry points the typed
// methods call by name are the ones Load looks up: a name misspelt in
// either place would fail only on the GPU, with CUDA_ERROR_NOT_FOUND. Every
// "cu..." string of the package's source must be in driverSymbols, and
// every symbol must be named somewhere besides its own list.
func TestSymbolsCalled(t *testing.T) {
	_, self, _, _ := runtime.Caller(0)
	dir := filepath.Dir(self)
	if _, err := os.Stat(filepath.Join(dir, "api.go")); err != nil {
		t.Skipf("the package's sources are not here (%v): a test binary run elsewhere", err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	entry := regexp.MustCompile(`^cu[A-Z]\w*$`)
	uses := map[string]int{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		af, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && entry.MatchString(s) {
					uses[s]++
				}
			}
			return true
		})
	}
	for name := range uses {
		if !slices.Contains(driverSymbols, name) {
			t.Errorf("%s is called but not in driverSymbols", name)
		}
	}
	for _, name := range driverSymbols {
		if uses[name] < 2 {
			t.Errorf("%s is looked up but never called", name)
		}
	}
}
