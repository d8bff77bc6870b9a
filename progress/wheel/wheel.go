// Package wheel is a hierarchical timing wheel: the timer store behind
// Tachyon's timer requests.
//
// Times are counts of a clock (time-stamp counter cycles); the wheel's tick
// is a power of two counts, chosen by the caller from the granularity it
// wants. Eight levels of 64 slots cover 2^48 ticks ahead of the current
// time; timers further out wait on an overflow list. Scheduling, moving and
// cancelling a timer are O(1) and allocate nothing, since a Timer is linked
// into its slot through fields of its own, so the wheel holds millions of
// pending timers at little cost. Advancing jumps from one occupied slot to
// the next, so an idle gap of seconds costs no more than one of a tick.
//
// A timer fires only in an Advance whose time has reached its due count,
// never earlier: the wheel compares exact counts, not ticks, before firing.
//
// A Wheel is not safe for concurrent use; its owner serialises calls (the
// progress engine does so under its polling flag).
package wheel

import (
	"errors"
	"math/bits"
)

const (
	levelBits = 6
	slots     = 1 << levelBits
	levels    = 8
	spanBits  = levelBits * levels // ticks the levels cover: 2^48

	notPending = -1
	overflow   = levels * slots // where: the overflow list
	expired    = overflow + 1   // where: due, waiting for the next Advance
	firing     = overflow + 2   // where: being fired by the current Advance
	lists      = overflow + 3
)

// Errors of Schedule.
var (
	// ErrNoCallback reports a Timer that was not initialised with Init.
	ErrNoCallback = errors.New("wheel: timer has no callback (call Init first)")
	// ErrOtherWheel reports a Timer that is pending on another Wheel.
	ErrOtherWheel = errors.New("wheel: timer is pending on another wheel")
)

// Timer is one pending event. Embed it in the structure the event belongs
// to; the wheel links it through its own fields and never allocates.
type Timer struct {
	next, prev *Timer
	due        uint64
	w          *Wheel
	where      int32 // list index, or notPending
	fire       func(*Timer)
}

// Init sets the function the wheel calls, with the Timer, when it fires.
// It must not be called while the timer is pending.
func (t *Timer) Init(fire func(*Timer)) {
	*t = Timer{fire: fire, where: notPending}
}

// Pending reports whether the timer is scheduled and has not fired or been
// cancelled.
func (t *Timer) Pending() bool { return t.w != nil && t.where != notPending }

// Due returns the count the timer was last scheduled for.
func (t *Timer) Due() uint64 { return t.due }

// Wheel holds pending timers and fires them as its time advances.
type Wheel struct {
	shift uint
	now   uint64 // time of the last Advance, in counts
	cur   uint64 // now >> shift: the current tick
	n     int
	occ   [levels]uint64 // bit s of occ[l]: slot s of level l is not empty
	head  [lists]*Timer
}

// New returns an empty wheel whose tick is 1<<shift counts and whose time
// is now.
func New(shift uint, now uint64) *Wheel {
	if shift > 63 {
		shift = 63
	}
	return &Wheel{shift: shift, now: now, cur: now >> shift}
}

// Shift returns log2 of the tick in counts.
func (w *Wheel) Shift() uint { return w.shift }

// Now returns the wheel's time: the latest count passed to Advance or New.
func (w *Wheel) Now() uint64 { return w.now }

// Len returns the number of pending timers.
func (w *Wheel) Len() int { return w.n }

// Schedule arms t to fire at the first Advance whose time is at or past
// due; a due time already past fires at the next Advance. A pending timer
// is moved to the new due time, earlier or later.
func (w *Wheel) Schedule(t *Timer, due uint64) error {
	if t.fire == nil {
		return ErrNoCallback
	}
	if t.Pending() {
		if t.w != w {
			return ErrOtherWheel
		}
		w.unlink(t)
	} else {
		t.w = w
		w.n++
	}
	t.due = due
	w.place(t)
	return nil
}

// Cancel disarms t and reports whether it was pending on this wheel.
func (w *Wheel) Cancel(t *Timer) bool {
	if !t.Pending() || t.w != w {
		return false
	}
	w.unlink(t)
	t.where = notPending
	w.n--
	return true
}

// place links t into the list its due time belongs to.
func (w *Wheel) place(t *Timer) {
	if t.due <= w.now {
		w.push(t, expired)
		return
	}
	tick := t.due >> w.shift
	x := tick ^ w.cur
	if x == 0 {
		w.push(t, int(tick&(slots-1)))
		return
	}
	l := (63 - bits.LeadingZeros64(x)) / levelBits
	if l >= levels {
		w.push(t, overflow)
		return
	}
	w.push(t, l*slots+int(tick>>(l*levelBits)&(slots-1)))
}

