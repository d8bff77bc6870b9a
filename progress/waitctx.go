package progress

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Waiting bounded by a context: WaitContext, WaitAnyContext,
// WaitAllContext and WaitUntilContext wait as Wait and its forms do
// (spin, pause, park, with the same idler) and end early when the context
// does. What a context costs:
//
//   - One that can never end (Done returns nil, as Background's does):
//     a call of Done, and the plain form runs. WaitContext polls once
//     before it calls Done: a wait that poll ends never looks.
//   - Otherwise, until the waiter parks: a look at the context's Done
//     channel (a non-blocking receive) every ctxLookEvery empty polls,
//     none on a poll that finds work. No allocation, no goroutine.
//   - A waiter about to park for the first time in a call registers a
//     context.AfterFunc that wakes the doorbell's sleepers when the
//     context ends (it allocates; parking is a system call anyway), and
//     bounds its naps by the context's deadline, as by a timer's. A
//     cancel so wakes it at once; a deadline wakes it on time even if no
//     one rings. The registration is removed when the wait ends.
//
// They return nil once what they wait for has happened, and the
// context's error, unwrapped (context.Canceled, context.DeadlineExceeded
// or what the context's Err returns), if the context ended first; when
// both have happened by the time they look, the wait's end wins. A
// deadline is also read on this package's clock: once it has passed they
// return context.DeadlineExceeded, even if the context's own timer has
// not yet closed Done.

// ctxLookEvery is how many empty polls pass between two looks at a
// context: a look is a call into the runtime (a non-blocking receive),
// about as long as an empty serial poll, and a cancel is noticed within
// this many polls while the waiter spins.
const ctxLookEvery = 8

// WaitContext is Wait bounded by ctx: it returns nil once c is complete,
// or ctx's error if ctx ends first, leaving c as it is (pending; the
// caller may wait again).
func (e *Engine) WaitContext(ctx context.Context, c *Completion) error {
	if c.Done() {
		return nil
	}
	// One poll before the context is looked at: it often completes c (a
	// message that has just landed), and then the context costs nothing.
	if e.pollIfOwner(); c.Done() {
		return nil
	}
	done := ctx.Done()
	if done == nil {
		e.Wait(c)
		return nil
	}
	w := e.newIdler()
	k := newCtxWait(ctx, done)
	for !c.Done() {
		if e.pollIfOwner() > 0 {
			w.reset()
			continue
		}
		if k.ended() {
			break
		}
		if w.idle() {
			k.park(&w, waitOneCtx{c, done})
		}
	}
	k.disarm()
	w.done()
	if c.Done() {
		return nil
	}
	return k.err()
}

// WaitAnyContext is WaitAny bounded by ctx: the index of a completed
// entry of cs and nil, -1 and nil at once if every entry is nil, or -1
// and ctx's error if ctx ends first.
func (e *Engine) WaitAnyContext(ctx context.Context, cs []*Completion) (int, error) {
	if !active(cs) {
		return -1, nil
	}
	if i := firstDone(cs); i >= 0 {
		return i, nil
	}
	done := ctx.Done()
	if done == nil {
		return e.WaitAny(cs), nil
	}
	w := e.newIdler()
	k := newCtxWait(ctx, done)
	for {
		if i := firstDone(cs); i >= 0 {
			k.disarm()
			w.done()
			return i, nil
		}
		if e.pollIfOwner() > 0 {
			w.reset()
			continue
		}
		if k.ended() {
			k.disarm()
			w.done()
			if i := firstDone(cs); i >= 0 {
				return i, nil
			}
			return -1, k.err()
		}
		if w.idle() {
			k.park(&w, &anyDoneCtx{anyDone{cs}, done})
		}
	}
}

// WaitAllContext is WaitAll bounded by ctx: nil once every non-nil entry
// of cs is complete, or ctx's error if ctx ends first; entries complete
// by then stay complete, the others pending.
func (e *Engine) WaitAllContext(ctx context.Context, cs []*Completion) error {
	for _, c := range cs {
		if c != nil {
			if err := e.WaitContext(ctx, c); err != nil {
				return err
			}
		}
	}
	return nil
}

// WaitUntilContext is WaitUntil bounded by ctx: nil once ready reports
// true, or ctx's error if ctx ends first. ready is called as WaitUntil
// calls it.
func (e *Engine) WaitUntilContext(ctx context.Context, ready func() bool) error {
	if ready() {
		return nil
	}
	done := ctx.Done()
	if done == nil {
		e.WaitUntil(ready)
		return nil
	}
	w := e.newIdler()
	k := newCtxWait(ctx, done)
	for !ready() {
		if e.pollIfOwner() > 0 {
			w.reset()
			continue
		}
		if k.ended() {
			k.disarm()
			w.done()
			if ready() {
				return nil
			}
			return k.err()
		}
		if w.idle() {
			k.park(&w, waitFuncCtx{waitFunc{ready}, done})
		}
	}
	k.disarm()
	w.done()
	return nil
}

