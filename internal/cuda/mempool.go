package cuda

import (
	"github.com/gpugraph/gpugraph/internal/backend"
	"github.com/gpugraph/gpugraph/internal/cuda/driver"
)

// MemPool is a native CUmemoryPool.
type MemPool struct {
	d *Device
	h uintptr
}

var (
	_ backend.Pools       = (*Device)(nil)
	_ backend.GraphMemory = (*Device)(nil)
	_ backend.MemPool     = (*MemPool)(nil)
	_ backend.Native      = (*MemPool)(nil)
)

// CUmemPool_attribute values.
const (
	poolAttrReleaseThreshold = 4
	poolAttrReservedCurrent  = 5
	poolAttrReservedHigh     = 6
	poolAttrUsedCurrent      = 7
	poolAttrUsedHigh         = 8
)

// Native is the CUmemoryPool.
func (p *MemPool) Native() uintptr { return p.h }

// DefaultMemPool is cuDeviceGetDefaultMemPool.
func (d *Device) DefaultMemPool() (backend.MemPool, error) {
	p := &MemPool{d: d}
	err := d.Do(func() error { var err error; p.h, err = d.drv.DeviceGetDefaultMemPool(d.ord); return err })
	if err != nil {
		return nil, err
	}
	return p, nil
}

// NewMemPool is cuMemPoolCreate of a pinned-device pool.
func (d *Device) NewMemPool(location int, maxSize uint64) (backend.MemPool, error) {
	p := &MemPool{d: d}
	pp := driver.MemPoolProps{AllocType: 1, LocationType: 1, LocationID: int32(location), MaxSize: maxSize}
	err := d.Do(func() error {
		d.cm.Lock()
		defer d.cm.Unlock()
		var err error
		p.h, err = d.drv.MemPoolCreate(d.cm, pp)
		return err
	})
	if err != nil {
		return nil, err
	}
	d.own(kindPool, p.h)
	return p, nil
}

// MallocAsync is cuMemAllocFromPoolAsync; the allocation is tracked for
// range checks.
func (d *Device) MallocAsync(s backend.Stream, n int, p backend.MemPool) (uint64, error) {
	var ptr uint64
	err := d.Do(func() error {
		var err error
		ptr, err = d.drv.MemAllocFromPoolAsync(n, p.(*MemPool).h, s.(*Stream).h)
		return err
	})
	if err != nil {
		return 0, err
	}
	d.track(ptr, n)
	d.ownMem(ptr, true)
	return ptr, nil
}

// FreeAsync is cuMemFreeAsync.
func (d *Device) FreeAsync(s backend.Stream, ptr uint64) error {
	d.ownMem(ptr, false)
	return d.Do(func() error { return d.drv.MemFreeAsync(ptr, s.(*Stream).h) })
}

// Destroy is cuMemPoolDestroy.
func (p *MemPool) Destroy() error {
	p.d.disown(kindPool, p.h)
	return p.d.Do(func() error { return p.d.drv.MemPoolDestroy(p.h) })
}

// TrimTo is cuMemPoolTrimTo.
func (p *MemPool) TrimTo(keep uint64) error {
	return p.d.Do(func() error { return p.d.drv.MemPoolTrimTo(p.h, keep) })
}

// SetReleaseThreshold sets cudaMemPoolAttrReleaseThreshold.
func (p *MemPool) SetReleaseThreshold(v uint64) error { return p.setAttr(poolAttrReleaseThreshold, v) }

// ReleaseThreshold reads cudaMemPoolAttrReleaseThreshold.
func (p *MemPool) ReleaseThreshold() (uint64, error) { return p.attr(poolAttrReleaseThreshold) }

// Stats reads the reserved and used attributes.
func (p *MemPool) Stats() (backend.PoolStats, error) {
	var s backend.PoolStats
	for _, a := range []struct {
		attr int
		v    *uint64
	}{
		{poolAttrReservedCurrent, &s.ReservedCurrent}, {poolAttrReservedHigh, &s.ReservedHigh},
		{poolAttrUsedCurrent, &s.UsedCurrent}, {poolAttrUsedHigh, &s.UsedHigh},
	} {
		v, err := p.attr(a.attr)
		if err != nil {
			return s, err
		}
		*a.v = v
	}
	return s, nil
}

// ResetHigh resets the high-water marks (setting them to 0 resets them to
// the current values).
func (p *MemPool) ResetHigh() error {
	if err := p.setAttr(poolAttrReservedHigh, 0); err != nil {
		return err
	}
	return p.setAttr(poolAttrUsedHigh, 0)
}

// SetAccess is cuMemPoolSetAccess for one device.
func (p *MemPool) SetAccess(device, flags int) error {
	return p.d.Do(func() error {
		p.d.cm.Lock()
		defer p.d.cm.Unlock()
		desc := driver.MemAccessDesc{LocationType: 1, LocationID: int32(device), Flags: int32(flags)}
		return p.d.drv.MemPoolSetAccess(p.d.cm, p.h, []driver.MemAccessDesc{desc})
	})
}

func (p *MemPool) setAttr(attr int, v uint64) error {
	return p.d.Do(func() error { return p.d.drv.MemPoolSetAttribute(p.h, attr, v) })
}

func (p *MemPool) attr(attr int) (uint64, error) {
	var v uint64
	err := p.d.Do(func() error { var err error; v, err = p.d.drv.MemPoolGetAttribute(p.h, attr); return err })
	return v, err
}

// Graph memory attributes (CUgraphMem_attribute).
const (
	graphMemUsedCurrent = iota
	graphMemUsedHigh
	graphMemReservedCurrent
	graphMemReservedHigh
)

// GraphMemStats reads cuDeviceGetGraphMemAttribute.
func (d *Device) GraphMemStats() (backend.GraphMemStats, error) {
	var v [4]uint64
	err := d.Do(func() error {
		for i := range v {
			var err error
			if v[i], err = d.drv.DeviceGetGraphMemAttribute(d.ord, i); err != nil {
				return err
			}
		}
		return nil
	})
	return backend.GraphMemStats{UsedCurrent: v[graphMemUsedCurrent], UsedHigh: v[graphMemUsedHigh],
		ReservedCurrent: v[graphMemReservedCurrent], ReservedHigh: v[graphMemReservedHigh]}, err
}

// ResetGraphMemHigh resets the high-water marks.
func (d *Device) ResetGraphMemHigh() error {
	return d.Do(func() error {
		for _, a := range []int{graphMemUsedHigh, graphMemReservedHigh} {
			if err := d.drv.DeviceSetGraphMemAttribute(d.ord, a, 0); err != nil {
				return err
			}
		}
		return nil
	})
}

// TrimGraphMem is cuDeviceGraphMemTrim.
func (d *Device) TrimGraphMem() error {
	return d.Do(func() error { return d.drv.DeviceGraphMemTrim(d.ord) })
}
