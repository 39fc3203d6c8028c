package nccl

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/gpugraph/gpugraph/internal/cuda/driver"
	"github.com/gpugraph/gpugraph/internal/dl"
)

// Lib is a loaded libnccl.
type Lib struct {
	// Path is the name or path that loaded.
	Path string

	getVersion, getUniqueID, initAll, initRankScalable uintptr
	destroy, abort, getAsyncError, errorString         uintptr
	lastError, groupStart, groupEnd                    uintptr
	allReduce, broadcast, reduce, allGather            uintptr
	reduceScatter, send, recv                          uintptr
}

var (
	loadOnce sync.Once
	loaded   *Lib
	loadErr  error
)

// candidates lists what Load tries, in order: the sonames (through
// LD_LIBRARY_PATH and the ld.so cache), then under $NCCL_HOME/lib.
func candidates(home string) []string {
	c := []string{"libnccl.so.2", "libnccl.so"}
	if home != "" {
		c = append(c, filepath.Join(home, "lib", "libnccl.so.2"))
	}
	return c
}

// Load loads libnccl once per process and looks up its entry points. It
// does not touch a GPU.
func Load() (*Lib, error) {
	loadOnce.Do(func() { loaded, loadErr = load(candidates(os.Getenv("NCCL_HOME"))) })
	return loaded, loadErr
}

func load(names []string) (*Lib, error) {
	var tried []string
	for _, name := range names {
		h, err := dl.Open(name)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s (%v)", name, err))
			continue
		}
		l := &Lib{Path: name}
		for _, s := range []struct {
			p    *uintptr
			name string
		}{
			{&l.getVersion, "ncclGetVersion"}, {&l.getUniqueID, "ncclGetUniqueId"},
			{&l.initAll, "ncclCommInitAll"}, {&l.destroy, "ncclCommDestroy"},
			{&l.abort, "ncclCommAbort"}, {&l.getAsyncError, "ncclCommGetAsyncError"},
			{&l.errorString, "ncclGetErrorString"}, {&l.lastError, "ncclGetLastError"},
			{&l.groupStart, "ncclGroupStart"}, {&l.groupEnd, "ncclGroupEnd"},
			{&l.allReduce, "ncclAllReduce"}, {&l.broadcast, "ncclBroadcast"},
			{&l.reduce, "ncclReduce"}, {&l.allGather, "ncclAllGather"},
			{&l.reduceScatter, "ncclReduceScatter"}, {&l.send, "ncclSend"}, {&l.recv, "ncclRecv"},
		} {
			p, err := dl.Sym(h, s.name)
			if err != nil {
				return nil, fmt.Errorf("nccl: %s lacks %s (NCCL 2.19 or newer is needed): %v", name, s.name, err)
			}
			*s.p = p
		}
		// ncclCommInitRankScalable (NCCL 2.23) takes the unique id by
		// pointer; ncclCommInitRank takes 128 bytes by value, which purego
		// cannot pass. Without it, one process per GPU is refused.
		l.initRankScalable, _ = dl.Sym(h, "ncclCommInitRankScalable")
		return l, nil
	}
	return nil, fmt.Errorf("%w (tried %s)", ErrNoNCCL, strings.Join(tried, "; "))
}

// check turns a result into an error naming the call, with NCCL's words.
func (l *Lib) check(call string, r uintptr, comm uintptr) error {
	res := Result(int32(r))
	if res == Success {
		return nil
	}
	s, _, _ := purego.SyscallN(l.errorString, uintptr(res))
	detail := cstr(s)
	if comm != 0 {
		if last, _, _ := purego.SyscallN(l.lastError, comm); last != 0 {
			if m := cstr(last); m != "" {
				detail += ": " + m
			}
		}
	}
	return &Error{Call: call, Result: res, Detail: detail}
}

// cstr reads a NUL-terminated C string that NCCL owns.
func cstr(p uintptr) string {
	if p == 0 {
		return ""
	}
	return driver.GoString(*(**byte)(unsafe.Pointer(&p)))
}

// Version is NCCL's version number (ncclGetVersion), e.g. 22803 for 2.28.3.
func (l *Lib) Version() (int, error) {
	var v int32
	r, _, _ := purego.SyscallN(l.getVersion, uintptr(unsafe.Pointer(&v)))
	return int(v), l.check("ncclGetVersion", r, 0)
}

