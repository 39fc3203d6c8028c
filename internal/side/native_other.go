//go:build !linux

package side

import (
	"errors"
	"io"

	gg "github.com/gpugraph/gpugraph"
)

// Native needs the CUDA driver, which gpugraph loads on Linux only.
func Native(*gg.Device, NativeConfig, io.Writer) (*NativeReport, error) {
	return nil, errors.New("--vs native: the cuda backend runs on Linux only")
}
