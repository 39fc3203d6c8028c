package side

import (
	"flag"
	"fmt"
	"os"
	"testing"
)

// TestMain lets the harnesses run this test binary as the gpugraph side:
// with GG_SIDE_TEST_TFSIDE=1 in its environment it is "gpugraph tfside",
// its flags those of TFSideConfig.Flags.
func TestMain(m *testing.M) {
	if os.Getenv("GG_SIDE_TEST_TFSIDE") == "1" {
		cfg := DefaultTFSideConfig()
		fs := flag.NewFlagSet("tfside", flag.ContinueOnError)
		cfg.Flags(fs)
		err := fs.Parse(os.Args[1:])
		if err == nil {
			err = TFSide(os.Stdout, cfg)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "tfside:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testGoSide is this test binary as gpugraph tfside.
func testGoSide(t *testing.T) Command {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Command{Path: exe, Env: []string{"GG_SIDE_TEST_TFSIDE=1"}}
}
