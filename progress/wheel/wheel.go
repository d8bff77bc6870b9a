// Package wheel is a hierarchical timing wheel: the timer store behind
// Tachyon's timer requests.
//
// Times are counts of a clock (time-stamp counter cycles, say); the wheel's
// tick is a power of two counts, chosen by the caller from the granularity it
// wants. Eight levels of 64 slots cover 2^48 ticks ahead of the current time;
// timers further out wait on an overflow list until the wheel's time comes
// near them. A Timer is linked into its slot through fields of its own and is
// embedded in the caller's structure, so scheduling, moving and cancelling
// one are O(1) and allocate nothing, and a wheel holds millions of pending
// timers at little cost. Advancing jumps from one occupied slot to the next,
// so an idle gap of seconds costs no more than one of a tick.
//
// A timer fires only in an Advance whose time has reached its due count,
// never earlier: the wheel compares exact counts, not ticks, before firing,
// and the tick only bounds how much work an Advance does.
//
// A Wheel is not safe for concurrent use; its owner serialises calls (the
// progress engine does so under its own lock).
//
// docs/progress.md describes the timer requests it backs.
package wheel

import (
	"errors"
	"math"
	"math/bits"
)

const (
	levelBits = 6
	slots     = 1 << levelBits
	levels    = 8
	spanBits  = levels * levelBits // the levels cover 2^48 ticks

	// List indexes beyond the slots (slot s of level l is list l*slots+s).
	expired  = levels * slots // due at or before the wheel's time
	current  = expired + 1    // due later within the current tick
	overflow = expired + 2    // beyond the span of the levels
	firing   = expired + 3    // collected by the running Advance
	lists    = expired + 4
)

// Errors Schedule returns for misuse.
var (
	// ErrNoCallback reports a Timer that has no callback: Init was not
	// called, so there is nothing to fire.
	ErrNoCallback = errors.New("wheel: timer has no callback (call Init first)")
	// ErrOtherWheel reports a Timer that is pending on another Wheel, whose
	// lists it cannot leave from this one.
	ErrOtherWheel = errors.New("wheel: timer is pending on another wheel")
)

// Timer is one event to fire at a due count. Embed it in the structure the
// event belongs to: the wheel links it through its own fields, so pending
// timers cost the wheel no memory. A Timer must not be copied while pending.
// The zero Timer is not pending and has no callback; call Init before
// scheduling it.
type Timer struct {
	next, prev *Timer
	w          *Wheel // the wheel it is pending on; nil when not pending
	due        uint64
	fire       func(*Timer)
	list       uint16 // index of the list it is linked into
}

// Init sets the function the wheel calls, with the Timer, when it fires, so
// one function can serve many timers by finding their owner from the
// pointer. It may be called again to change the callback.
func (t *Timer) Init(fire func(*Timer)) { t.fire = fire }

// Pending reports whether the timer is scheduled and has neither fired nor
// been cancelled.
func (t *Timer) Pending() bool { return t.w != nil }

// Due returns the count the timer was last scheduled for.
func (t *Timer) Due() uint64 { return t.due }

// Wheel holds pending timers and fires them as its time advances. The zero
// Wheel is ready for use, with a tick of one count and time zero; New sets
// both.
type Wheel struct {
	now   uint64 // the wheel's time, in counts
	tick  uint64 // now >> shift, except transiently inside Advance
	shift uint
	n     int
	occ   [levels]uint64 // bit s of occ[l]: slot s of level l is not empty
	head  [lists]*Timer
	low   [lists]uint64 // for a nonempty list, at most its earliest due
	tail  *Timer        // the last timer of the firing list

	late, lateMax uint64 // lateness of the timers fired since TakeLate, in counts
	lateMin       uint64 // the least of it, less one (0: none fired), so that the zero Wheel starts clear
}

// New returns an empty wheel whose tick is 1<<shift counts and whose time is
// now. A coarser tick makes Advance cheaper and NextDue looser; a shift above
// 63 is taken as 63.
func New(shift uint, now uint64) *Wheel {
	shift = min(shift, 63)
	return &Wheel{shift: shift, now: now, tick: now >> shift}
}

