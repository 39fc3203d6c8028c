//go:build !linux

package vmem

// Reserve is not implemented outside Linux yet: the host backend needs
// MAP_NORESERVE reservations and MAP_FIXED remapping.
func Reserve(size, min uintptr) (*Reservation, error) { return nil, ErrNotSupported }

func (r *Reservation) Commit(off, n uintptr) error   { return ErrNotSupported }
func (r *Reservation) Decommit(off, n uintptr) error { return ErrNotSupported }
func (r *Reservation) Release() error                { return nil }
