package gpugraph

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/gpugraph/gpugraph/internal/backend"
	"github.com/gpugraph/gpugraph/internal/cuda"
	"github.com/gpugraph/gpugraph/internal/host"
)

// Backend names accepted by Open.
const (
	BackendHost = "host" // pure Go, runs everywhere; the default
)

// Properties describe a device, as cudaDeviceProp does.
type Properties struct {
	Ordinal              int // the device's number among its backend's (WithOrdinal)
	Name                 string
	Backend              string
	DriverVersion        int    // the CUDA driver API version implemented, as cudaDriverGetVersion
	MemoryPoolsSupported bool   // stream-ordered allocation and graph memory nodes
	TotalMem             uint64 // bytes of device memory (address space reserved for it on host)
	MultiProcessorCount  int    // blocks that run at once (GOMAXPROCS on host)
	MaxThreadsPerBlock   int
	MaxBlockDim          Dim3
	MaxGridDim           Dim3
	WarpSize             int
	SharedMemPerBlock    int
}

// Device is one GPU (or, on the host backend, this machine acting as one).
// Its methods are safe for concurrent use.
type Device struct {
	// What every call checks first, on one cache line (see Stream).
	closed atomic.Bool
	goRun  bool                  // the backend runs kernels' Go bodies (Kernel.Go), not their CUDA
	sticky atomic.Pointer[Error] // first asynchronous failure; the device is unusable after it
	be     backend.Device        // the backend's device
	loops  atomic.Bool           // a WHILE node was added on the device (loops.go)

	props Properties
	mu    sync.Mutex            // guards defPool
	once  atomic.Pointer[Error] // a transient asynchronous failure, reported once by a synchronize

	mallocs mallocTable // live Malloc allocations, for MemoryStats
	allocs  allocRanges // alloc node ranges of live graphs (graphallocs.go)

	caps    *capState       // stream capture: shared by the host backend's devices
	native  *nativeCaptures // the views of native captures: cudaCaptures on cuda, shared by its devices; noCaptures on host (mirror.go)
	capOnce sync.Once       // creates main
	main    *Scope          // the scope of calls made without one

	memCheck bool     // graph allocations are inaccessible outside their lifetime
	defPool  *MemPool // the host backend's default memory pool, once asked for (under mu)

	uobj userObjectState // user object destructors

	watches watches // what bounds the device's waits (watch.go)

	defStreams defaultStreams // the legacy default stream and its ordering
}

// Option configures Open.
type Option func(*Device)

// WithMemCheck turns on the checking mode of graph memory: a graph
// allocation is accessible only between its alloc node and its free, so a
// kernel that touches it outside its lifetime fails with ErrIllegalAddress
// and a report naming the alloc node, instead of silently reading or writing
// another allocation's memory. Graph allocations are then page-aligned.
func WithMemCheck() Option { return func(d *Device) { d.memCheck = true } }

// WithOrdinal opens device n of the backend (cudaSetDevice's ordinal;
// default 0), below DeviceCount.
func WithOrdinal(n int) Option { return func(d *Device) { d.props.Ordinal = n } }

// hostMemSize is the address space a host device reserves for device memory.
// Only what is allocated is committed, so this is cheap.
const hostMemSize = 64 << 30

// Open opens a device of the named backend; "" means "host". Each call
// returns an independent device; Close it when done.
//
// A backend name other than "host", "cuda" or "" is ErrInvalidValue. A
// backend that cannot start says why: ErrNoDevice when the NVIDIA driver
// (libcuda.so.1) cannot be loaded, with the loader's reason, or finds no
// GPU; ErrInsufficientDriver when the driver is older than CUDA 12.3;
// ErrNotSupported on a platform the backend does not run on (cuda runs on
// 64-bit Linux; host needs Linux for its device memory).
func Open(backend string, opts ...Option) (*Device, error) {
	var cfg Device // what the options ask for
	for _, o := range opts {
		o(&cfg)
	}
	switch backend {
	case "", BackendHost:
	case BackendCUDA:
		if cfg.memCheck {
			return nil, newErr("Open", ErrNotSupported, "the checking mode of graph memory is a host backend feature")
		}
		return openCUDA(cfg.props.Ordinal)
	default:
		return nil, unknownBackend("Open", backend)
	}
	d := &Device{
		props: Properties{
			Name:                 "gpugraph host (" + runtime.GOOS + "/" + runtime.GOARCH + ")",
			Backend:              BackendHost,
			DriverVersion:        13000,
			MemoryPoolsSupported: true,
			TotalMem:             0, // set below
			MultiProcessorCount:  runtime.GOMAXPROCS(0),
			MaxThreadsPerBlock:   1024,
			MaxBlockDim:          Dim3{1024, 1024, 64},
			MaxGridDim:           Dim3{1<<31 - 1, 65535, 65535},
			WarpSize:             32,
			SharedMemPerBlock:    48 << 10,
		},
	}
	d.memCheck, d.props.Ordinal = cfg.memCheck, cfg.props.Ordinal
	h, err := host.NewDevice(host.Config{Ordinal: d.props.Ordinal, MemSize: hostMemSize, MinMemSize: 1 << 30, Check: d.memCheck,
		Fail: d.failAsync, Failed: func() bool { return d.sticky.Load() != nil }})
	if err != nil {
		if isBackendErr(err) {
			return nil, fromBackend("Open", err)
		}
		return nil, newErr("Open", ErrNotSupported, "host device memory: %v", err)
	}
	d.be, d.goRun, d.props.TotalMem, d.caps, d.native = h, true, h.Mem.Size(), &hostCaps, &noCaptures
	return d, nil
}

