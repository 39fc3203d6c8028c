package host

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/gpugraph/gpugraph/internal/backend"
	"github.com/gpugraph/gpugraph/internal/sched"
)

// Device is the host backend's device below the gpugraph package's rules:
// its memory (Malloc's, graph memory and memory pools, each in address
// space of its own) and the worker pool that runs kernel blocks and graph
// nodes.
type Device struct {
	Mem  *Memory
	Pool *sched.Pool
	cfg  Config

	mu      sync.Mutex
	streams map[*Stream]struct{}
	peers   map[int]bool // ordinals of devices whose memory work on d may use
	defPool *MemPool     // the default pool, once asked for
	closed  atomic.Bool

	gmMu sync.Mutex
	gm   *GraphMem // created with the first alloc node

	poolMu sync.Mutex
	pools  []*Pool // memory pools still holding their reservation
}

// Config is what the gpugraph package gives a host device.
type Config struct {
	// Ordinal is the device's number, below DeviceCount.
	Ordinal int
	// MemSize bytes of address space are reserved for Malloc, at least
	// MinMemSize where the system refuses that much.
	MemSize, MinMemSize uintptr
	// Check makes graph allocations inaccessible outside their lifetime.
	Check bool
	// Fail records an asynchronous failure; Failed reports one (work
	// queued after it is skipped).
	Fail   func(*backend.Error)
	Failed func() bool
}

// NewDevice opens a host device.
func NewDevice(cfg Config) (*Device, error) {
	d := &Device{cfg: cfg, streams: map[*Stream]struct{}{}}
	if err := register(d); err != nil {
		return nil, err
	}
	mem, err := NewMemory(cfg.MemSize, cfg.MinMemSize)
	if err != nil {
		unregister(d)
		return nil, err
	}
	d.Mem = mem
	return d, nil
}

var (
	_ backend.Device             = (*Device)(nil)
	_ backend.Grapher            = (*Device)(nil)
	_ backend.GraphMemory        = (*Device)(nil)
	_ backend.ExternalSemaphores = (*Device)(nil)
)

// forget drops a stream whose worker has exited.
func (d *Device) forget(s *Stream) {
	d.mu.Lock()
	delete(d.streams, s)
	d.mu.Unlock()
}

// streamList is a snapshot of the streams.
func (d *Device) streamList() []*Stream {
	d.mu.Lock()
	defer d.mu.Unlock()
	ss := make([]*Stream, 0, len(d.streams))
	for s := range d.streams {
		ss = append(ss, s)
	}
	return ss
}

// syncAll waits for the work issued so far to every stream.
func (d *Device) syncAll() {
	for _, s := range d.streamList() {
		s.wait()
	}
}

// Synchronize waits for all work and applies the pools' release
// thresholds.
func (d *Device) Synchronize() error {
	d.syncAll()
	d.poolsAfterSync()
	return nil
}

// poolsAfterSync applies every pool's release threshold: frees that have
// run by now have returned their ranges, so idle granules above the
// threshold can go.
func (d *Device) poolsAfterSync() {
	for _, p := range d.Pools() {
		p.Trim()
	}
}

// NewEvent creates an event.
func (d *Device) NewEvent(backend.EventFlags) (backend.Event, error) { return &Event{d: d}, nil }

// Malloc allocates n > 0 bytes.
func (d *Device) Malloc(n int) (uint64, error) {
	p, err := d.Mem.Malloc(n)
	if err != nil {
		return 0, backend.Errorf(backend.ErrMemoryAllocation, "%v", err)
	}
	return p, nil
}

// Free waits for all work, then frees what Malloc, a pool or a graph
// allocated.
func (d *Device) Free(p uint64) error {
	d.syncAll()
	if d.Mem.Contains(p, 1) {
		if !d.Mem.Free(p) {
			return backend.Errorf(backend.ErrInvalidValue, "%#x is not the start of a live allocation", p)
		}
		return nil
	}
	if handled, err := d.GraphMemIfAny().Free(p); handled {
		if err != nil {
			return backend.Errorf(backend.ErrInvalidValue, "%v", err)
		}
		return nil
	}
	if pool := d.PoolAt(p); pool != nil {
		return pool.Free(p)
	}
	return backend.Errorf(backend.ErrInvalidValue, "%#x is not device memory of this device", p)
}

