package progress

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// How the goroutines parked on one engine share its doorbell, so that a
// ring wakes one of them and no completion is lost:
//
//  1. A goroutine about to park (idler.park) announces itself on the
//     doorbell (Doorbell.announce: the sleeper count, read by every
//     waker), reading its sequence first, then rechecks its condition.
//  2. If the engine has no watcher, it becomes the watcher and goes to 4.
//  3. Otherwise it is a follower: under the lot's lock, unless the
//     sequence has moved since step 1 (a ring it may have missed: it
//     returns to poll), it queues and sleeps in Go's scheduler, holding
//     neither P nor OS thread.
//  4. The watcher reads the sequence, polls the engine (unless a
//     dedicated goroutine does; waiting for the polling flag, so that the
//     poll begins after the ring), checks its own condition, then every
//     follower's: it wakes each whose condition is met, and each whose
//     condition it cannot check (met). Then it sleeps on the doorbell's
//     futex from the sequence it read, until a ring moves it, a deadline
//     (napTime), or progress_park_max.
//  5. A watcher whose own condition is met leaves, and the first
//     follower becomes the watcher in its place (woken, it goes to 4).
//
// No completion is lost: whatever meets a parked goroutine's condition is
// published and then rings the doorbell, and the ring, finding sleepers
// (followers count as such), moves the sequence. A change before the
// watcher's check in step 4 is seen by the check; one after it moves the
// sequence, so the watcher's sleep ends at once and it checks again; a
// follower that queued after the check compared the sequence under the
// lock, after the change, or queued before it and is seen by the next
// check.
//
// The dedicated progress goroutine (Start) is the watcher from its first
// park on: it takes the place from a waiter (demoted, which wakes and
// returns to its Wait loop, to park again as a follower), and keeps it
// while it polls, checking the followers whenever the sequence moves
// (watchAway) so that it never hands the watch over and back at each
// burst of work. Stop hands the watch to the first follower.

// met reports whether condition c, a parked goroutine's, holds, as
// another goroutine can tell without polling: the watcher wakes a
// follower whose condition it can check only once met, and any other
// follower at every check (step 4), so that a condition a ring cannot
// announce still wakes within progress_park_max. The types are matched
// exactly: a condition that embeds one of them (and waits on more, such
// as a context) is one it cannot check.
func met(c condition) (holds, known bool) {
	switch c := c.(type) {
	case waitOne:
		return c.c.Done(), true
	case *anyDone:
		return firstDone(c.cs) >= 0, true
	case waitFunc:
		return c.f(), true
	case waitOneCtx:
		return c.c.Done() || closed(c.done), true
	case *anyDoneCtx:
		return closed(c.done) || firstDone(c.cs) >= 0, true
	case waitFuncCtx:
		return closed(c.done) || c.f(), true
	}
	return false, false
}

// sleeper is one parked goroutine's place in its engine's lot.
type sleeper struct {
	c         condition
	until     uint64        // the goroutine's own deadline (idler.until), 0 if none: the watcher wakes it by then
	wake      chan struct{} // buffered: a wake-up sent before the sleeper blocks is kept
	next      *sleeper      // the next follower, or the next free sleeper
	promoted  bool          // woken to be the watcher (written before the wake-up)
	dedicated bool          // the dedicated progress goroutine
	demoted   atomic.Bool   // the dedicated goroutine took its place as the watcher
}

// lot is an engine's parked goroutines: its watcher and the followers
// behind it. It lives in process memory, beside a doorbell that may be
// shared with other processes, which only ring it.
type lot struct {
	mu         sync.Mutex    // parking and waking: never the message path
	watcher    *sleeper      // nil if none; while there are followers, never nil
	head, tail *sleeper      // followers, first parked first
	n          atomic.Int32  // followers, read unlocked by wakeFollowers and idler.reset
	untilAt    atomic.Uint64 // the earliest of the followers' own deadlines, 0 if none
	free       *sleeper      // sleepers to reuse: parking allocates only the first time
	wakes      atomic.Uint64 // parked goroutines woken: the watcher by a ring, a follower by the watcher
}

// get returns a sleeper for w's condition c; the caller holds the lock.
func (lk *lot) get(w *idler, c condition) *sleeper {
	s := lk.free
	if s != nil {
		lk.free = s.next
	} else {
		s = &sleeper{wake: make(chan struct{}, 1)}
	}
	s.c, s.until, s.next, s.promoted, s.dedicated = c, w.until, nil, false, w.dedicated
	s.demoted.Store(false)
	return s
}

// put keeps s for reuse; the caller holds the lock.
func (lk *lot) put(s *sleeper) {
	s.c = nil
	s.next = lk.free
	lk.free = s
}