// Properties returns the device's properties.
func (d *Device) Properties() Properties { return d.props }

// Synchronize waits for all work in all streams of the device, and returns
// the device's sticky error if an asynchronous operation failed.
func (d *Device) Synchronize() error {
	if err := d.check("Device.Synchronize"); err != nil {
		return err
	}
	if err := d.unsafeCall("Device.Synchronize", d.mainScope(), nil); err != nil {
		return err
	}
	if err := d.wait("Device.Synchronize", d.be.Synchronize); err != nil {
		return backendErr("Device.Synchronize", err)
	}
	if e := d.sticky.Load(); e != nil {
		return e
	}
	if e := d.once.Swap(nil); e != nil {
		return withOp("Device.Synchronize", e)
	}
	return nil
}

// Close waits for outstanding work, then releases the device's memory. Every
// later call on the device, its streams, events and graphs fails with
// ErrContextIsDestroyed.
func (d *Device) Close() error {
	if err := notInDestructor("Device.Close"); err != nil {
		return err
	}
	if d.closed.Load() {
		return newErr("Device.Close", ErrContextIsDestroyed, "device already closed")
	}
	d.wait("Device.Close", d.be.Synchronize)
	if !d.closed.CompareAndSwap(false, true) {
		return newErr("Device.Close", ErrContextIsDestroyed, "device already closed")
	}
	d.closeWatches()
	d.caps.endDeviceCaptures(d)
	d.native.endDevice(d)
	d.uobj.releaseAll()
	d.releaseHostMemory()
	return backendErr("Device.Close", d.be.Close())
}

// MemGetInfo reports the device's free and total memory (cudaMemGetInfo).
// On host, free is the total less what the device holds: Malloc
// allocations, the memory pools' and graph memory's reservations.
func (d *Device) MemGetInfo() (free, total uint64, err error) {
	const opName = "Device.MemGetInfo"
	if err := d.check(opName); err != nil {
		return 0, 0, err
	}
	if m, ok := d.be.(interface {
		MemGetInfo() (uint64, uint64, error)
	}); ok {
		free, total, err = m.MemGetInfo()
		return free, total, backendErr(opName, err)
	}
	st, err := d.MemoryStats()
	if err != nil {
		return 0, 0, withOp(opName, err)
	}
	total = d.props.TotalMem
	held := st.Malloc + st.Reserved + st.GraphReserved
	return total - min(total, held), total, nil
}

// check returns the error every call on a closed or failed device gets.
func (d *Device) check(opName string) error {
	if d == nil {
		return newErr(opName, ErrInvalidValue, "nil device")
	}
	if err := notInDestructor(opName); err != nil {
		return err
	}
	if d.closed.Load() {
		return newErr(opName, ErrContextIsDestroyed, "device is closed")
	}
	if e := d.sticky.Load(); e != nil {
		return withOp(opName, e)
	}
	return nil
}

// failAsync records a backend's asynchronous failure (fail).
func (d *Device) failAsync(be *backend.Error) {
	e := &Error{Op: be.Op, Code: code(be.Code), Detail: be.Detail, transient: be.Transient}
	e.Node, _ = be.Node.(*Node)
	d.fail(e)
}

// fail records the first asynchronous failure. Like CUDA's sticky errors, it
// makes every later call on the device fail: the device state is unknown.
func (d *Device) fail(e *Error) {
	if e.transient {
		d.once.CompareAndSwap(nil, e)
		return
	}
	d.sticky.CompareAndSwap(nil, e)
}

// BackendCUDA names the cuda backend in Open.
const BackendCUDA = "cuda"

