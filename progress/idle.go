package progress

import (
	"fmt"
	"runtime"
	"strconv"
	"time"

	"github.com/tachyon-hpc/tachyon/asm"
	"github.com/tachyon-hpc/tachyon/cvar"
)

// IdleStrategy is what a goroutine waiting on an engine (Wait, WaitAny,
// WaitAll, WaitUntil, a timer request's Wait, the dedicated progress
// goroutine of Start) does while its polls find nothing to do. Each is
// built from up to three phases, timed from the last poll that found work:
//
//   - spin: call Progress back to back, holding the goroutine's P and its
//     OS thread (Go's scheduler may still preempt it, after 10 ms, if
//     other goroutines wait for a P);
//   - yield: poll with a PAUSE instruction between calls and, every 16
//     polls (progress_yield_every; every poll when oversubscribed), give
//     the P to any other runnable goroutine (runtime.Gosched)
//     and then the OS thread to any other runnable thread (sched_yield):
//     another goroutine waits at most about 16 polls for the P, and a rank
//     in another process for the CPU;
//   - park: sleep until the engine's doorbell rings, the goroutine's own
//     request completes, a timer or a poller's deadline comes within
//     progress_park_margin, or progress_park_max passes. One parked
//     goroutine of the engine, its watcher, sleeps on the doorbell's futex
//     (its OS thread blocked in the kernel, whose P the runtime hands to
//     another thread when a goroutine needs one); every other one sleeps
//     in Go's scheduler, holding neither P nor thread, until the watcher,
//     or a goroutine whose poll found work, finds its condition met
//     (docs/progress.md).
//
// The control variable progress_idle sets an engine's strategy, and
// WithIdleStrategy overrides it; progress_spin and progress_pause (or
// WithIdle) time the phases.
type IdleStrategy uint8

const (
	// IdlePark spins for progress_spin, yields until progress_pause has
	// passed, then parks. The default: a message that lands soon after
	// the wait began is found as fast as by spinning, and a long wait
	// costs neither a core nor the other goroutines' turn.
	//
	// One waiting goroutine of an engine spins or yields at a time: only
	// one can poll (Progress), and the others' loops would hold Ps and
	// starve the rest of the program, the network poller included (it is
	// polled only when the run queues are empty). A waiter that finds
	// another one has spun since its own last look (a wait that began
	// later) parks at once; the goroutine that polls wakes it when its
	// condition is met.
	IdlePark IdleStrategy = iota
	// IdleYield spins for progress_spin, then yields for as long as the
	// wait lasts; it never parks. Another goroutine waits for a P at most
	// about 16 polls, and no wake-up from the kernel is ever paid, but the
	// waiting goroutine keeps a CPU busy whenever nothing else runs, and
	// while it is runnable Go's scheduler polls the network only every
	// 10 ms (from its monitor thread): a service's sockets wait that long.
	IdleYield
	// IdleSpin spins for as long as the wait lasts; it never yields nor
	// parks. For a goroutine per dedicated core (a job's rank with
	// GOMAXPROCS above its goroutines): no system call at all, and another
	// goroutine of the program gets the P only when Go's scheduler
	// preempts the spinner.
	IdleSpin
)

var idleNames = [...]string{"park", "yield", "spin"}

// String returns the strategy's name in progress_idle: park, yield or
// spin.
func (s IdleStrategy) String() string {
	if int(s) < len(idleNames) {
		return idleNames[s]
	}
	return "IdleStrategy(" + strconv.Itoa(int(s)) + ")"
}

// ParseIdleStrategy returns the strategy named s ("park", "yield" or
// "spin").
func ParseIdleStrategy(s string) (IdleStrategy, error) {
	for i, n := range idleNames {
		if s == n {
			return IdleStrategy(i), nil
		}
	}
	return 0, fmt.Errorf("progress: unknown idle strategy %q (want park, yield or spin)", s)
}