// GetUniqueID makes the id rank 0 hands to the other ranks
// (ncclGetUniqueId). It opens NCCL's bootstrap listener.
func (l *Lib) GetUniqueID() (UniqueID, error) {
	var id UniqueID
	r, _, _ := purego.SyscallN(l.getUniqueID, uintptr(unsafe.Pointer(&id)))
	return id, l.check("ncclGetUniqueId", r, 0)
}

// InitAll creates one communicator per device ordinal in one process
// (ncclCommInitAll); comm i is rank i, on ords[i].
func (l *Lib) InitAll(ords []int) ([]uintptr, error) {
	if len(ords) == 0 {
		return nil, &Error{Call: "ncclCommInitAll", Result: InvalidArgument, Detail: "no devices"}
	}
	comms := make([]uintptr, len(ords))
	devs := make([]int32, len(ords))
	for i, o := range ords {
		devs[i] = int32(o)
	}
	runtime.LockOSThread() // NCCL sets the runtime's current device
	defer runtime.UnlockOSThread()
	r, _, _ := purego.SyscallN(l.initAll, uintptr(unsafe.Pointer(&comms[0])), uintptr(len(ords)), uintptr(unsafe.Pointer(&devs[0])))
	if err := l.check("ncclCommInitAll", r, 0); err != nil {
		return nil, err
	}
	return comms, nil
}

// CanInitRank reports whether InitRank is available (NCCL 2.23 or newer).
func (l *Lib) CanInitRank() bool { return l.initRankScalable != 0 }

// config is an ncclConfig_t as NCCL 2.14 laid it out: NCCL reads the
// size and version first and takes every later field from its defaults,
// so one layout serves every NCCL since.
type config struct {
	size                                       uint64
	magic, version                             uint32
	blocking, cgaClusterSize, minCTAs, maxCTAs int32
	netName                                    uintptr
	splitShare                                 int32
	_                                          int32
}

// undefInt is NCCL_CONFIG_UNDEF_INT: "NCCL's default".
const undefInt = -1 << 31

