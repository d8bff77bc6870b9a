package progress

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tachyon-hpc/tachyon/asm"
	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/progress/wheel"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// One call to Progress, in order:
//
//  1. Take the polling flag; if another goroutine holds it, return at once:
//     that goroutine is making the progress this caller wanted.
//  2. Poll every registered Poller once (transports' receive queues).
//  3. If a timer may be due, read the clock and fire every due timer.
//  4. Release the flag.
//
// Goroutines that wait (Wait, WaitAny, WaitAll, the dedicated progress
// goroutine) call Progress in a loop and, while it finds nothing to do, back
// off as the engine's IdleStrategy says (idle.go): by default spin for
// progress_spin, then poll yielding now and then until progress_pause has
// passed, then park (park.go) until the engine's Doorbell rings, a timer
// is close to due, or progress_park_max elapses.

var (
	spinTime = cvar.NewDuration("progress_spin", 50*time.Microsecond,
		"How long a waiting goroutine calls Progress back to back after the last work it found, before it starts yielding (progress_idle park or yield).",
		cvar.WithCategory("progress"), cvar.WithRange(0, int64(time.Second)))
	pauseTime = cvar.NewDuration("progress_pause", time.Millisecond,
		"How long a waiting goroutine keeps polling after the spin phase and before it parks (progress_idle park), with a PAUSE instruction between calls and, every 16 polls, its P given to other goroutines and its thread to other threads.",
		cvar.WithCategory("progress"), cvar.WithRange(0, int64(10*time.Second)))
	yieldEveryVar = cvar.NewInt("progress_yield_every", 16,
		"Polls of the yield phase between two yields of a waiting goroutine's P and thread (runtime.Gosched, then sched_yield). An engine whose host runs more ranks than it has CPUs (oversubscribed) yields at every poll unless this is set: the rank that would answer may be waiting for this CPU.",
		cvar.WithCategory("progress"), cvar.WithRange(1, 1<<20), cvar.WithUnit("polls"))
	parkMax = cvar.NewDuration("progress_park_max", 20*time.Millisecond,
		"Longest a parked goroutine sleeps before polling again even if nothing rang its doorbell: the bound on how late a transport that cannot ring (a NIC queue without interrupts) is noticed by an idle engine. Each wake-up costs CPU, so a longer bound keeps an idle engine cheaper and a shorter one notices such a transport sooner (docs/progress.md has the cost).",
		cvar.WithCategory("progress"), cvar.WithRange(int64(10*time.Microsecond), int64(time.Minute)))
	parkMargin = cvar.NewDuration("progress_park_margin", 200*time.Microsecond,
		"How long before the next timer's due time a parked goroutine wakes to spin, covering the kernel's timer slack and wake-up latency so that timers are not late.",
		cvar.WithCategory("progress"), cvar.WithRange(0, int64(time.Second)))
	granularity = cvar.NewDuration("wheel_granularity", time.Microsecond,
		"Tick of the timer wheel, rounded down to a power of two clock counts: timers fire within about one tick after their due time, and a finer tick costs more cascading work.",
		cvar.WithCategory("progress"), cvar.WithRange(1, int64(time.Second)))
	useMembarrier = cvar.NewBool("progress_membarrier", true,
		"Asymmetric wake-ups: a goroutine about to park issues membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED), a system call paid once a park (its cost: docs/progress.md), so that whoever publishes work for it needs no fence before checking for sleepers (on amd64 that fence waits for the publishing stores to reach the other core, and costs most of a small send). Off, or where the kernel lacks it, wakers fence. Read at start.",
		cvar.WithCategory("progress"), cvar.WithScope(cvar.ScopeReadonly))
	progressCPU = cvar.NewInt("progress_cpu", -1,
		"CPU to pin the dedicated progress goroutine's OS thread to when Start is not told one; -1 leaves it to the scheduler.",
		cvar.WithCategory("progress"), cvar.WithRange(-1, 1<<20))
)

