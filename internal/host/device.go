package host

import (
	"errors"
	"fmt"
	"sync"

	"github.com/gpugraph/gpugraph/internal/backend"
	"github.com/gpugraph/gpugraph/internal/sched"
)

// Device is the host backend's device below the gpugraph package's rules:
// its memory (Malloc's, graph memory and memory pools, each in address
// space of its own) and the worker pool that runs kernel blocks and graph
// nodes.
type Device struct {
	Mem   *Memory
	Pool  *sched.Pool
	check bool

	gmMu sync.Mutex
	gm   *GraphMem // created with the first alloc node

	poolMu sync.Mutex
	pools  []*Pool // memory pools still holding their reservation
}

// NewDevice reserves size bytes of address space for Malloc (at least min
// where the system refuses that much). check makes graph allocations
// inaccessible outside their lifetime.
func NewDevice(size, min uintptr, check bool) (*Device, error) {
	mem, err := NewMemory(size, min)
	if err != nil {
		return nil, err
	}
	return &Device{Mem: mem, Pool: sched.Default(), check: check}, nil
}

// GraphMem is the device's graph memory, created on first use.
func (d *Device) GraphMem() (*GraphMem, error) {
	d.gmMu.Lock()
	defer d.gmMu.Unlock()
	if d.gm == nil {
		gm, err := NewGraphMem(d.check)
		if err != nil {
			return nil, err
		}
		d.gm = gm
	}
	return d.gm, nil
}

// GraphMemIfAny is the device's graph memory, nil if none was created.
func (d *Device) GraphMemIfAny() *GraphMem {
	d.gmMu.Lock()
	defer d.gmMu.Unlock()
	return d.gm
}

// NewPool creates a memory pool of at most maxSize bytes, listed for
// address lookups until it is destroyed and released.
func (d *Device) NewPool(maxSize uint64) (*Pool, error) {
	var p *Pool
	p, err := NewPool(maxSize, func() { d.unlist(p) })
	if err != nil {
		return nil, err
	}
	d.poolMu.Lock()
	d.pools = append(d.pools, p)
	d.poolMu.Unlock()
	return p, nil
}

// unlist drops a released pool. It runs under the pool's lock.
func (d *Device) unlist(p *Pool) {
	d.poolMu.Lock()
	defer d.poolMu.Unlock()
	for i, x := range d.pools {
		if x == p {
			d.pools = append(d.pools[:i], d.pools[i+1:]...)
			return
		}
	}
}

// PoolAt returns the pool whose address range holds ptr, or nil. The
// caller's calls on it check that it has not been released since.
func (d *Device) PoolAt(ptr uint64) *Pool {
	d.poolMu.Lock()
	defer d.poolMu.Unlock()
	for _, p := range d.pools {
		if p.Contains(ptr) {
			return p
		}
	}
	return nil
}

// Pools returns a snapshot of the pools.
func (d *Device) Pools() []*Pool {
	d.poolMu.Lock()
	defer d.poolMu.Unlock()
	return append([]*Pool(nil), d.pools...)
}

// Bytes returns the device range [p, p+n) as bytes after checking that it
// lies inside one live allocation: of Malloc, of a graph (live or not:
// liveness is a matter of execution order) or of a pool.
func (d *Device) Bytes(p uint64, n int) ([]byte, error) {
	if n < 0 {
		return nil, fmt.Errorf("negative size %d", n)
	}
	if d.Mem.Contains(p, n) {
		return d.Mem.Bytes(p, n)
	}
	if b, handled, err := d.GraphMemIfAny().Bytes(p, n); handled {
		return b, err
	}
	if pool := d.PoolAt(p); pool != nil {
		b, err := pool.Bytes(p, n)
		var be *backend.Error
		if errors.As(err, &be) {
			return nil, errors.New(be.Detail)
		}
		return b, err
	}
	return nil, fmt.Errorf("[%#x, +%d) is not device memory of this device", p, n)
}

// Close releases the device's memory: graph memory, pools and Malloc's.
// The caller has waited for all work.
func (d *Device) Close() error {
	d.GraphMemIfAny().Close()
	d.poolMu.Lock()
	pools := d.pools
	d.pools = nil
	d.poolMu.Unlock()
	for _, p := range pools {
		p.Release()
	}
	return d.Mem.Release()
}