// copyOp resolves a copy's device sides.
func (d *Device) copyOp(p *backend.Memcpy) (op, error) {
	side := func(dev uint64, host []byte) ([]byte, error) {
		if host != nil {
			return host[:p.Size], nil
		}
		if p.Size == 0 {
			return nil, nil
		}
		b, err := d.bytes(dev, p.Size, true)
		if err != nil {
			return nil, backend.Errorf(backend.ErrInvalidValue, "%v", err)
		}
		return b, nil
	}
	dst, err := side(p.Dst, p.DstHost)
	if err != nil {
		return op{}, err
	}
	src, err := side(p.Src, p.SrcHost)
	if err != nil {
		return op{}, err
	}
	return op{kind: opMemcpy, dst: dst, src: src}, nil
}

// memsetOp resolves a fill's range.
func (d *Device) memsetOp(p *backend.Memset) (op, error) {
	var dst []byte
	if p.Total > 0 {
		// Any device's memory: whether this device may set it (a stream's
		// memset needs access, a node's does not) was decided by the
		// gpugraph package (lowerMemset); here the bytes are only found.
		b, err := d.bytes(p.Dst, p.Total, true)
		if err != nil {
			return op{}, backend.Errorf(backend.ErrInvalidValue, "%v", err)
		}
		dst = b
	}
	return op{kind: opMemset, dst: dst, set: memsetOp{p.Value, p.ElementSize, p.Width, p.Height, p.Pitch}}, nil
}

// Memcpy copies after all work, on the caller's goroutine; nothing runs on
// a failed device.
func (d *Device) Memcpy(p *backend.Memcpy) error {
	o, err := d.copyOp(p)
	if err != nil {
		return err
	}
	return d.runSync(&o)
}

// Memset fills after all work; nothing runs on a failed device.
func (d *Device) Memset(p *backend.Memset) error {
	o, err := d.memsetOp(p)
	if err != nil {
		return err
	}
	return d.runSync(&o)
}

func (d *Device) runSync(o *op) error {
	// The copy runs on the caller's goroutine: a fault on device memory
	// must become an error here too, not a crash.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	d.syncAll()
	if d.cfg.Failed() {
		return nil // the caller reports the device's error
	}
	if err := o.run(d); err != nil {
		return err
	}
	return nil
}

// GraphMemStats reports the graph memory footprint.
func (d *Device) GraphMemStats() (backend.GraphMemStats, error) {
	return d.GraphMemIfAny().Stats(), nil
}

// ResetGraphMemHigh resets the high-water marks.
func (d *Device) ResetGraphMemHigh() error { d.GraphMemIfAny().ResetHigh(); return nil }

// TrimGraphMem returns graph memory not in use to the system.
func (d *Device) TrimGraphMem() error { d.GraphMemIfAny().Trim(); return nil }