var (
	// Kept per engine, owned by its pvar.Owner: one rank's progress
	// loop, read for the rank through a communicator (BindComm).
	pvPolls = pvar.NewCounter("progress_polls",
		"Iterations of the progress loop: calls to Progress that took the polling flag, each polling every registered poller once.",
		pvar.WithUnit("polls"), pvar.WithBind(pvar.BindComm))
	pvEmpty = pvar.NewCounter("progress_empty_polls",
		"Iterations of the progress loop (progress_polls) that found no event to handle.",
		pvar.WithUnit("polls"), pvar.WithBind(pvar.BindComm))
	pvWork = pvar.NewCounter("progress_events",
		"Events handled by pollers and timers across all calls to Progress.",
		pvar.WithUnit("events"), pvar.WithBind(pvar.BindComm))
	pvFired = pvar.NewCounter("progress_timers_fired",
		"Timers fired by the timer wheel.", pvar.WithUnit("timers"), pvar.WithBind(pvar.BindComm))
	pvTimers = pvar.NewLevel("progress_timers_pending",
		"Depth of the timer wheel: timers armed on it and not yet fired or cancelled.",
		pvar.WithUnit("timers"), pvar.WithBind(pvar.BindComm))
	pvPollTime = pvar.NewTimer("progress_poll_time",
		"Time spent in the progress loop's polls (progress_polls), estimated by sampling: every 256th poll is timed on the coarse clock, from the reading it takes anyway (for Coarse) to one more at its end, and counted 256 times, so the estimate costs one clock read per 256 polls.",
		pvar.WithUnit("clock counts"), pvar.WithBind(pvar.BindComm))
	pvWaitTime = pvar.NewTimer("progress_wait_time",
		"Time goroutines spent in waits on the engine (Wait, WaitAny, WaitAll, WaitUntil, their Context forms, a timer's Wait) that did not return at once: from the first poll that found nothing to the wait's last reading of the coarse clock, which its idle back-off takes every few empty polls and after each park (so a few polls short of the return). Waits that overlap each count their own time.",
		pvar.WithUnit("clock counts"), pvar.WithBind(pvar.BindComm))
	pvLate = pvar.NewTimer("progress_timer_lateness",
		"Time by which fired timers were late, summed: the time of the poll that fired each, less its due time (progress_timers_fired counts them). A timer never fires early.",
		pvar.WithUnit("clock counts"), pvar.WithBind(pvar.BindComm))
	pvLateHWM = pvar.NewHighWatermark("progress_timer_lateness_hwm",
		"Most nanoseconds one fired timer was late (progress_timer_lateness).",
		pvar.WithUnit("nanoseconds"), pvar.WithBind(pvar.BindComm))
	pvLateLWM = pvar.NewLowWatermark("progress_timer_lateness_lwm",
		"Fewest nanoseconds one fired timer was late (progress_timer_lateness); 9223372036854775807 before any fires.",
		pvar.WithUnit("nanoseconds"), pvar.WithBind(pvar.BindComm))
	// Process-wide: any goroutine waiting on an engine parks.
	pvParks = pvar.NewCounter("progress_parks",
		"Times a waiting goroutine parked: slept on a doorbell's futex (an engine's watcher) or in Go's scheduler (the other parked goroutines of an engine).", pvar.WithUnit("parks"))
	pvParkTime = pvar.NewTimer("progress_park_time",
		"Time waiting goroutines spent parked (progress_parks counts the parks): asleep on a doorbell's futex or in Go's scheduler, from the park to the return, wake-up included.",
		pvar.WithUnit("clock counts"))
)

// Poller is a source of work for the engine: a transport's receive queue, a
// NIC ring, a shared-memory inbox.
type Poller interface {
	// Poll handles whatever is ready without blocking and returns how many
	// events it handled (0 when there was nothing). The engine never calls
	// Poll from two goroutines at once.
	Poll() int
}

// Parker is implemented by a Poller whose pending work can wait on
// something that rings no doorbell by itself, such as room on a link to
// another process that the reader frees. A goroutine about to park on the
// engine's doorbell calls BeforePark first, before it announces itself as
// a sleeper, so that the poller can ask to be rung when that comes (as the
// rings' WantRoom does); the poll that follows the announcement closes the
// race with a ring that came in between. BeforePark may run while another
// goroutine polls.
type Parker interface {
	BeforePark()
}