func (w *Wheel) push(t *Timer, where int) {
	h := w.head[where]
	t.prev, t.next = nil, h
	if h != nil {
		h.prev = t
	}
	w.head[where] = t
	t.where = int32(where)
	if where < overflow {
		w.occ[where/slots] |= 1 << (where % slots)
	}
}

func (w *Wheel) unlink(t *Timer) {
	where := int(t.where)
	if t.prev != nil {
		t.prev.next = t.next
	} else {
		w.head[where] = t.next
		if t.next == nil && where < overflow {
			w.occ[where/slots] &^= 1 << (where % slots)
		}
	}
	if t.next != nil {
		t.next.prev = t.prev
	}
	t.next, t.prev = nil, nil
}

// detach empties list where and returns its former contents.
func (w *Wheel) detach(where int) *Timer {
	h := w.head[where]
	w.head[where] = nil
	if where < overflow {
		w.occ[where/slots] &^= 1 << (where % slots)
	}
	return h
}

// replace places every timer of the chain h again, relative to the current
// time.
func (w *Wheel) replace(h *Timer) {
	for h != nil {
		next := h.next
		w.place(h)
		h = next
	}
}

// nextEvent returns the first tick at or after the current one at which a
// slot must be processed: a level-0 slot whose timers fall due in that tick,
// the start of a higher level's slot whose timers must move down, or the
// boundary at which the overflow list is looked at again.
func (w *Wheel) nextEvent() (uint64, bool) {
	cur := w.cur
	if m := w.occ[0] &^ (1<<(cur&(slots-1)) - 1); m != 0 {
		return cur&^(slots-1) | uint64(bits.TrailingZeros64(m)), true
	}
	for l := 1; l < levels; l++ {
		s := uint(l * levelBits)
		d := cur >> s & (slots - 1)
		if m := w.occ[l] &^ (2<<d - 1); m != 0 {
			return cur>>(s+levelBits)<<(s+levelBits) | uint64(bits.TrailingZeros64(m))<<s, true
		}
	}
	if w.head[overflow] != nil {
		return (cur>>spanBits + 1) << spanBits, true
	}
	return 0, false
}

// Advance moves the wheel's time to now and fires, in no particular order,
// every timer due at or before it; it returns how many fired. A time earlier
// than the wheel's is taken as the wheel's. Callbacks may schedule and
// cancel timers on this wheel; one they schedule at or before now fires at
// the next Advance.
func (w *Wheel) Advance(now uint64) int {
	if now > w.now {
		w.now = now
	}
	target := w.now >> w.shift
	for {
		ev, ok := w.nextEvent()
		if !ok || ev > target {
			break
		}
		moved := ev != w.cur
		w.cur = ev
		if moved && ev&(1<<spanBits-1) == 0 && w.head[overflow] != nil {
			w.replace(w.detach(overflow))
		}
		for l := levels - 1; l >= 1; l-- {
			s := uint(l * levelBits)
			if ev&(1<<s-1) != 0 {
				continue
			}
			where := l*slots + int(ev>>s&(slots-1))
			if w.occ[l]&(1<<(where%slots)) != 0 {
				w.replace(w.detach(where))
			}
		}
		if where := int(ev & (slots - 1)); w.occ[0]&(1<<where) != 0 {
			w.replace(w.detach(where))
		}
		if ev == target {
			break
		}
	}
	w.cur = target
	return w.fireExpired()
}

// fireExpired fires the timers on the expired list as it stands; timers
// callbacks add to it wait for the next Advance.
func (w *Wheel) fireExpired() int {
	h := w.detach(expired)
	if h == nil {
		return 0
	}
	for t := h; t != nil; t = t.next {
		t.where = firing
	}
	w.head[firing] = h
	n := 0
	for {
		t := w.head[firing]
		if t == nil {
			return n
		}
		w.unlink(t)
		t.where = notPending
		w.n--
		n++
		t.fire(t)
	}
}

// NextDue returns a time no later than the earliest pending due time, and
// false if no timer is pending. A caller that sleeps until then and
// advances the wheel never fires a timer late on its account. The time is
// exact when the earliest timer falls due within the next 64 ticks, and
// otherwise the start of the tick range its slot covers.
func (w *Wheel) NextDue() (uint64, bool) {
	if h := w.head[expired]; h != nil {
		due := h.due
		for t := h.next; t != nil; t = t.next {
			due = min(due, t.due)
		}
		return due, true
	}
	ev, ok := w.nextEvent()
	if !ok {
		return 0, false
	}
	if ev>>levelBits == w.cur>>levelBits { // a level-0 slot: exact
		if where := int(ev & (slots - 1)); w.occ[0]&(1<<where) != 0 {
			due := w.head[where].due
			for t := w.head[where].next; t != nil; t = t.next {
				due = min(due, t.due)
			}
			return due, true
		}
	}
	return ev << w.shift, true
}