// push queues follower s, already counted in n; the caller holds the
// lock.
func (lk *lot) push(s *sleeper) {
	if lk.tail == nil {
		lk.head = s
	} else {
		lk.tail.next = s
	}
	lk.tail = s
	if u := lk.untilAt.Load(); s.until != 0 && (u == 0 || s.until < u) {
		lk.untilAt.Store(s.until)
	}
}

// pop takes the first follower, nil if none; the caller holds the lock.
func (lk *lot) pop() *sleeper {
	s := lk.head
	if s != nil {
		lk.unlink(nil, s)
	}
	return s
}

// unlink takes follower s, which follows prev (nil: s is the first),
// out of the queue; the caller holds the lock.
func (lk *lot) unlink(prev, s *sleeper) {
	if prev == nil {
		lk.head = s.next
	} else {
		prev.next = s.next
	}
	if lk.tail == s {
		lk.tail = prev
	}
	s.next = nil
	lk.n.Add(-1)
	if s.until != 0 && s.until == lk.untilAt.Load() {
		u := uint64(0)
		for f := lk.head; f != nil; f = f.next {
			if f.until != 0 && (u == 0 || f.until < u) {
				u = f.until
			}
		}
		lk.untilAt.Store(u)
	}
}

// parkInLot is steps 2 and 3 for a goroutine announced on the doorbell at
// sequence seq whose condition c did not hold: it returns when the
// goroutine should poll again.
func (e *Engine) parkInLot(w *idler, c condition, seq uint32) {
	lk := &e.lot
	lk.mu.Lock()
	switch {
	case w.watch != nil && lk.watcher == w.watch:
		// The dedicated goroutine, back from polling: the watch is still
		// its own.
		lk.mu.Unlock()
		e.watch(w, w.watch)
		return
	case lk.watcher == nil:
		s := lk.get(w, c)
		lk.watcher = s
		lk.mu.Unlock()
		if w.dedicated {
			w.watch = s
			e.watch(w, s)
			return
		}
		e.watch(w, s)
		lk.mu.Lock()
		lk.put(s)
		lk.mu.Unlock()
		return
	case w.dedicated:
		// The poller takes the watch from a waiter, which need not poll:
		// a ring then wakes the goroutine that acts on it.
		old := lk.watcher
		s := lk.get(w, c)
		lk.watcher, w.watch = s, s
		old.demoted.Store(true)
		lk.mu.Unlock()
		atomic.AddUint32(&e.bell.seq, 1)
		futexWake(&e.bell.seq, 1<<30)
		e.watch(w, s)
		return
	}
	// Counted before the sequence is compared: a watcher that reads the
	// sequence after a ring this goroutine missed then reads the count
	// after it too, and checks the followers.
	lk.n.Add(1)
	if atomic.LoadUint32(&e.bell.seq) != seq {
		lk.n.Add(-1)
		lk.mu.Unlock()
		return // a ring since the recheck: it may have been for this goroutine
	}
	s := lk.get(w, c)
	lk.push(s)
	lk.mu.Unlock()
	t := parkStart()
	<-s.wake
	parkEnd(t)
	lk.wakes.Add(1)
	if s.promoted {
		e.watch(w, s)
	}
	lk.mu.Lock()
	lk.put(s)
	lk.mu.Unlock()
}

// watch is step 4's loop for the watcher s, until its own condition
// holds (step 5) or, for a waiter, the dedicated goroutine takes its
// place. The dedicated goroutine leaves whenever its poll finds work, and
// keeps the watch.
func (e *Engine) watch(w *idler, s *sleeper) {
	d := e.bell
	first := true
	for {
		seq := atomic.LoadUint32(&d.seq)
		if s.demoted.Load() {
			return
		}
		if e.closed.Load() {
			e.disband() // Close waits for every parked goroutine to leave
			return
		}
		if w.until != 0 && w.until <= theClock.Load().readCoarse()+e.marginC {
			e.resign(s) // its own deadline: its wait loop ends the wait
			return
		}
		polls := w.dedicated || !e.running.Load()
		// A poll that waits for the polling flag: one that returned at
		// once, finding it held, would trust its holder to find the work
		// the ring announced, which it may have polled past already.
		worked := polls && e.pollNow() > 0
		if s.c.ready(e) || worked {
			if w.dedicated {
				return // to poll, keeping the watch (watchAway)
			}
			if holds, known := met(s.c); holds || !known {
				e.resign(s)
				return
			}
			// Only a poll that found work, for others: stay the watcher.
		}
		e.wakeFollowers()
		timeout, due := e.napTime(polls, e.lot.firstUntil(w.until))
		if due != 0 {
			// A deadline within the margin: poll until it has passed.
			for theClock.Load().read() <= due && !s.c.ready(e) {
				w.yield()
			}
			continue
		}
		if first && !w.dedicated {
			// Goroutines queued on this P wait for it while this one
			// blocks in the kernel, until the runtime's monitor takes the
			// P back (20 µs to 10 ms later): let them run first. (Later
			// naps begin on a P the runtime found idle; the dedicated
			// goroutine's locked thread would hand its P over and back.)
			runtime.Gosched()
		}
		first = false
		t := parkStart()
		futexWait(&d.seq, seq, timeout)
		parkEnd(t)
		if atomic.LoadUint32(&d.seq) != seq {
			e.lot.wakes.Add(1) // rung, not a timeout nor a spurious return
		}
	}
}