// ctxWait is the context side of one wait: when to look at the context
// next, and, once the waiter has parked, the wake-up registered with it
// and its deadline on this package's clock.
type ctxWait struct {
	ctx   context.Context
	done  <-chan struct{}
	looks int       // empty polls left before the next look
	until uint64    // the deadline in clock counts, 0 if none or not yet parked
	wake  *ctxWaker // registered with the context at the first park, nil before
	stop  func() bool
}

// newCtxWait returns the context side of a wait on ctx, whose Done is
// done (not nil). The first look comes after ctxLookEvery empty polls:
// a wait that a poll or two ends, the usual case, never looks.
func newCtxWait(ctx context.Context, done <-chan struct{}) ctxWait {
	return ctxWait{ctx: ctx, done: done, looks: ctxLookEvery - 1}
}

// ended reports, every ctxLookEvery calls, whether the context has ended
// or its deadline passed.
func (k *ctxWait) ended() bool {
	if k.looks > 0 {
		k.looks--
		return false
	}
	k.looks = ctxLookEvery - 1
	if closed(k.done) {
		return true
	}
	return k.until != 0 && theClock.Load().readCoarse() >= k.until
}

// park parks the waiter with c (which must look at the context too),
// registering the context's wake-up and deadline first if this is the
// wait's first park; the next empty poll looks at the context.
func (k *ctxWait) park(w *idler, c condition) {
	if k.wake == nil {
		k.arm(w)
	}
	w.park(c)
	k.looks = 0
}

// arm registers the wake-up of a parked waiter with the context and
// bounds the waiter's naps by the context's deadline.
func (k *ctxWait) arm(w *idler) {
	k.wake = &ctxWaker{e: w.e, bell: w.e.bell}
	k.stop = context.AfterFunc(k.ctx, k.wake.ring)
	if d, ok := k.ctx.Deadline(); ok {
		k.until = theClock.Load().read() + SecondsToCounts(time.Until(d).Seconds())
		w.until = k.until
	}
}

// disarm removes the registration of arm, if any: once it returns, the
// wake-up rings no doorbell (which the caller may then close and unmap).
func (k *ctxWait) disarm() {
	if k.wake == nil {
		return
	}
	k.stop()
	k.wake.mu.Lock()
	k.wake.bell = nil
	k.wake.mu.Unlock()
}

// err is the error of a wait the context ended: the context's, or, if
// its deadline passed on this package's clock before its timer closed
// Done, context.DeadlineExceeded.
func (k *ctxWait) err() error {
	if err := k.ctx.Err(); err != nil {
		return err
	}
	return context.DeadlineExceeded
}

// ctxWaker wakes the goroutines parked on a doorbell when a context ends
// (its ring runs on a goroutine of context.AfterFunc's), until the wait
// that registered it is over.
type ctxWaker struct {
	mu   sync.Mutex
	e    *Engine
	bell *Doorbell // nil once the wait is over
}

func (wk *ctxWaker) ring() {
	wk.mu.Lock()
	if wk.bell != nil && wk.e.enterNap() { // not once the engine is closed: its doorbell may be gone
		wk.bell.wakeAll()
		wk.e.napping.Add(-1)
	}
	wk.mu.Unlock()
}

// wakeAll moves d's sequence and wakes every goroutine asleep on its
// futex, whether or not the sleeper count shows one: each engine's
// watcher, which then wakes the followers whose conditions hold (met),
// the waiter whose context ended among them. The context's end is
// published before (the waker runs after Done is closed), and a sleeper
// that read the sequence after the bump sees it when it rechecks.
func (d *Doorbell) wakeAll() {
	atomic.AddUint32(&d.seq, 1)
	futexWake(&d.seq, 1<<30)
}

// closed reports whether done is closed, without blocking.
func closed(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// waitOneCtx is the condition of WaitContext: waitOne's, or the context
// has ended.
type waitOneCtx struct {
	c    *Completion
	done <-chan struct{}
}

func (w waitOneCtx) ready(e *Engine) bool {
	return w.c.Done() || closed(w.done) || e.pollIfOwner() > 0
}

// anyDoneCtx is the condition of WaitAnyContext.
type anyDoneCtx struct {
	anyDone
	done <-chan struct{}
}

func (a *anyDoneCtx) ready(e *Engine) bool { return closed(a.done) || a.anyDone.ready(e) }

// waitFuncCtx is the condition of WaitUntilContext.
type waitFuncCtx struct {
	waitFunc
	done <-chan struct{}
}

func (w waitFuncCtx) ready(e *Engine) bool { return closed(w.done) || w.waitFunc.ready(e) }
