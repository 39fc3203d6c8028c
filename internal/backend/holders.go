package backend

import "fmt"

// The rule for moving the memory of an executable graph's memset and
// memcpy nodes by an update, across the holders of memory: each device,
// and the host (pinned and pageable host memory are one holder). It is
// decided here once: the gpugraph package applies it to per-node updates
// on every backend, the host backend to whole-graph updates (the cuda
// backend's driver decides those itself).
//
// As the driver answers (docs/driver-multidev.txt, sections "per-node and
// whole-graph updates of memset and memcpy nodes", 2 x H100, driver 580;
// the same per node and by whole-graph update, whichever device's context
// the node was made in):
//
//   - a memset node's destination stays with its holder, with or without
//     peer access;
//   - a memcpy node's source stays with its holder;
//   - a memcpy node's destination stays with its holder, except that device
//     memory may move to another device's memory when the source is device
//     memory and peer access is enabled between the two devices. Measured
//     with access both ways between two devices, so that is what the rule
//     asks of the destination's old and new devices; with a host source
//     the destination stays, even with peer access.
//
// The driver refuses a move with cudaErrorInvalidValue per node, and with
// cudaErrorGraphExecUpdateFailure and result "parameters changed", naming
// the node, by whole-graph update.

// Holders of memory other than a device (whose holder is its ordinal).
const (
	HeldByNone = -1 // device memory no open device is known to hold (freed, or allocated outside gpugraph)
	HeldByHost = -2 // host memory, pinned or pageable
)

// Holders are the holders of a memset's destination (Src HeldByNone) or of
// a copy's two sides.
type Holders struct{ Dst, Src int }

// OpHolders are the holders of the memory of memset or memcpy op o, the
// device memory's as owner says (a device's ordinal, or HeldByNone); ok is
// false for ops of other types.
func OpHolders(o *Op, owner func(p uint64) int) (h Holders, ok bool) {
	switch o.Type {
	case NodeMemset:
		return Holders{Dst: owner(o.Memset.Dst), Src: HeldByNone}, true
	case NodeMemcpy:
		side := func(p uint64, host []byte) int {
			if host != nil {
				return HeldByHost
			}
			return owner(p)
		}
		return Holders{Dst: side(o.Memcpy.Dst, o.Memcpy.DstHost), Src: side(o.Memcpy.Src, o.Memcpy.SrcHost)}, true
	}
	return Holders{}, false
}

// MemoryMove is an update's move of a node's memory that the rule refuses:
// which side, from which holder to which, and why.
type MemoryMove struct {
	Side     string // "destination", "copy's destination" or "copy's source"
	From, To int
	Why      string
}

func (m *MemoryMove) String() string {
	return fmt.Sprintf("the %s would move from %s to %s: %s", m.Side, HolderName(m.From), HolderName(m.To), m.Why)
}

// HolderName names a holder of memory in errors.
func HolderName(h int) string {
	switch h {
	case HeldByHost:
		return "host memory"
	case HeldByNone:
		return "device memory of no open device"
	}
	return fmt.Sprintf("memory of device %d", h)
}

// CheckMemoryMove applies the rule to an update of a memset node (isCopy
// false) or a memcpy node whose memory was held by old and would be held
// by nu: nil if the update may make the move, else the move refused.
// peer(from, to) reports whether work on device from may use memory of
// device to (peer access enabled); nil means no access anywhere. A side
// whose holder is HeldByNone on either end is not decided here, unless
// the other end is the host: device memory and host memory never trade.
func CheckMemoryMove(isCopy bool, old, nu Holders, peer func(from, to int) bool) *MemoryMove {
	if !isCopy {
		if moved(old.Dst, nu.Dst) {
			return &MemoryMove{"destination", old.Dst, nu.Dst, "a memset node's destination stays on the device of the original, with or without peer access"}
		}
		return nil
	}
	if mv := copyDstMove(old, nu, peer); mv != nil {
		return mv
	}
	if moved(old.Src, nu.Src) {
		return &MemoryMove{"copy's source", old.Src, nu.Src, "a memcpy node's source stays where the original's was"}
	}
	return nil
}

// copyDstMove is CheckMemoryMove of a copy's destination.
func copyDstMove(old, nu Holders, peer func(from, to int) bool) *MemoryMove {
	if !moved(old.Dst, nu.Dst) {
		return nil
	}
	mv := &MemoryMove{"copy's destination", old.Dst, nu.Dst, "a memcpy node's destination stays where the original's was"}
	switch {
	case old.Dst < 0 || nu.Dst < 0:
		return mv // to or from host memory
	case old.Src == HeldByHost || nu.Src == HeldByHost:
		mv.Why = "a memcpy node's destination moves to another device's memory only when the source is device memory, not host memory, even with peer access"
		return mv
	case peer == nil || !peer(old.Dst, nu.Dst) || !peer(nu.Dst, old.Dst):
		mv.Why = fmt.Sprintf("a memcpy node's destination moves to another device's memory only with peer access both ways between devices %d and %d (Device.EnablePeerAccess)", old.Dst, nu.Dst)
		return mv
	}
	return nil
}

// moved reports whether a side's memory changes holder: from one device
// to another, or between a device and the host.
func moved(old, nu int) bool {
	switch {
	case old == nu:
		return false
	case old == HeldByHost || nu == HeldByHost:
		return true
	case old == HeldByNone || nu == HeldByNone:
		return false // device memory of a device not known
	}
	return true
}
