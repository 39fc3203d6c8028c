package host

import "github.com/gpugraph/gpugraph/internal/backend"

// The holders of the memory of an executable graph's memset and memcpy
// nodes, for the rule of whole-graph updates (and of a child graph node's,
// and of a conditional body's nodes): backend.CheckMemoryMove, the rule
// the gpugraph package applies to per-node updates. As there, the
// original is the node's memory at instantiation.

// recordHolders records, as e is instantiated with more than one device
// open, the holders of the memory of op i, if it is a memset or a memcpy.
func (e *Exec) recordHolders(i int32) {
	if !e.multi {
		return
	}
	h, ok := backend.OpHolders(&e.bops[i], e.dev.MemoryOwner)
	if !ok {
		return
	}
	if e.holders == nil {
		e.holders = map[int32]backend.Holders{}
	}
	e.holders[i] = h
}

// memoryMove is the move of memory an update of op i of e, cur now, to nu
// would make that the rule refuses, or nil.
func (e *Exec) memoryMove(i int32, cur, nu *backend.Op) *backend.MemoryMove {
	var old backend.Holders
	var ok bool
	if e.multi {
		old, ok = e.holders[i]
	} else {
		// One device open at the instantiation: the device memory was
		// its own (a side's host or device kind cannot change).
		own := e.dev.cfg.Ordinal
		old, ok = backend.OpHolders(cur, func(uint64) int { return own })
	}
	if !ok {
		return nil
	}
	h, ok := backend.OpHolders(nu, e.dev.MemoryOwner)
	if !ok {
		return nil
	}
	return backend.CheckMemoryMove(nu.Type == backend.NodeMemcpy, old, h, e.dev.PeerAccessEnabled)
}