// Deadliner is implemented by a Poller with work due at a time that no
// doorbell will announce: a retransmission, a delayed acknowledgement, a
// NIC queue that must be looked at within a bound. A goroutine about to
// park wakes by the earliest due time (less progress_park_margin), as it
// does for a timer on the wheel. NextDue returns that time in clock
// counts (Now), or ok false when nothing is due; it may run while another
// goroutine polls, so it reads what it needs atomically.
type Deadliner interface {
	NextDue() (due uint64, ok bool)
}

// ErrClosed reports use of an engine after Close.
var ErrClosed = errors.New("progress: engine closed")

// Engine drives pollers and timers. All its methods are safe for concurrent
// use; pollers and timer callbacks run on one goroutine at a time.
type Engine struct {
	_       [64]byte // the polling flag shares no line with the object before this one
	polling uint32   // 1 while a goroutine is inside Progress (the polling flag)
	_       [60]byte

	pollers   atomic.Pointer[[]Poller]
	serial    bool   // SetSerial: one goroutine at a time polls, so Progress takes no flag
	pollN     uint32 // polls so far (under the polling flag), to refresh coarse now and then
	pollStart uint64 // the coarse reading the last poll to take one began with (under the polling flag): progress_poll_time
	coarse    uint64 // a recent coarse clock reading (asm loads and relaxed stores): Coarse
	activeAt  uint64 // the active waiter's last mark (IdlePark; relaxed loads and stores): idler.alone
	wheel     *wheel.Wheel
	nextDue   uint64 // lower bound of the next timer's due count, ^0 when none (asm loads and stores)

	bell *Doorbell
	_    [64]byte // own shares no line with the fields above, which polls write
	own  Doorbell // padded after its words: wakers in this process read it

	strategy                     IdleStrategy
	spin, pause, parkMax, margin time.Duration
	idleSet, oversubscribed      bool   // WithIdle gave the phases; WithOversubscribed
	yieldEvery                   int    // polls of the yield phase between yields (progress_yield_every)
	spinC, parkC, marginC        uint64 // clock counts from idle to the yield phase and to parking; the margin
	lot                          lot    // the goroutines parked on the doorbell

	owner                                     *pvar.Owner
	polls, empty, work, fired, late, pollTime *pvar.CounterShard // written under the polling flag
	waitTime                                  *pvar.CounterShard // added to by the waiters: atomically (AddAtomic) unless serial
	pending                                   *pvar.LevelShard
	lateHWM                                   *pvar.WatermarkShard
	lateLWM                                   *pvar.LowWatermarkShard

	napping  atomic.Int32 // goroutines using the doorbell (a nap, a context's wake-up) from enterNap on: Close waits for none
	mu       sync.Mutex   // registration, Start/Stop, Close: never the message path
	running  atomic.Bool
	stopping atomic.Bool
	stopped  chan struct{}
	closed   atomic.Bool
}

// Option configures an Engine.
type Option func(*Engine) error

// WithDoorbell makes the engine park on d, which may live in shared memory so
// that other processes can wake it.
func WithDoorbell(d *Doorbell) Option {
	return func(e *Engine) error {
		if d == nil {
			return errors.New("progress: nil doorbell")
		}
		e.bell = d
		return nil
	}
}

