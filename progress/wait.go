package progress

import "github.com/tachyon-hpc/tachyon/asm"

// Completion is the done flag every request carries, whatever completes it
// (a transport, a timer). Embed it in a request type; the zero value is
// pending. Wait, Test and their any/all forms on an Engine watch it.
type Completion struct {
	state uint32 // 0 pending, 1 complete
}

// Done reports whether the operation has completed. Everything the
// completer wrote before Engine.Complete is visible once Done is true.
func (c *Completion) Done() bool { return asm.LoadAcquire32(&c.state) == 1 }

// MarkDone marks c complete without waking anyone. A poller that completes
// several operations in one pass marks each, then wakes the goroutines
// that may be parked on them with one ring of the engine's doorbell
// (Engine.Complete does both for one operation).
func (c *Completion) MarkDone() { asm.StoreRelease32(&c.state, 1) }

// MarkDoneLocal is MarkDone for a caller that no other goroutine can be
// waiting on or looking at c with meanwhile, such as an endpoint whose
// caller promised serial use: a plain store, where MarkDone's release
// store costs a call into assembly. Whatever later hands c to another
// goroutine (a lock, a channel, a release store) publishes it.
func (c *Completion) MarkDoneLocal() { asm.StoreRelaxed32(&c.state, 1) }

// Rearm makes c pending again, for a request object that is reused (pooled
// or persistent). No goroutine may be waiting on c, and whatever hands the
// request to another goroutine afterwards (a lock, a release store)
// publishes the reset with it.
func (c *Completion) Rearm() { asm.StoreRelaxed32(&c.state, 0) }

// condition is what a parking goroutine rechecks after announcing itself,
// on the engine it waits with. Wait's and WaitUntil's are one pointer each,
// which an interface holds without allocating.
type condition interface{ ready(e *Engine) bool }

// waitOne is the condition of Wait: c is done, or a poll found work.
type waitOne struct{ c *Completion }

func (w waitOne) ready(e *Engine) bool { return w.c.Done() || e.pollIfOwner() > 0 }

// pollIfOwner polls unless a dedicated progress goroutine does the polling.
func (e *Engine) pollIfOwner() int {
	if e.running.Load() {
		return 0
	}
	return e.Progress()
}

// Wait returns once c is complete, driving progress meanwhile (or, while a
// dedicated progress goroutine runs, leaving that to it).
func (e *Engine) Wait(c *Completion) {
	if c.Done() {
		return
	}
	w := e.newIdler()
	for !c.Done() {
		if e.pollIfOwner() > 0 {
			w.reset()
			continue
		}
		if w.idle() {
			w.park(waitOne{c})
		}
	}
	w.done()
}

// WaitUntil returns once ready reports true, driving progress meanwhile
// with Wait's back-off: it spins, then pauses, then parks on the doorbell.
// ready is called after every poll and by a goroutine about to park, so it
// must be cheap and must not wait itself. Whatever makes ready true must
// ring the doorbell (the transports ring it when packets arrive) or be
// found by a poll; a parked goroutine otherwise looks again after
// progress_park_max. While the caller is parked, the goroutine that
// watches the doorbell for the engine may call ready in its place, to
// learn whether to wake it (docs/progress.md). Probe-like waits, on a
// condition rather than on a Completion, use it.
func (e *Engine) WaitUntil(ready func() bool) {
	if ready() {
		return
	}
	w := e.newIdler()
	for !ready() {
		if e.pollIfOwner() > 0 {
			w.reset()
			continue
		}
		if w.idle() {
			w.park(waitFunc{ready})
		}
	}
	w.done()
}

// waitFunc is the condition of WaitUntil: ready holds, or a poll found
// work.
type waitFunc struct{ f func() bool }

func (w waitFunc) ready(e *Engine) bool { return w.f() || e.pollIfOwner() > 0 }

// Test reports whether c is complete, polling once if it is not yet.
func (e *Engine) Test(c *Completion) bool {
	if c.Done() {
		return true
	}
	e.pollIfOwner()
	return c.Done()
}

// anyDone is the condition of WaitAny.
type anyDone struct{ cs []*Completion }

func (a *anyDone) ready(e *Engine) bool { return firstDone(a.cs) >= 0 || e.pollIfOwner() > 0 }

// firstDone returns the index of the first completed entry, -1 if none.
func firstDone(cs []*Completion) int {
	for i, c := range cs {
		if c != nil && c.Done() {
			return i
		}
	}
	return -1
}

// active reports whether cs has a non-nil entry.
func active(cs []*Completion) bool {
	for _, c := range cs {
		if c != nil {
			return true
		}
	}
	return false
}

// WaitAny returns the index of a completed entry of cs, waiting until one
// completes. Nil entries are skipped; if every entry is nil it returns -1
// at once.
func (e *Engine) WaitAny(cs []*Completion) int {
	if !active(cs) {
		return -1
	}
	w := e.newIdler()
	for {
		if i := firstDone(cs); i >= 0 {
			w.done()
			return i
		}
		if e.pollIfOwner() > 0 {
			w.reset()
			continue
		}
		if w.idle() {
			w.park(&anyDone{cs})
		}
	}
}

// TestAny returns the index of a completed entry of cs and true, polling
// once if none is complete yet; (-1, false) if none is complete, and
// (-1, true) if every entry is nil.
func (e *Engine) TestAny(cs []*Completion) (int, bool) {
	if !active(cs) {
		return -1, true
	}
	if i := firstDone(cs); i >= 0 {
		return i, true
	}
	e.pollIfOwner()
	if i := firstDone(cs); i >= 0 {
		return i, true
	}
	return -1, false
}

// WaitAll returns once every non-nil entry of cs is complete.
func (e *Engine) WaitAll(cs []*Completion) {
	for _, c := range cs {
		if c != nil {
			e.Wait(c)
		}
	}
}