// Shift returns log2 of the tick in counts, as given to New.
func (w *Wheel) Shift() uint { return w.shift }

// Now returns the wheel's time: the latest count passed to Advance or New.
func (w *Wheel) Now() uint64 { return w.now }

// Len returns the number of pending timers.
func (w *Wheel) Len() int { return w.n }

// Schedule arms t to fire at the first Advance whose time is at or past due.
// A due time at or before the wheel's time fires at the next Advance. A
// timer already pending on this wheel is moved to the new due time, earlier
// or later, as cheaply as it is armed. Schedule fails only on misuse: a
// timer without a callback, or one pending on another wheel.
func (w *Wheel) Schedule(t *Timer, due uint64) error {
	if t == nil || t.fire == nil {
		return ErrNoCallback
	}
	switch t.w {
	case w:
		w.unlink(t)
	case nil:
		t.w = w
		w.n++
	default:
		return ErrOtherWheel
	}
	t.due = due
	if due <= w.now {
		w.push(t, expired)
	} else {
		w.place(t)
	}
	return nil
}

// Cancel disarms t and reports whether it was pending on this wheel, so the
// caller knows whether its callback can still run. Cancelling a timer that
// is not pending does nothing.
func (w *Wheel) Cancel(t *Timer) bool {
	if t == nil || t.w == nil || t.w != w {
		return false
	}
	w.unlink(t)
	t.w = nil
	w.n--
	return true
}

// Advance moves the wheel's time to now and fires every pending timer due at
// or before it, returning how many fired. A time earlier than the wheel's is
// taken as the wheel's. Callbacks run with the wheel's time already moved
// and may schedule and cancel timers on this wheel, the firing one
// included; a timer cancelled before its turn does not fire, and one
// scheduled at or before now fires at the next Advance, not this one.
func (w *Wheel) Advance(now uint64) int {
	now = max(now, w.now)
	w.collect(now)
	n := 0
	for t := w.head[firing]; t != nil; t = w.head[firing] {
		w.unlink(t)
		t.w = nil
		w.n--
		if f := t.fire; f != nil {
			late := now - min(t.due, now)
			w.late += late
			w.lateMax = max(w.lateMax, late)
			w.lateMin = min(w.lateMin-1, late) + 1
			f(t)
			n++
		}
	}
	return n
}

// TakeLate returns how late the timers fired since the last TakeLate were,
// in counts: summed, the most any one was (its Advance's time less its
// due count) and the least (0 if none fired), and starts them again.
func (w *Wheel) TakeLate() (sum, most, least uint64) {
	sum, most, least = w.late, w.lateMax, w.lateMin-1
	if w.lateMin == 0 {
		least = 0
	}
	w.late, w.lateMax, w.lateMin = 0, 0, 0
	return sum, most, least
}

// collect moves the wheel's time to now (not earlier than its time) and
// moves every timer due at or before it onto the firing list.
func (w *Wheel) collect(now uint64) {
	w.takeAll(expired)
	target := now >> w.shift
	if target == w.tick {
		// Still in the same tick: only timers of this tick can be due.
		if h := w.head[current]; h != nil && now >= w.low[current] {
			w.head[current] = nil
			w.redistribute(h, now)
		}
		w.now = now
		return
	}
	w.takeAll(current) // due before the end of the tick, so before now
	// Jump from one occupied slot to the next up to the target tick. The
	// occupied slots of level l lie after the current tick's digit l and
	// within its level-(l+1) slot, so the earliest is the first slot of the
	// lowest occupied level, and making its start the current tick keeps
	// every other timer's level and slot valid.
	for {
		var l uint
		for l < levels && w.occ[l] == 0 {
			l++
		}
		var h *Timer
		if l < levels {
			sh := l * levelBits
			s := uint(bits.TrailingZeros64(w.occ[l]))
			start := w.tick>>(sh+levelBits)<<(sh+levelBits) | uint64(s)<<sh
			if start > target {
				break
			}
			w.tick = start
			i := l*slots + s
			h = w.head[i]
			w.head[i] = nil
			w.occ[l] &^= 1 << s
		} else {
			h = w.head[overflow]
			if h == nil {
				break
			}
			// Overflow timers lie beyond the current 2^48-tick block, and
			// not before the block of their lowest due.
			start := max(
				(w.tick>>spanBits+1)<<spanBits,
				w.low[overflow]>>w.shift>>spanBits<<spanBits,
			)
			if start > target {
				break
			}
			w.tick = start
			w.head[overflow] = nil
		}
		w.redistribute(h, now)
	}
	w.tick = target
	w.now = now
}