// InitRank creates rank's communicator of nranks ranks, one per process or
// thread, on device ordinal ord (ncclCommInitRankScalable with one id,
// after setDevice, which makes ord the thread's current device as NCCL
// asks). Every rank calls it with the same id. A blocking communicator
// returns when all ranks have joined; a nonblocking one
// (ncclConfig_t.blocking = 0) returns at once, and Wait tells when it has
// formed, as it does after every call of such a communicator.
func (l *Lib) InitRank(ord, nranks, rank int, id *UniqueID, setDevice func() error, blocking bool) (uintptr, error) {
	const call = "ncclCommInitRankScalable"
	if l.initRankScalable == 0 {
		return 0, &Error{Call: call, Result: InvalidUsage, Detail: l.Path + " predates NCCL 2.23; one process per GPU needs ncclCommInitRankScalable"}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := setDevice(); err != nil {
		return 0, err
	}
	cfg := &config{size: uint64(unsafe.Sizeof(config{})), magic: 0xcafebeef, version: 21400,
		blocking: 1, cgaClusterSize: undefInt, minCTAs: undefInt, maxCTAs: undefInt, splitShare: undefInt}
	if !blocking {
		cfg.blocking = 0
	}
	var comm uintptr
	r, _, _ := purego.SyscallN(l.initRankScalable, uintptr(unsafe.Pointer(&comm)), uintptr(nranks), uintptr(rank),
		1, uintptr(unsafe.Pointer(id)), uintptr(unsafe.Pointer(cfg)))
	if Result(int32(r)) == InProgress {
		return comm, nil
	}
	if err := l.check(call, r, 0); err != nil {
		return 0, err
	}
	return comm, nil
}

// IsInProgress reports whether err is a nonblocking communicator's "not done
// yet" (ncclInProgress), after which the caller Waits.
func IsInProgress(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Result == InProgress
}

// ErrTimedOut is what Wait returns (wrapped) when the deadline passed.
var ErrTimedOut = errors.New("nccl: deadline passed")

// Wait polls a nonblocking communicator (ncclCommGetAsyncError) until its
// last operation has left ncclInProgress, or the deadline passes: then it
// aborts the communicator (ncclCommAbort), which is unusable after, and
// returns ErrTimedOut. call names what is waited for.
func (l *Lib) Wait(comm uintptr, call string, deadline time.Time) error {
	for pause := 10 * time.Microsecond; ; pause = min(2*pause, 5*time.Millisecond) {
		res, err := l.AsyncError(comm)
		if err != nil {
			return err
		}
		switch {
		case res == Success:
			return nil
		case res != InProgress:
			return l.check(call, uintptr(res), comm)
		case time.Now().After(deadline):
			l.Abort(comm)
			return fmt.Errorf("%w: %s still in progress; communicator aborted", ErrTimedOut, call)
		}
		time.Sleep(pause)
	}
}

// Destroy frees a communicator after its work is done (ncclCommDestroy).
func (l *Lib) Destroy(comm uintptr) error {
	r, _, _ := purego.SyscallN(l.destroy, comm)
	return l.check("ncclCommDestroy", r, 0)
}

// Abort frees a communicator at once, abandoning its pending work
// (ncclCommAbort).
func (l *Lib) Abort(comm uintptr) error {
	r, _, _ := purego.SyscallN(l.abort, comm)
	return l.check("ncclCommAbort", r, 0)
}

// AsyncError is the communicator's asynchronous error, Success if none
// (ncclCommGetAsyncError).
func (l *Lib) AsyncError(comm uintptr) (Result, error) {
	var res int32
	r, _, _ := purego.SyscallN(l.getAsyncError, comm, uintptr(unsafe.Pointer(&res)))
	return Result(res), l.check("ncclCommGetAsyncError", r, comm)
}

// Group runs f between ncclGroupStart and ncclGroupEnd on one OS thread:
// every call f makes is posted together at the end.
func (l *Lib) Group(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r, _, _ := purego.SyscallN(l.groupStart)
	if err := l.check("ncclGroupStart", r, 0); err != nil {
		return err
	}
	ferr := f()
	r, _, _ = purego.SyscallN(l.groupEnd)
	if ferr != nil {
		return ferr
	}
	return l.check("ncclGroupEnd", r, 0)
}

// AllReduce is ncclAllReduce.
func (l *Lib) AllReduce(send, recv uintptr, count int, dt, op int, comm, stream uintptr) error {
	r, _, _ := purego.SyscallN(l.allReduce, send, recv, uintptr(count), uintptr(dt), uintptr(op), comm, stream)
	return l.check("ncclAllReduce", r, comm)
}

// Broadcast is ncclBroadcast.
func (l *Lib) Broadcast(send, recv uintptr, count int, dt, root int, comm, stream uintptr) error {
	r, _, _ := purego.SyscallN(l.broadcast, send, recv, uintptr(count), uintptr(dt), uintptr(root), comm, stream)
	return l.check("ncclBroadcast", r, comm)
}

// Reduce is ncclReduce.
func (l *Lib) Reduce(send, recv uintptr, count int, dt, op, root int, comm, stream uintptr) error {
	r, _, _ := purego.SyscallN(l.reduce, send, recv, uintptr(count), uintptr(dt), uintptr(op), uintptr(root), comm, stream)
	return l.check("ncclReduce", r, comm)
}

// AllGather is ncclAllGather.
func (l *Lib) AllGather(send, recv uintptr, sendCount int, dt int, comm, stream uintptr) error {
	r, _, _ := purego.SyscallN(l.allGather, send, recv, uintptr(sendCount), uintptr(dt), comm, stream)
	return l.check("ncclAllGather", r, comm)
}

// ReduceScatter is ncclReduceScatter.
func (l *Lib) ReduceScatter(send, recv uintptr, recvCount int, dt, op int, comm, stream uintptr) error {
	r, _, _ := purego.SyscallN(l.reduceScatter, send, recv, uintptr(recvCount), uintptr(dt), uintptr(op), comm, stream)
	return l.check("ncclReduceScatter", r, comm)
}

// Send is ncclSend.
func (l *Lib) Send(buf uintptr, count int, dt, peer int, comm, stream uintptr) error {
	r, _, _ := purego.SyscallN(l.send, buf, uintptr(count), uintptr(dt), uintptr(peer), comm, stream)
	return l.check("ncclSend", r, comm)
}

// Recv is ncclRecv.
func (l *Lib) Recv(buf uintptr, count int, dt, peer int, comm, stream uintptr) error {
	r, _, _ := purego.SyscallN(l.recv, buf, uintptr(count), uintptr(dt), uintptr(peer), comm, stream)
	return l.check("ncclRecv", r, comm)
}