// GraphMem is the device's graph memory, created on first use.
func (d *Device) GraphMem() (*GraphMem, error) {
	d.gmMu.Lock()
	defer d.gmMu.Unlock()
	if d.gm == nil {
		gm, err := NewGraphMem(d.cfg.Check)
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

// newPool creates a memory pool of at most maxSize bytes, listed for
// address lookups until it is destroyed and released.
func (d *Device) newPool(maxSize uint64) (*Pool, error) {
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
// liveness is a matter of execution order) or of a pool, of d or, where d
// has access to it (accessibleFrom), of another device.
func (d *Device) Bytes(p uint64, n int) ([]byte, error) { return d.bytes(p, n, false) }

// bytes is Bytes; anyPeer accepts any device's memory, access or not (a
// copy: the driver copies between devices without peer access).
func (d *Device) bytes(p uint64, n int, anyPeer bool) ([]byte, error) {
	if n < 0 {
		return nil, fmt.Errorf("negative size %d", n)
	}
	if d.holds(p) {
		return d.ownBytes(p, n)
	}
	if x := d.owner(p); x != nil {
		if !anyPeer && !x.accessibleFrom(d, p) {
			return nil, fmt.Errorf("[%#x, +%d) is memory of device %d, which device %d has no access to", p, n, x.cfg.Ordinal, d.cfg.Ordinal)
		}
		return x.ownBytes(p, n)
	}
	return nil, fmt.Errorf("[%#x, +%d) is not device memory of this device", p, n)
}

// holds reports whether p is in d's memory: Malloc's, graph memory or a
// pool's.
func (d *Device) holds(p uint64) bool {
	return d.Mem.Contains(p, 1) || d.GraphMemIfAny().Contains(p) || d.PoolAt(p) != nil
}

// ownBytes is Bytes for d's own memory only.
func (d *Device) ownBytes(p uint64, n int) ([]byte, error) {
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

// Close lets the streams' workers exit once their work is done and
// releases the device's memory: graph memory, pools and Malloc's. The
// caller has waited for all work.
func (d *Device) Close() error {
	d.closed.Store(true)
	unregister(d)
	for _, s := range d.streamList() {
		s.shutdown()
	}
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

// CheckRange reports whether [p, p+n) lies inside one live allocation
// that work on d may use.
func (d *Device) CheckRange(p uint64, n int) error {
	_, err := d.Bytes(p, n)
	return err
}

// CheckCopyRange is CheckRange for a side of a copy, which may be memory
// of any device: the driver copies between devices without peer access.
func (d *Device) CheckCopyRange(p uint64, n int) error {
	_, err := d.bytes(p, n, true)
	return err
}

// FreeAsync frees in s's order a graph allocation live after its graph's
// launch, or memory from a pool: the allocation ends now, its memory is
// released when s reaches the free.
func (d *Device) FreeAsync(bs backend.Stream, p uint64) error {
	s := bs.(*Stream)
	if gm := d.GraphMemIfAny(); gm.Contains(p) {
		var a *GraphAlloc
		return s.enqueue(&op{kind: opCall, host: func() { gm.Freed(a, true) }}, func() (uint64, error) {
			var err error
			if a, _, err = gm.TakeOutstanding(p); err != nil {
				return 0, backend.Errorf(backend.ErrInvalidValue, "%v", err)
			}
			return 0, nil
		})
	}
	if pool := d.PoolAt(p); pool != nil {
		// Queued under the pool's lock, so that no allocation in s takes
		// the range before the free is in s's queue. Stream workers run ops
		// without their stream's lock, so the free cannot deadlock with this.
		return pool.FreeAsync(p, s, s.Call)
	}
	return backend.Errorf(backend.ErrInvalidValue, "%#x was not allocated by MallocAsync or by a graph", p)
}

// SignalExternalSemaphores queues a signal of sems[i] to values[i] in s.
func (d *Device) SignalExternalSemaphores(s backend.Stream, sems []backend.ExternalSemaphore, values []uint64) error {
	return s.(*Stream).ExtSems(true, sems, values)
}

// WaitExternalSemaphores makes later work in s wait for sems[i] to reach
// values[i].
func (d *Device) WaitExternalSemaphores(s backend.Stream, sems []backend.ExternalSemaphore, values []uint64) error {
	return s.(*Stream).ExtSems(false, sems, values)
}

// ImportExternalSemaphoreFD is not supported: the host backend has no
// graphics API to import from.
func (d *Device) ImportExternalSemaphoreFD(kind, fd int) (backend.ExternalSemaphore, error) {
	return nil, backend.Errorf(backend.ErrNotSupported, "the host backend cannot import operating-system semaphores: "+
		"make one with NewExternalSemaphore and signal it from Go")
}

// LoopsAlone: the host runs WHILE loops alone in their graphs, as the
// cuda backend must (the driver loses the context otherwise; see the
// gpugraph package's loops.go), so that both run the same graphs: the
// same order, and a whole-graph update that pairs nodes the same way.
func (d *Device) LoopsAlone() {}
