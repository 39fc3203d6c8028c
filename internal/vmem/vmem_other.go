//go:build !linux

package vmem

// Reserve is not implemented outside Linux yet: the host backend needs
// MAP_NORESERVE reservations and MAP_FIXED remapping.
func Reserve(size, min uintptr) (*Reservation, error) { return nil, ErrNotSupported }

func (r *Reservation) Commit(off, n uintptr) error   { return ErrNotSupported }
func (r *Reservation) Decommit(off, n uintptr) error { return ErrNotSupported }
func (r *Reservation) Release() error                { return nil }

// Phys is not implemented outside Linux.
type Phys struct{}

func NewPhys(name string) (*Phys, error) { return nil, ErrNotSupported }
func (p *Phys) Grow(n int) error         { return ErrNotSupported }
func (p *Phys) Release(c int) error      { return ErrNotSupported }
func (p *Phys) Close() error             { return nil }

func (r *Reservation) MapChunk(off uintptr, p *Phys, c int, access bool) error {
	return ErrNotSupported
}
func (r *Reservation) UnmapChunk(off uintptr) error              { return ErrNotSupported }
func (r *Reservation) Protect(off, n uintptr, access bool) error { return ErrNotSupported }