// New returns an engine with no pollers and no timers, configured by the
// control variables and opts. It starts the clock if it is not running.
func New(opts ...Option) (*Engine, error) {
	if errs := cvar.Problems(); len(errs) > 0 {
		return nil, fmt.Errorf("progress: bad control variable settings: %w", errors.Join(errs...))
	}
	c := clockNow()
	e := &Engine{
		strategy: IdleStrategy(idleVar.Index()),
		spin:     spinTime.Get(),
		pause:    pauseTime.Get(),
		parkMax:  parkMax.Get(),
		margin:   parkMargin.Get(),
		nextDue:  ^uint64(0),
	}
	e.bell = &e.own
	e.pollers.Store(new([]Poller))
	e.wheel = wheel.New(tickShift(granularity.Get(), c.countsPerSec), c.read())
	for _, o := range opts {
		if err := o(e); err != nil {
			return nil, err
		}
	}
	if e.oversubscribed && !e.idleSet && spinTime.Source() == cvar.FromDefault {
		e.spin = 0 // the peer that would answer may be waiting for this CPU
	}
	e.yieldEvery = int(yieldEveryVar.Get())
	if e.oversubscribed && yieldEveryVar.Source() == cvar.FromDefault {
		e.yieldEvery = 1 // and it needs the CPU every time this rank finds nothing
	}
	e.setIdle(c)
	e.marginC = durationToCounts(e.margin, c)
	o := pvar.NewOwner()
	e.owner = o
	e.polls, e.empty, e.work, e.fired = pvPolls.ShardOf(o), pvEmpty.ShardOf(o), pvWork.ShardOf(o), pvFired.ShardOf(o)
	e.late, e.lateHWM, e.lateLWM = pvLate.ShardOf(o), pvLateHWM.ShardOf(o), pvLateLWM.ShardOf(o)
	e.pending = pvTimers.ShardOf(o)
	e.pollTime, e.waitTime = pvPollTime.ShardOf(o), pvWaitTime.ShardOf(o)
	return e, nil
}

// PvarOwner returns the owner of the engine's performance variable shards:
// the rank it drives, whose endpoint shares it (engine.Endpoint's
// PvarOwner).
func (e *Engine) PvarOwner() *pvar.Owner { return e.owner }

// tickShift returns the largest shift whose 2^shift clock counts do not
// exceed the granularity g.
func tickShift(g time.Duration, countsPerSec float64) uint {
	counts := g.Seconds() * countsPerSec
	shift := uint(0)
	for shift < 40 && float64(uint64(2)<<shift) <= counts {
		shift++
	}
	return shift
}

// Doorbell returns the doorbell the engine parks on. Ring it after giving
// the engine work from outside Progress.
func (e *Engine) Doorbell() *Doorbell { return e.bell }

// Register adds p to the pollers Progress calls, and returns a function that
// removes it again. Registration is safe while other goroutines call
// Progress: a poll already under way may still call a poller just removed.
func (e *Engine) Register(p Poller) (unregister func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	old := *e.pollers.Load()
	next := make([]Poller, len(old), len(old)+1)
	copy(next, old)
	next = append(next, p)
	e.pollers.Store(&next)
	e.bell.Ring()
	var once sync.Once
	return func() { once.Do(func() { e.unregister(p) }) }
}

func (e *Engine) unregister(p Poller) {
	e.mu.Lock()
	defer e.mu.Unlock()
	old := *e.pollers.Load()
	next := make([]Poller, 0, len(old))
	removed := false
	for _, q := range old {
		if !removed && q == p {
			removed = true
			continue
		}
		next = append(next, q)
	}
	e.pollers.Store(&next)
}

// Progress polls every registered poller once and fires the timers that are
// due, and returns how many events that handled. If another goroutine is
// inside Progress, it returns 0 at once (a serial engine, SetSerial, does
// not look).
func (e *Engine) Progress() int {
	if e.serial {
		return e.poll()
	}
	if !atomic.CompareAndSwapUint32(&e.polling, 0, 1) {
		return 0
	}
	n := e.poll()
	asm.StoreRelease32(&e.polling, 0)
	return n
}

// SetSerial tells the engine whether its callers promise that no two
// goroutines ever call Progress, Wait or the timer routines at once and
// that no progress goroutine runs (MPI_THREAD_SINGLE, FUNNELED or
// SERIALIZED). Progress then takes no polling flag: no locked instruction
// on a waiter's every poll, whose loop, shorter, finds an arriving message
// sooner. Breaking the promise is a data race. It returns an error if a
// progress goroutine runs, and Start refuses to run one while the engine
// is serial. Call it before any other use of the engine, or while no
// other goroutine uses it.
func (e *Engine) SetSerial(on bool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if on && e.running.Load() {
		return errors.New("progress: a progress goroutine runs, so the engine cannot be serial")
	}
	e.serial = on
	return nil
}

