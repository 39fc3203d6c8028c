package gpugraph

import (
	"sync/atomic"
	"time"

	"github.com/gpugraph/gpugraph/internal/backend"
)

// EventFlags select event behaviour at creation (cudaEventCreateWithFlags).
type EventFlags uint

const (
	// EventDisableTiming makes the event cheaper; ElapsedTime refuses it.
	EventDisableTiming EventFlags = 1 << iota
)

// Event marks a point in a stream's work. Recording it captures the work
// issued to the stream so far; waiting on it (from the host or from another
// stream) waits for the most recent record at the time of the wait.
type Event struct {
	dev   *Device
	flags EventFlags

	be        backend.Event // the backend's event
	destroyed atomic.Bool
	recorded  atomic.Bool // a record was issued to a stream (not captured)

	inCapture atomic.Bool        // capSeq != nil
	captured  atomic.Bool        // the last record was captured, not run
	capSeq    *captureSeq        // guarded by dev.caps.mu
	capNodes  []*Node            // the nodes the captured record stands for
	capData   map[*Node]EdgeData // and the data of their half edges, as the driver keeps it
}

// NewEvent creates an event.
func (d *Device) NewEvent(flags EventFlags) (*Event, error) {
	const opName = "Device.NewEvent"
	if err := d.check(opName); err != nil {
		return nil, err
	}
	if flags&^EventDisableTiming != 0 {
		return nil, newErr(opName, ErrInvalidValue, "unknown flags %#x", uint(flags))
	}
	be, err := d.be.NewEvent(backend.EventFlags(flags & EventDisableTiming))
	if err != nil {
		return nil, backendErr(opName, err)
	}
	return &Event{dev: d, flags: flags, be: be}, nil
}

func (e *Event) check(opName string, d *Device) error {
	if e == nil {
		return newErr(opName, ErrInvalidResourceHandle, "nil event")
	}
	if d != nil && e.dev != d {
		return newErr(opName, ErrInvalidResourceHandle, "event belongs to another device")
	}
	if err := e.dev.check(opName); err != nil {
		return err
	}
	if e.destroyed.Load() {
		return newErr(opName, ErrInvalidResourceHandle, "event is destroyed")
	}
	return nil
}

// checkWait checks an event a stream waits on: as cudaStreamWaitEvent,
// the event may be another device's, of the same backend.
func (e *Event) checkWait(opName string, s *Stream) error {
	if err := e.check(opName, nil); err != nil {
		return err
	}
	if e.dev.props.Backend != s.dev.props.Backend {
		return newErr(opName, ErrInvalidResourceHandle, "an event of a %s device", e.dev.props.Backend)
	}
	return nil
}

// Record captures the work issued to s so far (cudaEventRecord).
func (s *Stream) Record(e *Event) error {
	const opName = "Stream.Record"
	if err := s.check(opName); err != nil {
		return err
	}
	if err := e.check(opName, s.dev); err != nil {
		return err
	}
	return s.record(opName, e, false)
}

// RecordExternal records e as an event record node when s is capturing
// (cudaEventRecordWithFlags with cudaEventRecordExternal), so that work
// outside the graph can wait for that point of it; otherwise it is Record.
func (s *Stream) RecordExternal(e *Event) error {
	const opName = "Stream.RecordExternal"
	if err := s.check(opName); err != nil {
		return err
	}
	if err := e.check(opName, s.dev); err != nil {
		return err
	}
	return s.record(opName, e, true)
}

func (s *Stream) record(opName string, e *Event, external bool) error {
	if s.capturing.Load() {
		if captured, err := s.captureRecord(opName, e, external); captured {
			return err
		}
	}
	e.captured.Store(false)
	rec := s.be.Record
	var w *nativeWork
	if x, ok := s.be.(backend.ExternalEvents); ok && external {
		rec = x.RecordExternal // a native capture makes it a node
		w = s.nativeWorkBegin()
	}
	err := s.issue(opName, func() error {
		err := rec(e.be)
		w.end(s, err)
		return err
	})
	if err != nil {
		return backendErr(opName, err)
	}
	e.recorded.Store(true)
	return nil
}

