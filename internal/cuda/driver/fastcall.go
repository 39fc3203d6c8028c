package driver

// FastCall calls the C function fn with up to 12 integer arguments through
// the launch path's foreign call, and returns its result: for measuring
// that call alone against the same loop in C (gpugraph bench --vs native).
func FastCall(fn uintptr, a [12]uintptr) uintptr { return fastCall(fn, a) }