// Coarse returns a recent reading of the coarse clock (NowCoarse): one
// taken by this engine at least every coarseEvery polls, and by a
// goroutine waiting on it at each of its idle polls and after each nap
// or yield of the CPU.
// A poller that needs the time only now and then, to the millisecond (a
// periodic health check), reads it here instead of paying for a clock
// read at every empty poll (its cost: docs/progress.md).
func (e *Engine) Coarse() uint64 {
	if t := asm.LoadAcquire64(&e.coarse); t != 0 {
		return t
	}
	return e.refreshCoarse()
}

// coarseEvery is how many polls may pass between two of the engine's own
// readings of the clock for Coarse.
const coarseEvery = 16

// pollTimeEvery is how many polls one timed poll stands for in
// progress_poll_time: a multiple of coarseEvery, so that a timed poll
// starts from the reading it takes for Coarse. Timing every poll that
// takes one, one in 16, made an empty Progress a fifth slower (one
// more clock read per 16 polls, docs/progress.md); one in 256 costs
// nothing measurable.
const pollTimeEvery = 16 * coarseEvery

// refreshCoarse reads the coarse clock into Coarse's reading and returns
// it.
func (e *Engine) refreshCoarse() uint64 {
	t := theClock.Load().readCoarse()
	asm.StoreRelaxed64(&e.coarse, t)
	return t
}

// poll is Progress's body; the caller holds the polling flag, or the
// engine is serial.
func (e *Engine) poll() int {
	if e.pollN++; e.pollN%coarseEvery == 0 {
		e.pollStart = e.refreshCoarse()
	}
	n := 0
	for _, p := range *e.pollers.Load() {
		n += p.Poll()
	}
	if due := asm.LoadAcquire64(&e.nextDue); due != ^uint64(0) {
		if now := theClock.Load().read(); now >= due {
			n += e.fire(now)
		}
	}
	e.polls.Inc()
	if n > 0 {
		e.work.Add(uint64(n))
	} else {
		e.empty.Inc()
	}
	if e.pollN%pollTimeEvery == 0 {
		e.timed(e.pollStart)
	}
	return n
}

// timed counts the poll that began at the coarse reading start as
// pollTimeEvery polls of its length in progress_poll_time, a sample of
// every pollTimeEvery polls; the caller holds the polling flag. A reading
// earlier than start (the goroutine moved to a CPU whose counter lags)
// counts nothing.
func (e *Engine) timed(start uint64) {
	if d := theClock.Load().readCoarse() - start; int64(d) > 0 {
		e.pollTime.Add(d * pollTimeEvery)
	}
}

// fire advances the wheel to now; the caller holds the polling flag.
func (e *Engine) fire(now uint64) int {
	n := e.wheel.Advance(now)
	e.fired.Add(uint64(n))
	if sum, most, least := e.wheel.TakeLate(); n > 0 {
		ns := theClock.Load().secPerCount * 1e9
		e.late.Add(sum)
		e.lateHWM.Observe(int64(float64(most) * ns))
		e.lateLWM.Observe(int64(float64(least) * ns))
	}
	e.timersChanged()
	return n
}

// timersChanged refreshes the cached timer state; the caller holds the
// polling flag.
func (e *Engine) timersChanged() {
	e.pending.Set(int64(e.wheel.Len()))
	due, ok := e.wheel.NextDue()
	if !ok {
		due = ^uint64(0)
	}
	asm.StoreRelease64(&e.nextDue, due)
}

// lock takes the polling flag, waiting for a goroutine inside Progress to
// leave. It is for operations off the message path (arming timers).
func (e *Engine) lock() {
	for i := 0; !atomic.CompareAndSwapUint32(&e.polling, 0, 1); i++ {
		if i < 64 {
			asm.Pause()
		} else {
			runtime.Gosched()
		}
	}
}

func (e *Engine) unlock() { asm.StoreRelease32(&e.polling, 0) }

// Complete marks c complete and wakes any goroutine parked waiting for it.
// Pollers and timer callbacks call it when an operation finishes.
func (e *Engine) Complete(c *Completion) {
	c.MarkDone()
	e.bell.Ring()
}

// Running reports whether a dedicated progress goroutine runs (Start).
func (e *Engine) Running() bool { return e.running.Load() }