var idleVar = cvar.NewEnum("progress_idle", idleNames[IdlePark], idleNames[:],
	"What a goroutine waiting on an engine does while its polls find nothing: park spins for progress_spin, then yields its P and thread every 16 polls until progress_pause, then parks (one watcher per engine on the doorbell's futex, the others in Go's scheduler); yield spins, then yields for as long as the wait lasts; spin polls back to back, never yielding. Read when an engine is made; progress.WithIdleStrategy overrides it.",
	cvar.WithCategory("progress"))

// WithIdleStrategy sets the engine's idle strategy, overriding the control
// variable progress_idle.
func WithIdleStrategy(s IdleStrategy) Option {
	return func(e *Engine) error {
		if int(s) >= len(idleNames) {
			return fmt.Errorf("progress: %v is not an idle strategy", s)
		}
		e.strategy = s
		return nil
	}
}

// WithIdle overrides the control variables progress_spin, progress_pause
// and progress_park_max for this engine.
func WithIdle(spin, pause, parkMax time.Duration) Option {
	return func(e *Engine) error {
		if spin < 0 || pause < 0 || parkMax <= 0 {
			return fmt.Errorf("progress: idle durations must be non-negative and park max positive (got %v, %v, %v)", spin, pause, parkMax)
		}
		e.spin, e.pause, e.parkMax = spin, pause, parkMax
		e.idleSet = true
		return nil
	}
}

// WithOversubscribed says that the engine's rank shares its host with
// more ranks than the host has CPUs. Its waits then skip the spin phase
// (unless progress_spin is set, or WithIdle gives the phases) and yield
// from the first empty poll: a spinning rank holds the CPU its peer needs
// to answer. With 4 ranks on 2 CPUs an 8 B allreduce took 76-84 µs with
// the spin and 20-26 µs without it (docs/progress.md).
func WithOversubscribed(over bool) Option {
	return func(e *Engine) error {
		e.oversubscribed = over
		return nil
	}
}

// IdleStrategy returns the engine's idle strategy.
func (e *Engine) IdleStrategy() IdleStrategy { return e.strategy }

// Oversubscribed reports whether the engine was made for a rank that
// shares its CPUs with more ranks than there are (WithOversubscribed).
func (e *Engine) Oversubscribed() bool { return e.oversubscribed }

// setIdle converts the phases' durations to clock counts for the
// engine's strategy: the spin phase of IdleSpin, and the yield phase of
// IdleYield, never end.
func (e *Engine) setIdle(c *clock) {
	e.spinC = durationToCounts(e.spin, c)
	e.parkC = e.spinC + durationToCounts(e.pause, c)
	switch e.strategy {
	case IdleSpin:
		e.spinC, e.parkC = ^uint64(0), ^uint64(0)
	case IdleYield:
		e.parkC = ^uint64(0)
	}
}

// idler backs a waiting goroutine off while there is nothing to do, as the
// engine's IdleStrategy says.
type idler struct {
	e *Engine
	stretch
	role  role   // among the engine's waiters (IdlePark)
	mark  uint64 // its last mark in Engine.activeAt, 0 if none
	until uint64 // the waiter's own deadline (a context's) in clock counts, 0 if none: bounds its naps as a timer does
	began uint64 // the coarse reading of the wait's first idle call, 0 if none yet: progress_wait_time

	dedicated bool     // the engine's dedicated progress goroutine (Start)
	watch     *sleeper // the dedicated goroutine's place as the engine's watcher, once it has one
}

// stretch is an idler's state in the current idle stretch: what work
// found ends.
type stretch struct {
	since  uint64 // clock count when the stretch began, 0 if none
	pauses int    // polls in the yield phase so far
	skip   int    // spin phase: idle calls left before the next clock read
}

// role is a waiter's part in keeping one goroutine of an engine spinning
// or yielding at a time (IdlePark).
type role uint8

const (
	roleActive  role = iota // spinning or yielding, marking Engine.activeAt as it goes
	rolePassive             // a newer waiter spins: park at once
	roleFree                // the dedicated goroutine, or a strategy that never parks: no part
)