// Wait makes all later work in s wait for e's most recent record
// (cudaStreamWaitEvent). Waiting on an event never recorded does nothing.
func (s *Stream) Wait(e *Event) error {
	const opName = "Stream.Wait"
	if err := s.check(opName); err != nil {
		return err
	}
	if err := e.checkWait(opName, s); err != nil {
		return err
	}
	return s.waitEvent(opName, e, false)
}

// WaitExternal makes s wait on e; when s is capturing, it becomes an event
// wait node on an event recorded outside the capture (cudaStreamWaitEvent
// with cudaEventWaitExternal).
func (s *Stream) WaitExternal(e *Event) error {
	const opName = "Stream.WaitExternal"
	if err := s.check(opName); err != nil {
		return err
	}
	if err := e.check(opName, s.dev); err != nil {
		return err
	}
	return s.waitEvent(opName, e, true)
}

func (s *Stream) waitEvent(opName string, e *Event, external bool) error {
	if s.capturing.Load() || e.inCapture.Load() {
		if handled, err := s.captureWait(opName, e, external); handled {
			return err
		}
	}
	if x, ok := s.be.(backend.ExternalEvents); ok && external {
		w := s.nativeWorkBegin()
		err := x.WaitExternal(e.be) // a native capture makes it a node
		w.end(s, err)
		return backendErr(opName, err)
	}
	return backendErr(opName, s.issue(opName, func() error { return s.be.Wait(e.be) }))
}

// Synchronize waits for the event's most recent record to complete.
func (e *Event) Synchronize() error {
	const opName = "Event.Synchronize"
	if err := e.check(opName, nil); err != nil {
		return err
	}
	if e.inCapture.Load() || e.captured.Load() {
		if err := e.eventProhibited(opName, true); err != nil {
			return err
		}
	}
	if err := e.dev.wait(opName, e.be.Synchronize); err != nil {
		return backendErr(opName, err)
	}
	if x := e.dev.sticky.Load(); x != nil {
		return withOp(opName, x)
	}
	return nil
}

// Query returns nil if the most recent record has completed (or the event was
// never recorded), ErrNotReady otherwise.
func (e *Event) Query() error {
	const opName = "Event.Query"
	if err := e.check(opName, nil); err != nil {
		return err
	}
	if e.inCapture.Load() || e.captured.Load() {
		if err := e.eventProhibited(opName, true); err != nil {
			return err
		}
	}
	return backendErr(opName, e.be.Query())
}

// Destroy releases the event. A record already issued still completes.
func (e *Event) Destroy() error {
	const opName = "Event.Destroy"
	if err := e.check(opName, nil); err != nil {
		return err
	}
	e.destroyed.Store(true)
	return backendErr(opName, e.be.Destroy())
}

// ElapsedTime is the time between the completion of start's and end's most
// recent records (cudaEventElapsedTime). Both must have completed
// (ErrNotReady otherwise), have been recorded, and allow timing
// (ErrInvalidResourceHandle otherwise).
func ElapsedTime(start, end *Event) (time.Duration, error) {
	const opName = "ElapsedTime"
	for _, e := range []*Event{start, end} {
		if err := e.check(opName, nil); err != nil {
			return 0, err
		}
		if e.inCapture.Load() || e.captured.Load() {
			if err := e.eventProhibited(opName, false); err != nil {
				return 0, err
			}
		}
		if e.flags&EventDisableTiming != 0 {
			return 0, newErr(opName, ErrInvalidResourceHandle, "event created with EventDisableTiming")
		}
	}
	if start.dev != end.dev {
		return 0, newErr(opName, ErrInvalidResourceHandle, "events of different devices")
	}
	d, err := end.be.ElapsedTime(start.be)
	return d, backendErr(opName, err)
}
