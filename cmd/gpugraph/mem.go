package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/gpugraph/gpugraph/internal/footprint"
)

func memMain(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("mem", stderr)
	backend := fs.String("backend", "host", "device backend")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return runMem(stdout, *backend)
}

// runMem prints the graph memory footprint report: for each scenario, the
// memory reserved against the lower bound (the most that can be live at once
// under some execution order) and, where measured, against the driver.
func runMem(w io.Writer, backend string) error {
	d, err := openDevice(backend)
	if err != nil {
		return err
	}
	defer d.Close()
	rows, err := footprint.Measure(d)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "gpugraph mem: graph memory reserved against the lower bound\n")
	fmt.Fprintf(w, "date:   %s\ndevice: %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), d.Properties().Name)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tallocs\tbound MiB\treserved MiB\tratio\tdriver MiB\t")
	mib := func(b int64) string { return fmt.Sprintf("%.0f", float64(b)/footprint.MiB) }
	for _, r := range rows {
		allocs, driver, ratio := "", "", ""
		if r.Allocations > 0 {
			allocs = fmt.Sprint(r.Allocations)
		}
		if r.Driver > 0 {
			driver = mib(r.Driver)
		}
		if r.LowerBound > 0 {
			ratio = fmt.Sprintf("%.2f", float64(r.Reserved)/float64(r.LowerBound))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Name, allocs, mib(r.LowerBound), mib(r.Reserved), ratio, driver)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nbound: the most the graph's allocations can hold at once under some valid order;")
	fmt.Fprintln(w, "for the last two rows, the largest single graph. driver: the same graphs on CUDA 13.0, H100")
	fmt.Fprintln(w, "(tools/probe/footprint.cu, docs/driver-footprint.txt).")
	return nil
}