// takeAll moves the whole of list i onto the firing list, in order.
func (w *Wheel) takeAll(i int) {
	h := w.head[i]
	w.head[i] = nil
	for h != nil {
		next := h.next
		w.append(h)
		h = next
	}
}

// redistribute moves the timers of the detached chain h that are due by now
// onto the firing list and places the rest again relative to the current
// tick, which must not be after any of their due ticks.
func (w *Wheel) redistribute(h *Timer, now uint64) {
	for h != nil {
		next := h.next
		if h.due <= now {
			w.append(h)
		} else {
			w.place(h)
		}
		h = next
	}
}

// place links t, due after the wheel's time, into the list of its due tick.
func (w *Wheel) place(t *Timer) {
	tick := t.due >> w.shift
	x := tick ^ w.tick
	if x == 0 {
		w.push(t, current)
		return
	}
	// The highest bit in which the due tick differs from the current one
	// picks the level: the due tick shares every higher digit with it.
	l := uint(63-bits.LeadingZeros64(x)) / levelBits
	if l >= levels {
		w.push(t, overflow)
		return
	}
	s := uint(tick>>(l*levelBits)) & (slots - 1)
	w.occ[l] |= 1 << s
	w.push(t, int(l*slots+s))
}

// push links t at the head of list i.
func (w *Wheel) push(t *Timer, i int) {
	h := w.head[i]
	if h == nil || t.due < w.low[i] {
		w.low[i] = t.due
	}
	t.list = uint16(i)
	t.prev, t.next = nil, h
	if h != nil {
		h.prev = t
	}
	w.head[i] = t
}

// append links t at the tail of the firing list, so timers fire roughly in
// the order they fell due.
func (w *Wheel) append(t *Timer) {
	if w.head[firing] == nil {
		w.head[firing] = t
		w.low[firing] = t.due
		w.tail = nil
	} else {
		w.low[firing] = min(w.low[firing], t.due)
		w.tail.next = t
	}
	t.list = firing
	t.prev, t.next = w.tail, nil
	w.tail = t
}

// unlink removes t from its list.
func (w *Wheel) unlink(t *Timer) {
	i := int(t.list)
	if t.prev != nil {
		t.prev.next = t.next
	} else {
		w.head[i] = t.next
		if t.next == nil && i < expired {
			w.occ[i/slots] &^= 1 << (i % slots)
		}
	}
	if t.next != nil {
		t.next.prev = t.prev
	} else if i == firing {
		w.tail = t.prev
	}
	t.next, t.prev = nil, nil
}

// NextDue returns a time no later than the earliest pending due time, and
// false if no timer is pending, so that a caller can sleep until then
// without firing any timer late. It is exact unless timers were cancelled or
// moved, which can leave it earlier than needed, and it costs a scan of a
// few words.
func (w *Wheel) NextDue() (uint64, bool) {
	if w.n == 0 {
		return 0, false
	}
	d := uint64(math.MaxUint64)
	for _, i := range [...]int{firing, expired, current, overflow} {
		if w.head[i] != nil {
			d = min(d, w.low[i])
		}
	}
	for l, o := range w.occ {
		if o != 0 {
			d = min(d, w.low[l*slots+bits.TrailingZeros64(o)])
			break
		}
	}
	return d, true
}