// pollNow polls the engine once, waiting for a goroutine inside Progress
// to leave first.
func (e *Engine) pollNow() int {
	if e.serial {
		return e.poll()
	}
	e.lock()
	n := e.poll()
	e.unlock()
	return n
}

// watchAway is step 4's check for the dedicated goroutine while it polls
// and keeps the watch: seen is the sequence it last checked at. It checks
// when the sequence has moved or a follower's own deadline has come.
func (e *Engine) watchAway(seen *uint32) {
	if s := atomic.LoadUint32(&e.bell.seq); s != *seen {
		*seen = s
		e.wakeFollowers()
	} else if u := e.lot.untilAt.Load(); u != 0 && u <= theClock.Load().readCoarse()+e.marginC {
		e.wakeFollowers() // a follower's own deadline
	}
}

// wakeFollowers wakes each follower whose condition is met or cannot be
// checked, or whose own deadline is within progress_park_margin.
func (e *Engine) wakeFollowers() {
	lk := &e.lot
	if lk.n.Load() == 0 {
		return
	}
	woke := false
	var now uint64 // read at the first follower with a deadline
	lk.mu.Lock()
	var prev *sleeper
	for f := lk.head; f != nil; {
		next := f.next
		due := false
		if f.until != 0 {
			if now == 0 {
				now = theClock.Load().readCoarse()
			}
			due = f.until <= now+e.marginC
		}
		if holds, known := met(f.c); known && !holds && !due {
			prev, f = f, next
			continue
		}
		lk.unlink(prev, f)
		f.wake <- struct{}{}
		woke = true
		f = next
	}
	lk.mu.Unlock()
	if woke {
		// The woken goroutines wait on this P's run queue: let them run
		// before this goroutine blocks in a system call holding it.
		runtime.Gosched()
	}
}

// firstUntil returns the earliest of until and the followers' own
// deadlines, 0 if none.
func (lk *lot) firstUntil(until uint64) uint64 {
	if u := lk.untilAt.Load(); u != 0 && (until == 0 || u < until) {
		return u
	}
	return until
}

// disband wakes every follower and leaves the engine without a watcher:
// the watcher calls it when the engine is closed, so that no goroutine
// stays parked on a doorbell that may be unmapped (Close waits for them;
// enterNap keeps them from parking again).
func (e *Engine) disband() {
	lk := &e.lot
	lk.mu.Lock()
	lk.watcher = nil
	for f := lk.pop(); f != nil; f = lk.pop() {
		f.wake <- struct{}{}
	}
	lk.mu.Unlock()
}

// resign is step 5: watcher s leaves, and the first follower, if any,
// takes its place.
func (e *Engine) resign(s *sleeper) {
	e.wakeFollowers() // those its last poll completed, without a hand-over's delay
	lk := &e.lot
	lk.mu.Lock()
	if lk.watcher == s {
		lk.watcher = nil
		if f := lk.pop(); f != nil {
			f.promoted = true
			lk.watcher = f
			f.wake <- struct{}{}
		}
	}
	lk.mu.Unlock()
}

// resignDedicated hands the dedicated goroutine's watch, if it has it, to
// the first follower: Stop calls it once the goroutine has left.
func (e *Engine) resignDedicated() {
	lk := &e.lot
	lk.mu.Lock()
	s := lk.watcher
	lk.mu.Unlock()
	if s != nil && s.dedicated {
		e.resign(s)
	}
}

// parkStart counts a park (progress_parks) and returns the clock reading
// it starts at, for parkEnd.
func parkStart() uint64 {
	pvParks.Add(1)
	return theClock.Load().read()
}

// parkEnd adds the time since parkStart's reading t to
// progress_park_time. The two readings cost nanoseconds beside the
// microseconds a futex sleep and its wake-up take.
func parkEnd(t uint64) { pvParkTime.Add(theClock.Load().read() - t) }