// Start runs a dedicated progress goroutine on its own OS thread, for
// programs that do not want to call Progress themselves. cpu pins that
// thread to one CPU; -1 uses the control variable progress_cpu (itself -1
// by default: no pinning). While it runs, waiting goroutines leave polling
// to it and only watch their requests.
func (e *Engine) Start(cpu int) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed.Load() {
		return ErrClosed
	}
	if e.running.Load() {
		return errors.New("progress: progress goroutine already running")
	}
	if e.serial {
		return errors.New("progress: the engine is serial (SetSerial): no progress goroutine may poll it")
	}
	if cpu < 0 {
		cpu = int(progressCPU.Get())
	}
	started := make(chan error, 1)
	e.stopping.Store(false)
	e.stopped = make(chan struct{})
	go e.loop(cpu, started)
	if err := <-started; err != nil {
		<-e.stopped
		return err
	}
	e.running.Store(true)
	return nil
}

// Stop ends the dedicated progress goroutine and waits until it has left
// Progress. It does nothing if none is running.
func (e *Engine) Stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.running.Load() {
		return
	}
	e.stopping.Store(true)
	e.bell.Ring()
	<-e.stopped
	e.running.Store(false)
	e.resignDedicated()
}

func (e *Engine) loop(cpu int, started chan<- error) {
	defer close(e.stopped)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if cpu >= 0 {
		if err := pinThread(cpu); err != nil {
			started <- fmt.Errorf("progress: pinning the progress goroutine to CPU %d: %w", cpu, err)
			return
		}
	}
	started <- nil
	w := e.newDedicatedIdler()
	var seen uint32 // the doorbell's sequence when the followers were last checked
	for !e.stopping.Load() {
		if w.watch != nil {
			e.watchAway(&seen)
		}
		if e.Progress() > 0 {
			w.reset()
			continue
		}
		if w.idle() {
			w.park(stopCondition{})
		}
	}
}

type stopCondition struct{}

func (stopCondition) ready(e *Engine) bool { return e.stopping.Load() || e.Progress() > 0 }

// Close stops the progress goroutine, removes every poller, completes every
// pending timer request as cancelled, and releases the engine's performance
// variable shards. Using the engine afterwards returns ErrClosed. Goroutines
// still waiting on it keep polling, but no longer park: once Close has
// returned, nothing touches its doorbell, whose memory the caller may
// release.
func (e *Engine) Close() error {
	e.Stop()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed.Swap(true) {
		return ErrClosed
	}
	// Goroutines parked on the doorbell leave it before Close returns,
	// and none parks afterwards (enterNap): a doorbell in shared memory
	// may be unmapped once the engine is closed.
	for e.napping.Load() > 0 {
		e.bell.Ring()
		time.Sleep(10 * time.Microsecond)
	}
	e.lock()
	e.pollers.Store(new([]Poller))
	// Fire every pending timer: expire sees the engine closed and marks
	// its request cancelled, so that nothing waits forever on a timer that
	// can no longer fire.
	e.wheel.Advance(^uint64(0))
	e.wheel.TakeLate() // fired by Close, not by their time
	asm.StoreRelease64(&e.nextDue, ^uint64(0))
	e.pending.Set(0)
	e.unlock()
	for _, s := range []*pvar.CounterShard{e.polls, e.empty, e.work, e.fired, e.late, e.pollTime, e.waitTime} {
		s.Close()
	}
	e.pending.Close()
	e.lateHWM.Close()
	e.lateLWM.Close()
	return nil
}

// enterNap counts a goroutine about to park on the doorbell (or to wake
// its sleepers from outside the engine's own paths), unless the engine is
// closed: Close waits until the count is zero, and sets closed before it
// looks, so a goroutine either sees closed here or is waited for.
func (e *Engine) enterNap() bool {
	e.napping.Add(1)
	if e.closed.Load() {
		e.napping.Add(-1)
		return false
	}
	return true
}

// durationToCounts converts d to counts of clock c, rounding up.
func durationToCounts(d time.Duration, c *clock) uint64 {
	if d <= 0 {
		return 0
	}
	return uint64(math.Ceil(d.Seconds() * c.countsPerSec))
}