// spinClockEvery is how many empty polls of the spin phase share one clock
// read: a read costs more than half an empty serial poll (docs/progress.md
// has both figures), and a message that lands is found on average half a
// loop later.
const spinClockEvery = 4

func (e *Engine) newIdler() idler {
	if e.strategy != IdlePark {
		return idler{e: e, role: roleFree}
	}
	return idler{e: e}
}

// newDedicatedIdler is the dedicated goroutine's idler: it is the
// engine's poller, and waits on no one.
func (e *Engine) newDedicatedIdler() idler { return idler{e: e, role: roleFree, dedicated: true} }

// reset ends the idle stretch: work was found. If it may have met the
// conditions of goroutines parked behind the watcher, it wakes them.
func (w *idler) reset() {
	w.stretch = stretch{}
	if w.e.lot.n.Load() != 0 {
		w.e.wakeFollowers()
	}
}

// idle is called each time a poll found nothing; it returns when the caller
// should look again. It reports true when the caller should park: it then
// calls park with its condition. (The condition is not an argument here:
// WaitAny's and the Context forms' allocate as interface values, which
// only parking, a system call anyway, may do. Wait's and WaitUntil's,
// one pointer each, do not.)
func (w *idler) idle() bool {
	e := w.e
	if w.skip > 0 {
		w.skip--
		return false
	}
	// An idle stretch is timed on this goroutine alone: the coarse read
	// is enough, and it shortens every empty poll of a waiter.
	now := theClock.Load().readCoarse()
	asm.StoreRelaxed64(&e.coarse, now) // the engine's Coarse, for its pollers and done
	if w.since == 0 {
		w.since = now
		if w.began == 0 {
			w.began = now
		}
		return w.alone(now)
	}
	waited := now - w.since
	if waited >= e.parkC || w.alone(now) {
		return true
	}
	if waited < e.spinC {
		w.skip = spinClockEvery - 1
		return false
	}
	w.yield()
	return false
}

// done ends a wait: if it did not return at once, it adds the time from
// its first idle call to the engine's latest coarse reading (Coarse's:
// this waiter's last, or a poll's since) to progress_wait_time, with one
// atomic add (a plain one on a serial engine, whose waits never
// overlap). The readings are the ones the engine and its waiters take
// anyway, so the time is short of the wait's by the polls after the
// last (fewer than spinClockEvery in the spin phase, one in the yield
// phase; none after a park or a yield of the CPU, which read the clock
// last), and by any time the kernel took the thread off its CPU after
// the last. A reading earlier than the first (another goroutine's, or a
// CPU's whose counter lags) counts nothing.
func (w *idler) done() {
	if w.began != 0 {
		w.count()
	}
}

// count is done for a wait that did not return at once.
func (w *idler) count() {
	switch d := asm.LoadRelaxed64(&w.e.coarse) - w.began; {
	case int64(d) <= 0:
	case w.e.serial:
		w.e.waitTime.Add(d)
	default:
		w.e.waitTime.AddAtomic(d)
	}
}

// alone plays w's role as of now: it reports true when w should park at
// once because another waiter of the engine spins. A participating waiter
// marks Engine.activeAt at each clock read of its spin and yield phases;
// one that finds there a mark not its own, left since its last, yields
// the place to that newer waiter and parks. So the waiter whose wait
// began last spins, and no identity is needed: the mark of a wait that
// ended stops moving, and a waiter's first look only marks.
func (w *idler) alone(now uint64) bool {
	e := w.e
	switch w.role {
	case rolePassive:
		return true
	case roleFree:
		return false
	}
	if w.mark != 0 && asm.LoadRelaxed64(&e.activeAt) != w.mark {
		w.role = rolePassive
		return true
	}
	w.mark = now | 1 // never 0, which means no mark yet
	asm.StoreRelaxed64(&e.activeAt, w.mark)
	return false
}

