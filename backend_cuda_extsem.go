package gpugraph

import (
	"github.com/gpugraph/gpugraph/internal/backend"
)

func (s *ExternalSemaphore) cudaDestroy(opName string) error {
	return backendErr(opName, s.be.Destroy())
}

// backendSems is the backend's semaphores of sems.
func backendSems(sems []*ExternalSemaphore) []backend.ExternalSemaphore {
	bs := make([]backend.ExternalSemaphore, len(sems))
	for i, s := range sems {
		bs[i] = s.be
	}
	return bs
}
