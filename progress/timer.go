package progress

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/tachyon-hpc/tachyon/progress/wheel"
)

// Errors of timer requests.
var (
	// ErrDueTime reports a due time that is NaN or infinite.
	ErrDueTime = errors.New("progress: timer due time must be a finite number of seconds")
	// ErrInactive reports a reset of a timer that has completed or been
	// cancelled (MPI_Timer_reset applies only to active timers).
	ErrInactive = errors.New("progress: timer request is not active")
	// ErrFreed reports use of a request after Free.
	ErrFreed = errors.New("progress: request has been freed")
)

// Timer request states, guarded by the engine's polling flag.
const (
	timerActive = iota
	timerCompleted
	timerCancelled
)

// TimerRequest is a request that completes once the clock passes its due
// time (MPI_TIMER_CREATE). It completes no earlier than Wtime()+dueTime as
// read when it was created or last reset; how much later depends on how
// often the engine is polled (within a microsecond or so while a goroutine
// waits on the engine). Its Completion lets it be waited on together with
// communication requests.
type TimerRequest struct {
	Completion
	e     *Engine
	t     wheel.Timer
	state int
	freed atomic.Bool
}

// checkDue rejects due times that are not finite.
func checkDue(dueTime float64) error {
	if math.IsNaN(dueTime) || math.IsInf(dueTime, 0) {
		return fmt.Errorf("%w (got %v)", ErrDueTime, dueTime)
	}
	return nil
}

// deadline returns the clock count at which a timer due in dueTime seconds
// from now may fire. One count of slack covers rounding in the conversion
// back to seconds, so Wtime read after completion is never short.
func deadline(dueTime float64) uint64 {
	c := theClock.Load()
	return c.read() + SecondsToCounts(dueTime) + 1
}

// NewTimer creates a timer request due dueTime seconds from now. A due time
// of zero or less gives a request that is already complete.
func (e *Engine) NewTimer(dueTime float64) (*TimerRequest, error) {
	if err := checkDue(dueTime); err != nil {
		return nil, err
	}
	r := &TimerRequest{e: e}
	r.t.Init(r.expire)
	if dueTime <= 0 {
		if e.closed.Load() {
			return nil, ErrClosed
		}
		r.state = timerCompleted
		r.Completion.state = 1
		return r, nil
	}
	d := deadline(dueTime)
	e.lock()
	if e.closed.Load() { // checked under the flag: Close fires all timers under it
		e.unlock()
		return nil, ErrClosed
	}
	err := e.wheel.Schedule(&r.t, d)
	e.timersChanged()
	e.unlock()
	if err != nil {
		return nil, err
	}
	e.bell.Ring() // a parked goroutine may need to wake earlier than it planned
	return r, nil
}

// expire is the wheel callback; it runs under the polling flag.
func (r *TimerRequest) expire(*wheel.Timer) {
	r.state = timerCompleted
	if r.e.closed.Load() {
		r.state = timerCancelled
	}
	r.e.Complete(&r.Completion)
}

// Reset moves the due time of an active timer to dueTime seconds from now,
// earlier or later (MPI_TIMER_RESET); zero or less completes it at once. It
// returns ErrInactive if the timer has completed or been cancelled, and
// ErrFreed after Free.
func (r *TimerRequest) Reset(dueTime float64) error {
	if err := checkDue(dueTime); err != nil {
		return err
	}
	e := r.e
	e.lock()
	err := r.resetLocked(dueTime)
	e.unlock()
	if err == nil {
		e.bell.Ring()
	}
	return err
}

func (r *TimerRequest) resetLocked(dueTime float64) error {
	switch {
	case r.freed.Load():
		return ErrFreed
	case r.state != timerActive:
		return ErrInactive
	case dueTime <= 0:
		r.e.wheel.Cancel(&r.t)
		r.e.timersChanged()
		r.state = timerCompleted
		r.e.Complete(&r.Completion)
		return nil
	}
	err := r.e.wheel.Schedule(&r.t, deadline(dueTime))
	r.e.timersChanged()
	return err
}

// Cancel cancels an active timer: it completes at once and Cancelled
// reports true (MPI_CANCEL). Cancelling a completed timer has no effect.
func (r *TimerRequest) Cancel() error {
	e := r.e
	e.lock()
	defer e.unlock()
	if r.freed.Load() {
		return ErrFreed
	}
	if r.state == timerActive {
		e.wheel.Cancel(&r.t)
		e.timersChanged()
		r.state = timerCancelled
		e.Complete(&r.Completion)
	}
	return nil
}

// Cancelled reports whether Cancel took effect (MPI_TEST_CANCELLED). It is
// meaningful once the request is complete.
func (r *TimerRequest) Cancelled() bool {
	r.e.lock()
	defer r.e.unlock()
	return r.state == timerCancelled
}

// Free releases the request (MPI_REQUEST_FREE). An active timer is
// disarmed and never completes. Using the request afterwards returns
// ErrFreed.
func (r *TimerRequest) Free() error {
	e := r.e
	e.lock()
	defer e.unlock()
	if r.freed.Swap(true) {
		return ErrFreed
	}
	if r.state == timerActive && e.wheel.Cancel(&r.t) {
		e.timersChanged()
	}
	return nil
}

// Wait waits for the timer to complete (fire or be cancelled).
func (r *TimerRequest) Wait() error {
	if r.freed.Load() {
		return ErrFreed
	}
	r.e.Wait(&r.Completion)
	return nil
}

// Test reports whether the timer has completed, polling once if not.
func (r *TimerRequest) Test() (bool, error) {
	if r.freed.Load() {
		return false, ErrFreed
	}
	return r.e.Test(&r.Completion), nil
}
