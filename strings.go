package gpugraph

import (
	"fmt"
	"strings"
)

// String describes the device on one line: ordinal, backend, name, the
// CUDA version of its driver API, memory and multiprocessors, such as
//
//	device 0 (cuda): NVIDIA H100 80GB HBM3, CUDA 13.0, 79.2 GiB, 132 multiprocessors, warp 32, memory pools
func (p Properties) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "device %d (%s): %s, CUDA %d.%d, %.1f GiB, %d multiprocessors, warp %d",
		p.Ordinal, p.Backend, p.Name, p.DriverVersion/1000, p.DriverVersion%1000/10,
		float64(p.TotalMem)/(1<<30), p.MultiProcessorCount, p.WarpSize)
	if p.MemoryPoolsSupported {
		b.WriteString(", memory pools")
	}
	return b.String()
}

// String returns the mode's name: "global", "thread-local" or "relaxed".
func (m CaptureMode) String() string {
	switch m {
	case CaptureModeGlobal:
		return "global"
	case CaptureModeThreadLocal:
		return "thread-local"
	case CaptureModeRelaxed:
		return "relaxed"
	}
	return fmt.Sprintf("CaptureMode(%d)", int(m))
}

// String returns the status's name: "none", "active" or "invalidated".
func (s CaptureStatus) String() string {
	switch s {
	case CaptureStatusNone:
		return "none"
	case CaptureStatusActive:
		return "active"
	case CaptureStatusInvalidated:
		return "invalidated"
	}
	return fmt.Sprintf("CaptureStatus(%d)", int(s))
}

// String returns the dependency type's name: "default" or "programmatic".
func (t DependencyType) String() string {
	switch t {
	case DependencyTypeDefault:
		return "default"
	case DependencyTypeProgrammatic:
		return "programmatic"
	}
	return fmt.Sprintf("DependencyType(%d)", int(t))
}

// String returns the handle type's name: "opaque fd" or "timeline
// semaphore fd".
func (t ExternalSemaphoreHandleType) String() string {
	switch t {
	case ExternalSemaphoreHandleOpaqueFD:
		return "opaque fd"
	case ExternalSemaphoreHandleTimelineSemaphoreFD:
		return "timeline semaphore fd"
	}
	return fmt.Sprintf("ExternalSemaphoreHandleType(%d)", int(t))
}

// String lists the flags set, joined by "|", such as
// "auto-free-on-launch|upload"; no flag is "none".
func (f InstantiateFlags) String() string {
	return flagString(uint64(f), []string{"auto-free-on-launch", "upload", "device-launch", "use-node-priority"}, "InstantiateFlags")
}

// String lists the flags set, joined by "|": "disable-timing", or "none".
func (f EventFlags) String() string {
	return flagString(uint64(f), []string{"disable-timing"}, "EventFlags")
}

// flagString names the bits of f, bit i by names[i]; bits without a name
// print as typ(0x...).
func flagString(f uint64, names []string, typ string) string {
	if f == 0 {
		return "none"
	}
	var parts []string
	for i, n := range names {
		if f&(1<<i) != 0 {
			parts = append(parts, n)
			f &^= 1 << i
		}
	}
	if f != 0 {
		parts = append(parts, fmt.Sprintf("%s(%#x)", typ, f))
	}
	return strings.Join(parts, "|")
}

// String gives the result and, where there is one, the node at fault:
// "topology changed at kernel node 3 (from memcpy node 1)".
func (i UpdateResultInfo) String() string {
	s := i.Result.String()
	if i.ErrorNode != nil {
		s += " at " + i.ErrorNode.String()
	}
	if i.ErrorFromNode != nil {
		s += " (from " + i.ErrorFromNode.String() + ")"
	}
	return s
}

// String gives used and reserved graph memory, current and high-water,
// such as "used 64 MiB (high 128 MiB), reserved 128 MiB (high 128 MiB)".
func (s GraphMemStats) String() string {
	return fmt.Sprintf("used %s (high %s), reserved %s (high %s)",
		fmtBytes(s.UsedCurrent), fmtBytes(s.UsedHigh), fmtBytes(s.ReservedCurrent), fmtBytes(s.ReservedHigh))
}

// String gives the pool's reserved and used memory, current and
// high-water, as GraphMemStats.String does.
func (s MemPoolStats) String() string {
	return fmt.Sprintf("reserved %s (high %s), used %s (high %s)",
		fmtBytes(s.ReservedCurrent), fmtBytes(s.ReservedHigh), fmtBytes(s.UsedCurrent), fmtBytes(s.UsedHigh))
}

// String gives every figure, peaks in parentheses, such as
// "allocated 4 MiB (peak 8 MiB), reserved 20 MiB (peak 20 MiB), graph allocated 0 B (peak 64 MiB), graph reserved 64 MiB (peak 64 MiB), malloc 0 B".
func (s MemoryStats) String() string {
	return fmt.Sprintf("allocated %s (peak %s), reserved %s (peak %s), graph allocated %s (peak %s), graph reserved %s (peak %s), malloc %s",
		fmtBytes(s.Allocated), fmtBytes(s.AllocatedPeak), fmtBytes(s.Reserved), fmtBytes(s.ReservedPeak),
		fmtBytes(s.GraphAllocated), fmtBytes(s.GraphAllocatedPeak), fmtBytes(s.GraphReserved), fmtBytes(s.GraphReservedPeak),
		fmtBytes(s.Malloc))
}

// fmtBytes prints n exactly, in the largest binary unit that divides it:
// "64 MiB", "3 KiB", "1000 B".
func fmtBytes(n uint64) string {
	switch {
	case n == 0:
		return "0 B"
	case n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
