package gpugraph_test

import (
	"testing"

	"github.com/gpugraph/gpugraph/internal/backend/backendtest"
)

// The conformance suite (internal/backend/backendtest) on both backends.
// go test -run Conformance runs it; on the GPU machine (docs/gpu.md),
//
//	gpugraph.test -test.run Conformance -test.v

func TestConformanceHost(t *testing.T) { backendtest.Run(t, open) }

func TestConformanceCUDA(t *testing.T) {
	openCUDA(t).Close() // skips the whole suite where there is no GPU
	backendtest.Run(t, openCUDA)
}
