package host

import (
	"os"
	"runtime"
	"strconv"
	"sync"

	"github.com/gpugraph/gpugraph/internal/backend"
	"github.com/gpugraph/gpugraph/internal/sched"
)

// CountEnv names the environment variable that sets how many host devices
// the process has, when the program does not (SetDeviceCount).
const CountEnv = "GPUGRAPH_HOST_DEVICES"

// devices are the host backend's devices in this process: how many there
// are, the workers of each ordinal, and those open (for peer memory).
var devices struct {
	mu    sync.Mutex
	count int           // 0: not chosen yet (CountEnv, else 1)
	pools []*sched.Pool // by ordinal; device 0 has the process-wide pool
	open  []*Device
}

// DeviceCount is the number of host devices: as set by SetDeviceCount,
// else by CountEnv, else 1.
func DeviceCount() int {
	devices.mu.Lock()
	defer devices.mu.Unlock()
	return countLocked()
}

func countLocked() int {
	if devices.count == 0 {
		devices.count = 1
		if n, err := strconv.Atoi(os.Getenv(CountEnv)); err == nil && n >= 1 {
			devices.count = n
		}
	}
	return devices.count
}

// SetDeviceCount sets the number of host devices devices opened from now
// on choose from; devices open stay as they are.
func SetDeviceCount(n int) error {
	if n < 1 || n > 64 {
		return backend.Errorf(backend.ErrInvalidValue, "%d host devices: from 1 to 64", n)
	}
	devices.mu.Lock()
	devices.count = n
	devices.mu.Unlock()
	return nil
}

// register checks d's ordinal, gives it its ordinal's workers and lists it.
func register(d *Device) error {
	devices.mu.Lock()
	defer devices.mu.Unlock()
	ord := d.cfg.Ordinal
	if n := countLocked(); ord < 0 || ord >= n {
		return backend.Errorf(backend.ErrInvalidDevice, "device %d: the host backend has %d (set with %s or SetHostDeviceCount)", ord, n, CountEnv)
	}
	for len(devices.pools) <= ord {
		i := len(devices.pools)
		p := sched.Default()
		if i > 0 { // each device its own workers, as each GPU has its own SMs
			p = sched.NewPool(runtime.GOMAXPROCS(0) - 1)
		}
		devices.pools = append(devices.pools, p)
	}
	d.Pool = devices.pools[ord]
	devices.open = append(devices.open, d)
	return nil
}

// unregister drops a closed device from the list.
func unregister(d *Device) {
	devices.mu.Lock()
	defer devices.mu.Unlock()
	for i, x := range devices.open {
		if x == d {
			devices.open = append(devices.open[:i], devices.open[i+1:]...)
			return
		}
	}
}

// owner returns the open device, other than d, whose memory holds p, or
// nil.
func (d *Device) owner(p uint64) *Device {
	devices.mu.Lock()
	open := append([]*Device(nil), devices.open...)
	devices.mu.Unlock()
	for _, x := range open {
		if x != d && x.holds(p) {
			return x
		}
	}
	return nil
}

// MemoryOwner returns the ordinal of the open device whose memory holds p
// (backend.MemoryOwners), or -1.
func (d *Device) MemoryOwner(p uint64) int {
	if d.holds(p) {
		return d.cfg.Ordinal
	}
	if x := d.owner(p); x != nil {
		return x.cfg.Ordinal
	}
	return -1
}

// OpenDevices is the number of host devices open (backend.MemoryOwners).
func (d *Device) OpenDevices() int {
	devices.mu.Lock()
	defer devices.mu.Unlock()
	return len(devices.open)
}

// Ordinal is the device's number.
func (d *Device) Ordinal() int { return d.cfg.Ordinal }

var (
	_ backend.Peers        = (*Device)(nil)
	_ backend.MemoryOwners = (*Device)(nil)
)

// CanAccessPeer reports whether d can be given access to peer's memory:
// any other host device can.
func (d *Device) CanAccessPeer(peer backend.Device) (bool, error) {
	p, ok := peer.(*Device)
	return ok && p.cfg.Ordinal != d.cfg.Ordinal, nil
}

// EnablePeerAccess lets work on d use peer's memory.
func (d *Device) EnablePeerAccess(peer backend.Device) error {
	p := peer.(*Device)
	if p.cfg.Ordinal == d.cfg.Ordinal {
		return backend.Errorf(backend.ErrInvalidDevice, "device %d is not its own peer", d.cfg.Ordinal)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.peers[p.cfg.Ordinal] {
		return backend.Errorf(backend.ErrPeerAccessAlreadyEnabled, "from device %d to device %d", d.cfg.Ordinal, p.cfg.Ordinal)
	}
	if d.peers == nil {
		d.peers = map[int]bool{}
	}
	d.peers[p.cfg.Ordinal] = true
	return nil
}

// DisablePeerAccess revokes what EnablePeerAccess granted.
func (d *Device) DisablePeerAccess(peer backend.Device) error {
	p := peer.(*Device)
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.peers[p.cfg.Ordinal] {
		return backend.Errorf(backend.ErrPeerAccessNotEnabled, "from device %d to device %d", d.cfg.Ordinal, p.cfg.Ordinal)
	}
	delete(d.peers, p.cfg.Ordinal)
	return nil
}

// PeerAccessEnabled reports whether work on an open host device of
// ordinal from may use memory of device to: whether one of them has
// enabled access (host devices keep it per Device, and several may be open
// with one ordinal). Only EnablePeerAccess grants it on this backend.
func (d *Device) PeerAccessEnabled(from, to int) bool {
	devices.mu.Lock()
	open := append([]*Device(nil), devices.open...)
	devices.mu.Unlock()
	for _, x := range open {
		if x.cfg.Ordinal == from && x.peerAccess(to) {
			return true
		}
	}
	return false
}

// peerAccess reports whether work on d may use memory of device ord.
func (d *Device) peerAccess(ord int) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.peers[ord]
}

// accessibleFrom reports whether x's memory at p is accessible from work
// on device d (another device): pool memory where its pool grants d access
// (cudaMemPoolSetAccess; peer access does not open pool memory, as the
// driver answers: docs/driver-peer.txt, "pool memory, peer access 1 -> 0,
// no pool access"), other memory where d has peer access to x, or a graph
// allocation whose node's descriptors grant it.
func (x *Device) accessibleFrom(d *Device, p uint64) bool {
	if pool := x.PoolAt(p); pool != nil {
		return pool.PeerAccess(d.cfg.Ordinal)
	}
	if d.peerAccess(x.cfg.Ordinal) {
		return true
	}
	if gm := x.GraphMemIfAny(); gm.Contains(p) {
		return gm.accessible(p, d.cfg.Ordinal)
	}
	return false
}

// checkPointers is the checking mode's test of a kernel's pointer
// arguments on device d: memory of another device that d has no access
// to (peer, pool or allocation) fails the kernel with ErrIllegalAddress,
// the fault it would be on a GPU. Kernels reach memory through raw
// pointers, so what they compute from their arguments is not checked.
func (d *Device) checkPointers(o *kernelOp) *backend.Error {
	for i, p := range o.args {
		if i >= 16 || o.ptrs&(1<<i) == 0 || p == 0 || d.holds(p) {
			continue
		}
		if x := d.owner(p); x != nil && !x.accessibleFrom(d, p) {
			err := backend.Errorf(backend.ErrIllegalAddress, "argument %d, %#x, is memory of device %d, which device %d has no access to",
				i, p, x.cfg.Ordinal, d.cfg.Ordinal)
			err.Op = "kernel " + o.name
			return err
		}
	}
	return nil
}
