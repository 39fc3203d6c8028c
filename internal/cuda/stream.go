package cuda

import (
	"time"

	"github.com/gpugraph/gpugraph/internal/backend"
	"github.com/gpugraph/gpugraph/internal/cuda/driver"
)

// Stream is a native CUstream. A launch reads the first 56 bytes and
// nothing else of the backend's (the object is 64 bytes, so on one cache
// line, TestStreamLayout): the kernel last launched and its CUfunction,
// which only Launch touches (never two at once: backend.Stream), so that a
// loop launching one kernel finds its function with a comparison; the
// driver's launch entry points; the CUstream.
type Stream struct {
	lastKey any
	lastFn  uintptr
	l       driver.Launcher
	h       uintptr
	d       *Device
}

var (
	_ backend.Stream = (*Stream)(nil)
	_ backend.Native = (*Stream)(nil)
	_ backend.Event  = (*Event)(nil)
	_ backend.Native = (*Event)(nil)
)

// Native is the CUstream.
func (s *Stream) Native() uintptr { return s.h }

// Launch launches l into the stream. Stream-bound calls take their context
// from the stream (measured: cuLaunchKernel and cuGraphLaunch succeed with
// no current context), so the hot path makes no cuCtxSetCurrent call; only
// if the driver objects, because another context is current on this
// thread, is the call repeated with ours made current. The argument words
// are copied into C memory under the arena's lock: a launch allocates
// nothing.
func (s *Stream) Launch(l *backend.Launch) error {
	if s.h == driver.StreamLegacy {
		return s.d.Do(func() error { return s.launch(l) })
	}
	return s.launch(l)
}

func (s *Stream) launch(l *backend.Launch) error {
	f := s.lastFn
	if f == 0 || s.lastKey != l.Kernel.Key {
		var err error
		if f, err = s.d.Function(&l.Kernel); err != nil {
			return err
		}
		s.lastKey, s.lastFn = l.Kernel.Key, f
	}
	if len(l.Args) > 0 {
		return s.launchArgs(f, l)
	}
	if err := s.l.Launch(f, l.Grid, l.Block, l.Shared, s.h, 0); err != nil {
		return s.d.retry(err, func() error { return s.l.Launch(f, l.Grid, l.Block, l.Shared, s.h, 0) })
	}
	return nil
}

// launchArgs launches f with l's arguments: the parameter array lives in
// the device's arena until the driver has copied it, so a kernel without
// arguments takes no lock.
func (s *Stream) launchArgs(f uintptr, l *backend.Launch) error {
	d := s.d
	d.cm.Lock()
	defer d.cm.Unlock()
	params := d.cm.Params(l.Args)
	if err := s.l.Launch(f, l.Grid, l.Block, l.Shared, s.h, params); err != nil {
		return d.retry(err, func() error { return s.l.Launch(f, l.Grid, l.Block, l.Shared, s.h, params) })
	}
	return nil
}

// HostFunc is cuLaunchHostFunc through the shared callback. In a capture
// the function becomes a host node that runs at every launch of the graph,
// so it stays registered for the device's life instead of once.
func (s *Stream) HostFunc(fn func()) error {
	return s.d.Do(func() error {
		// If the driver cannot say (the legacy stream while a blocking
		// stream captures: cudaErrorStreamCaptureImplicit), the launch
		// gets its own answer, which invalidates that capture as a kernel
		// launch does; the function then stays registered.
		ci, err := s.d.drv.StreamGetCaptureInfo(s.h)
		id := s.d.registerHostFunc(fn, err == nil && ci.Status == 0)
		if err := s.d.drv.LaunchHostFunc(s.h, hostCallbackPtr(), id); err != nil {
			hostFuncs.Delete(id)
			return err
		}
		return nil
	})
}

// Memcpy queues a copy (cuMemcpy*Async).
func (s *Stream) Memcpy(p *backend.Memcpy) error {
	call, err := s.d.copyCall(p)
	if err != nil {
		return err
	}
	return s.d.Do(func() error { return call(s.h) })
}

// Memset queues a fill (cuMemsetD2D*Async).
func (s *Stream) Memset(p *backend.Memset) error {
	call := s.d.memsetCall(p)
	return s.d.Do(func() error { return call(s.h) })
}

// Record is cuEventRecord.
func (s *Stream) Record(e backend.Event) error {
	h := e.(*Event).h
	return s.call(func() error { return s.d.drv.EventRecord(h, s.h) })
}

// Wait is cuStreamWaitEvent.
func (s *Stream) Wait(e backend.Event) error {
	h := e.(*Event).h
	return s.call(func() error { return s.d.drv.StreamWaitEvent(s.h, h, 0) })
}

// RecordExternal is cuEventRecordWithFlags(CU_EVENT_RECORD_EXTERNAL): in a
// capture, an event record node (whose event a launch records, and which
// can time the graph's work), not a dependency of the capture.
func (s *Stream) RecordExternal(e backend.Event) error {
	h := e.(*Event).h
	return s.call(func() error { return s.d.drv.EventRecordWithFlags(h, s.h, 1) })
}

// WaitExternal is cuStreamWaitEvent(CU_EVENT_WAIT_EXTERNAL): in a capture,
// an event wait node on a record made outside it.
func (s *Stream) WaitExternal(e backend.Event) error {
	h := e.(*Event).h
	return s.call(func() error { return s.d.drv.StreamWaitEvent(s.h, h, 1) })
}

// Synchronize is cuStreamSynchronize.
func (s *Stream) Synchronize() error {
	return s.call(func() error { return s.d.drv.StreamSynchronize(s.h) })
}

// Query is cuStreamQuery.
func (s *Stream) Query() error { return s.call(func() error { return s.d.drv.StreamQuery(s.h) }) }

// call runs f, a call on the stream: bound to the stream's context (see
// Device.bound), except on the legacy stream, whose handle names no
// context: there f runs with the device's context current, so that it
// reaches this device's legacy stream and not another context's.
func (s *Stream) call(f func() error) error {
	if s.h == driver.StreamLegacy {
		return s.d.Do(f)
	}
	return s.d.bound(f)
}

// Destroy is cuStreamDestroy.
func (s *Stream) Destroy() error {
	s.d.disown(kindStream, s.h)
	return s.d.Do(func() error { return s.d.drv.StreamDestroy(s.h) })
}

// Event is a native CUevent.
type Event struct {
	d *Device
	h uintptr
}

// Native is the CUevent.
func (e *Event) Native() uintptr { return e.h }

// Synchronize is cuEventSynchronize.
func (e *Event) Synchronize() error {
	return e.d.Do(func() error { return e.d.drv.EventSynchronize(e.h) })
}

// Query is cuEventQuery.
func (e *Event) Query() error { return e.d.Do(func() error { return e.d.drv.EventQuery(e.h) }) }

// Destroy is cuEventDestroy.
func (e *Event) Destroy() error {
	e.d.disown(kindEvent, e.h)
	return e.d.Do(func() error { return e.d.drv.EventDestroy(e.h) })
}

// ElapsedTime is cuEventElapsedTime from start to e.
func (e *Event) ElapsedTime(start backend.Event) (time.Duration, error) {
	var ms float32
	err := e.d.Do(func() error {
		var err error
		ms, err = e.d.drv.ElapsedTime(start.(*Event).h, e.h)
		return err
	})
	return time.Duration(float64(ms) * float64(time.Millisecond)), err
}