// openCUDA opens the cuda backend (internal/cuda): the driver runs the
// work and checks what only it knows; this package keeps its view of each
// graph, mirroring what the driver made (capture, clone) through
// backend.Inspector.
func openCUDA(ordinal int) (*Device, error) {
	d := &Device{caps: &capState{}, native: &cudaCaptures} // the driver's captures are per device; their views, by graph handle, process-wide
	cd, p, err := cuda.Open(ordinal, func(err error) { d.fail(fromBackend("host function", err).(*Error)) })
	if err != nil {
		return nil, fromBackend("Open", err)
	}
	d.be = cd
	d.props = Properties{
		Ordinal: p.Ordinal, Name: p.Name, Backend: BackendCUDA, DriverVersion: p.DriverVersion,
		MemoryPoolsSupported: p.MemoryPoolsSupported,
		TotalMem:             p.TotalMem,
		MultiProcessorCount:  p.MultiProcessorCount,
		MaxThreadsPerBlock:   p.MaxThreadsPerBlock,
		MaxBlockDim:          Dim3{p.MaxBlockDim[0], p.MaxBlockDim[1], p.MaxBlockDim[2]},
		MaxGridDim:           Dim3{p.MaxGridDim[0], p.MaxGridDim[1], p.MaxGridDim[2]},
		WarpSize:             p.WarpSize,
		SharedMemPerBlock:    p.SharedMemPerBlock,
	}
	return d, nil
}

// DeviceCount is the number of devices the backend has
// (cudaGetDeviceCount): on cuda every GPU the driver reports
// (CUDA_VISIBLE_DEVICES is the driver's to honour); on host as many as
// SetHostDeviceCount or the environment variable GPUGRAPH_HOST_DEVICES
// say, 1 by default. Open any of them with WithOrdinal. Where the cuda
// backend cannot start, the count is 0 and the error says why, as Open's.
func DeviceCount(backend string) (int, error) {
	switch backend {
	case "", BackendHost:
		return host.DeviceCount(), nil
	case BackendCUDA:
		n, err := cuda.DeviceCount()
		return n, fromBackend("DeviceCount", err)
	}
	return 0, unknownBackend("DeviceCount", backend)
}

// unknownBackend is the error of a backend name that is neither "host" nor
// "cuda": a mistake in the call, so ErrInvalidValue.
func unknownBackend(opName, name string) error {
	return newErr(opName, ErrInvalidValue, "unknown backend %q (want %q or %q)", name, BackendHost, BackendCUDA)
}

// SetHostDeviceCount sets how many devices the host backend has, from 1 to
// 64, for the devices opened from now on (each has its own memory and
// workers). Devices already open stay as they are.
func SetHostDeviceCount(n int) error {
	return fromBackend("SetHostDeviceCount", host.SetDeviceCount(n))
}

// CanAccessPeer reports whether d can be given access to peer's memory
// (cudaDeviceCanAccessPeer). A device is not its own peer.
func (d *Device) CanAccessPeer(peer *Device) (bool, error) {
	const opName = "Device.CanAccessPeer"
	ps, err := d.peers(opName, peer)
	if err != nil {
		return false, err
	}
	ok, err := ps.CanAccessPeer(peer.be)
	return ok, backendErr(opName, err)
}

// EnablePeerAccess lets work on d (kernels, copies, memsets, graph nodes)
// use memory of peer (cudaDeviceEnablePeerAccess). Access is one way;
// enabling it twice fails with ErrPeerAccessAlreadyEnabled. Copies need no
// access: the driver copies between devices on its own. Access both ways
// between two devices lets an update of an executable graph's memcpy node
// move its destination from one's memory to the other's (Exec.SetParams);
// gpugraph knows of the access its own calls enabled, not of access
// enabled by other libraries (NCCL among them).
func (d *Device) EnablePeerAccess(peer *Device) error {
	const opName = "Device.EnablePeerAccess"
	ps, err := d.peers(opName, peer)
	if err != nil {
		return err
	}
	if peer.props.Ordinal == d.props.Ordinal {
		// cudaDeviceEnablePeerAccess's answer, measured on two GPUs.
		return newErr(opName, ErrPeerAccessUnsupported, "device %d is not its own peer", d.props.Ordinal)
	}
	return backendErr(opName, ps.EnablePeerAccess(peer.be))
}

// DisablePeerAccess revokes what EnablePeerAccess granted
// (cudaDeviceDisablePeerAccess); without it, ErrPeerAccessNotEnabled.
func (d *Device) DisablePeerAccess(peer *Device) error {
	const opName = "Device.DisablePeerAccess"
	ps, err := d.peers(opName, peer)
	if err != nil {
		return err
	}
	return backendErr(opName, ps.DisablePeerAccess(peer.be))
}

// peers checks d and peer for a peer call and returns d's backend's.
func (d *Device) peers(opName string, peer *Device) (backend.Peers, error) {
	if err := d.check(opName); err != nil {
		return nil, err
	}
	if peer == nil {
		return nil, newErr(opName, ErrInvalidDevice, "nil peer device")
	}
	if err := peer.check(opName); err != nil {
		return nil, err
	}
	if peer.props.Backend != d.props.Backend {
		return nil, newErr(opName, ErrInvalidDevice, "a %s device and a %s device", d.props.Backend, peer.props.Backend)
	}
	ps, ok := d.be.(backend.Peers)
	if !ok {
		return nil, newErr(opName, ErrNotSupported, "the backend has no peer access")
	}
	return ps, nil
}
