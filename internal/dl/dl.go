// Package dl loads shared libraries at run time (dlopen and dlsym through
// purego, without cgo) where the platform has them, and answers
// ErrUnsupported where it does not, so that the packages loading CUDA's
// libraries build everywhere.
package dl

import (
	"errors"
	"runtime"
)

// ErrUnsupported is what Open answers on a platform without dlopen.
var ErrUnsupported = errors.New("loading shared libraries is not supported on " + runtime.GOOS + "/" + runtime.GOARCH)