// yield is one step of the yield phase: a short pause, and every
// yieldEvery steps the P to other goroutines, then the CPU to other
// threads. Gosched lets a goroutine of this program run (another rank of
// an in-process world, the rest of a service); sched_yield lets a rank in
// another process run where ranks outnumber free CPUs (oversubscribed, or
// a busy host), since the peer that would answer may be waiting for this
// very CPU. The clock is read after giving them away, which may have
// lasted a time slice of another thread's, so that a wait that ends next
// counts it (progress_wait_time): a coarse read beside a system call.
func (w *idler) yield() {
	for i := 0; i < 4; i++ {
		asm.Pause()
	}
	if w.pauses++; w.pauses%w.e.yieldEvery == 0 {
		runtime.Gosched()
		osYield()
		w.e.refreshCoarse()
	}
}

// park sleeps until c is ready or the goroutine should poll again (see
// IdlePark): at once if a timer, a poller's deadline (Deadliner) or the
// waiter's own (until) is close, so that the caller polls it in time, or
// if the engine is closed (its doorbell may be gone).
func (w *idler) park(c condition) {
	e := w.e
	due := e.nextDeadline()
	if w.until != 0 && w.until < due {
		due = w.until
	}
	if due != ^uint64(0) && due <= theClock.Load().read()+e.marginC {
		return // a timer is close: keep polling so it fires on time
	}
	e.beforePark()
	if !e.enterNap() {
		return // closed: its doorbell may be gone
	}
	seq, sure := e.bell.announce()
	if !c.ready(e) {
		if sure {
			e.parkInLot(w, c, seq)
		} else {
			e.napAlone(w, seq)
		}
	}
	e.bell.leave()
	e.napping.Add(-1)
	e.refreshCoarse() // the next poll may come a nap later than the last reading, and done counts the nap
}

// napAlone is park for a goroutine whose wakers may not have seen it
// announce itself (Doorbell.announce): it sleeps on the doorbell's futex
// beside the watcher, for at most a millisecond, since a ring may have
// been missed before the wakers knew to fence.
func (e *Engine) napAlone(w *idler, seq uint32) {
	timeout, due := e.napTime(w.dedicated || !e.running.Load(), w.until)
	if due != 0 {
		return // a deadline is close: poll
	}
	t := parkStart()
	futexWait(&e.bell.seq, seq, min(timeout, time.Millisecond))
	parkEnd(t)
}

// napTime returns how long the watcher may sleep on the doorbell: until
// progress_park_max passes, progress_park_margin before the deadline
// until (its own, or a follower's, 0 if none) or, for a goroutine that
// polls (c polls the engine), before the next timer or poller's
// deadline. It returns 0 and the deadline if that is within the margin
// already, so that the caller polls until it has passed.
func (e *Engine) napTime(polls bool, until uint64) (time.Duration, uint64) {
	timeout := e.parkMax
	due := ^uint64(0)
	if polls {
		due = e.nextDeadline() // else the dedicated goroutine keeps the timers
	}
	if until != 0 && until < due {
		due = until
	}
	if due == ^uint64(0) {
		return timeout, 0
	}
	clk := theClock.Load()
	now := clk.read()
	if due <= now+e.marginC {
		return 0, due
	}
	if d := time.Duration(float64(due-now-e.marginC) * clk.secPerCount * 1e9); d < timeout {
		timeout = d
	}
	return timeout, 0
}

// nextDeadline returns the earliest of the next timer's due time and the
// pollers' (Deadliner), ^0 if none.
func (e *Engine) nextDeadline() uint64 {
	due := asm.LoadAcquire64(&e.nextDue)
	for _, p := range *e.pollers.Load() {
		if d, ok := p.(Deadliner); ok {
			if t, ok := d.NextDue(); ok && t < due {
				due = t
			}
		}
	}
	return due
}

// beforePark lets the pollers that need it prepare for a nap (Parker).
func (e *Engine) beforePark() {
	for _, p := range *e.pollers.Load() {
		if pk, ok := p.(Parker); ok {
			pk.BeforePark()
		}
	}
}
