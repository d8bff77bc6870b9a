package progress

import (
	"errors"
	"github.com/tachyon-hpc/tachyon/pvar"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/tachyon-hpc/tachyon/asm"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
)

// countPoller counts its calls and fails the test if two overlap.
type countPoller struct {
	t      *testing.T
	calls  atomic.Int64
	inside atomic.Bool
	work   int
}

func (p *countPoller) Poll() int {
	if p.inside.Swap(true) {
		p.t.Error("Poll called from two goroutines at once")
	}
	p.calls.Add(1)
	p.inside.Store(false)
	return p.work
}

func newEngine(t testing.TB, opts ...Option) *Engine {
	t.Helper()
	e, err := New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func TestProgressPollsEachOnce(t *testing.T) {
	e := newEngine(t)
	a, b := &countPoller{t: t, work: 1}, &countPoller{t: t, work: 2}
	unA := e.Register(a)
	e.Register(b)
	if n := e.Progress(); n != 3 {
		t.Fatalf("Progress = %d, want 3", n)
	}
	unA()
	unA() // twice: harmless
	if n := e.Progress(); n != 2 || a.calls.Load() != 1 || b.calls.Load() != 2 {
		t.Fatalf("after unregister: Progress = %d, calls %d %d", n, a.calls.Load(), b.calls.Load())
	}
}

func TestProgressConcurrent(t *testing.T) {
	e := newEngine(t)
	p := &countPoller{t: t}
	e.Register(p)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20000 {
				e.Progress()
			}
		}()
	}
	// Timers armed and fired meanwhile exercise the flag from both sides.
	for range 200 {
		r, err := e.NewTimer(1e-5)
		if err != nil {
			t.Fatal(err)
		}
		r.Wait()
	}
	wg.Wait()
	if p.calls.Load() == 0 {
		t.Fatal("poller never called")
	}
}

func TestProgressAllocs(t *testing.T) {
	e := newEngine(t)
	e.Register(&countPoller{t: t})
	for range 100 { // timers pending far out, and some firing
		if _, err := e.NewTimer(100); err != nil {
			t.Fatal(err)
		}
	}
	if n := testing.AllocsPerRun(10000, func() { e.Progress() }); n != 0 {
		t.Fatalf("Progress allocates %v times per call", n)
	}
	var c Completion
	e.Complete(&c)
	if n := testing.AllocsPerRun(1000, func() { e.Wait(&c); e.Test(&c); c.Rearm(); e.Complete(&c) }); n != 0 {
		t.Fatalf("Wait/Test/Complete allocate %v times", n)
	}
}

// lazyPoller completes c on every n-th poll and finds nothing otherwise,
// so that a Wait on c goes through its idle back-off.
type lazyPoller struct {
	e     *Engine
	c     *Completion
	n, at int
}

func (p *lazyPoller) Poll() int {
	if p.at++; p.at%p.n == 0 {
		p.e.Complete(p.c)
	}
	return 0
}

// TestWaitParkAllocs: a Wait and a WaitUntil that park until another
// goroutine completes their request allocate nothing once the engine has
// a sleeper to reuse: their conditions are one pointer each, which the
// sleeper holds without a copy on the heap.
func TestWaitParkAllocs(t *testing.T) {
	if raceEnabled {
		testskip.Skip(t, testskip.RaceDetector, "the race detector allocates")
	}
	e := newEngine(t, WithIdle(0, 0, time.Second))
	var c Completion
	kick, stop := make(chan struct{}), make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-kick:
			case <-stop:
				return
			}
			time.Sleep(200 * time.Microsecond) // long enough that the waiter parks
			e.Complete(&c)
		}
	}()
	ready := func() bool { return c.Done() }
	for name, wait := range map[string]func(){"Wait": func() { e.Wait(&c) }, "WaitUntil": func() { e.WaitUntil(ready) }} {
		run := func() {
			c.Rearm()
			kick <- struct{}{}
			wait()
		}
		run() // the engine's first sleeper
		parks := pvParks.Value()
		if n := testing.AllocsPerRun(50, run); n != 0 {
			t.Errorf("%s: %v allocations a parked wait", name, n)
		}
		if pvParks.Value() == parks {
			t.Errorf("%s: never parked", name)
		}
	}
}

// TestWaitIdleAllocs: waiting through many empty polls, in the spin and
// pause phases, allocates nothing (the condition a parked waiter rechecks
// once cost an allocation per empty poll).
func TestWaitIdleAllocs(t *testing.T) {
	for _, idle := range []struct{ spin, pause time.Duration }{{time.Hour, time.Hour}, {0, time.Hour}} {
		e := newEngine(t, WithIdle(idle.spin, idle.pause, time.Minute))
		var c Completion
		e.Register(&lazyPoller{e: e, c: &c, n: 200})
		cs := []*Completion{&c}
		if n := testing.AllocsPerRun(100, func() {
			c.Rearm()
			e.Wait(&c)
			c.Rearm()
			e.WaitAny(cs)
		}); n != 0 {
			t.Errorf("spin %v: Wait and WaitAny through 200 empty polls allocate %v times", idle.spin, n)
		}
	}
}

// TestDoorbellWakesParked parks a waiter with a long nap and checks that
// completing its request wakes it at once rather than at the nap's end.
func TestDoorbellWakesParked(t *testing.T) {
	e := newEngine(t, WithIdle(0, 0, time.Minute))
	var c Completion
	done := make(chan time.Time)
	go func() {
		e.Wait(&c)
		done <- time.Now()
	}()
	time.Sleep(50 * time.Millisecond) // long enough to park
	start := time.Now()
	e.Complete(&c)
	select {
	case woke := <-done:
		t.Logf("woken %v after the ring", woke.Sub(start))
	case <-time.After(5 * time.Second):
		t.Fatal("parked waiter not woken by the doorbell")
	}
	if parks := pvParks.Value(); parks == 0 {
		t.Error("progress_parks is 0: the waiter never parked")
	}
	if pt := CountsToSeconds(pvParkTime.Value()); pt <= 0 || pt > time.Since(start).Seconds()+60 {
		t.Errorf("progress_park_time is %v s after a park", pt)
	}
	if pvParkTime.Class() != pvar.ClassTimer {
		t.Errorf("progress_park_time is a %v, want a timer", pvParkTime.Class())
	}
}

// roomPoller's work waits on room that another goroutine frees without
// ringing the doorbell, unless a BeforePark asked it to.
type roomPoller struct {
	room, asked, done atomic.Bool
	before            atomic.Int64
}

func (p *roomPoller) Poll() int {
	if p.room.Load() && !p.done.Load() {
		p.done.Store(true)
		return 1
	}
	return 0
}

func (p *roomPoller) BeforePark() {
	p.before.Add(1)
	p.asked.Store(true)
}

// TestParkerBeforePark: a goroutine about to park calls the pollers'
// BeforePark, which here asks for the ring that wakes it: without the
// call the waiter would sleep its whole minute.
func TestParkerBeforePark(t *testing.T) {
	e := newEngine(t, WithIdle(0, 0, time.Minute))
	p := &roomPoller{}
	defer e.Register(p)()
	parks := pvParks.Value()
	done := make(chan struct{})
	go func() {
		e.WaitUntil(p.done.Load)
		close(done)
	}()
	time.Sleep(50 * time.Millisecond) // long enough to park
	p.room.Store(true)
	WakeFence()
	if p.asked.Load() {
		e.Doorbell().RingFenced()
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the parked waiter was not woken: BeforePark not called before the nap")
	}
	if p.before.Load() == 0 || pvParks.Value() == parks {
		t.Fatalf("BeforePark calls %d, parks %d: the waiter never parked", p.before.Load(), pvParks.Value()-parks)
	}
}

// duePoller has work that comes due at a clock count without a ring.
type duePoller struct{ due atomic.Uint64 }

func (p *duePoller) Poll() int {
	if d := p.due.Load(); d != 0 && Now() >= d {
		p.due.Store(0)
		return 1
	}
	return 0
}

func (p *duePoller) NextDue() (uint64, bool) {
	d := p.due.Load()
	return d, d != 0
}

// TestDeadlinerWakes: a parked waiter wakes by a poller's deadline: with
// a minute's park and no ring, work due in 20 ms is found in time.
func TestDeadlinerWakes(t *testing.T) {
	e := newEngine(t, WithIdle(0, 0, time.Minute))
	p := &duePoller{}
	defer e.Register(p)()
	start := time.Now()
	p.due.Store(Now() + SecondsToCounts(0.02))
	e.WaitUntil(func() bool { return p.due.Load() == 0 })
	if el := time.Since(start); el < 20*time.Millisecond || el > 5*time.Second {
		t.Fatalf("woke after %v, want 20 ms", el)
	}
}

// TestWaitUntil: WaitUntil returns once its condition holds, whether a
// poll makes it true (the poller does) or another goroutine does and
// rings the doorbell while the waiter is parked.
func TestWaitUntil(t *testing.T) {
	t.Run("poll", func(t *testing.T) {
		e := newEngine(t, WithIdle(time.Hour, time.Hour, time.Minute))
		var c Completion
		e.Register(&lazyPoller{e: e, c: &c, n: 50})
		calls := 0
		e.WaitUntil(func() bool { calls++; return c.Done() })
		if !c.Done() || calls < 2 {
			t.Fatalf("returned with done %v after %d checks", c.Done(), calls)
		}
	})
	t.Run("parked", func(t *testing.T) {
		e := newEngine(t, WithIdle(0, 0, time.Minute))
		before := pvParks.Value()
		var flag atomic.Bool
		done := make(chan time.Time)
		go func() {
			e.WaitUntil(flag.Load)
			done <- time.Now()
		}()
		time.Sleep(50 * time.Millisecond) // long enough to park
		start := time.Now()
		flag.Store(true)
		e.Doorbell().Ring()
		select {
		case woke := <-done:
			t.Logf("woken %v after the ring", woke.Sub(start))
		case <-time.After(5 * time.Second):
			t.Fatal("parked WaitUntil not woken by the doorbell")
		}
		if pvParks.Value() == before {
			t.Error("the waiter never parked: the test did not test waking")
		}
	})
}

func TestDoorbellAt(t *testing.T) {
	buf := make([]uint64, DoorbellSize/8+1)
	b := unsafeBytes(buf)
	if _, err := DoorbellAt(b[:DoorbellSize-1]); !errors.Is(err, ErrDoorbellPlacement) {
		t.Errorf("short: %v", err)
	}
	if _, err := DoorbellAt(b[1 : DoorbellSize+1]); !errors.Is(err, ErrDoorbellPlacement) {
		t.Errorf("misaligned: %v", err)
	}
	d, err := DoorbellAt(b[:DoorbellSize])
	if err != nil {
		t.Fatal(err)
	}
	d.Ring() // a zeroed doorbell is quiet; ringing it is harmless
	e := newEngine(t, WithDoorbell(d), WithIdle(0, 0, time.Minute))
	if e.Doorbell() != d {
		t.Fatal("engine does not use the given doorbell")
	}
	if _, err := New(WithDoorbell(nil)); err == nil {
		t.Error("New(WithDoorbell(nil)) succeeded")
	}
	if _, err := New(WithIdle(-1, 0, time.Second)); err == nil {
		t.Error("New(WithIdle(-1, ...)) succeeded")
	}
}

// TestDoorbellQuiet: Quiet is true exactly when RingFenced would do
// nothing: no sleeper, and no fence demanded of a waker that skips its
// own (asymmetric). Each part of the word it reads is checked alone.
func TestDoorbellQuiet(t *testing.T) {
	var d Doorbell
	if !d.Quiet() {
		t.Fatal("a zeroed doorbell is not quiet")
	}
	for _, sleepers := range []uint32{1, 2, 1 << 31} {
		d.sleepers = sleepers
		if d.Quiet() {
			t.Errorf("quiet with %d sleepers", sleepers)
		}
	}
	d.sleepers = 0
	d.flags = flagFence
	if d.Quiet() != !asymmetric {
		t.Errorf("with a fence demanded, Quiet = %v where this process's fence is skipped: %v", d.Quiet(), asymmetric)
	}
	d.flags = ^uint32(flagFence)
	if !d.Quiet() {
		t.Error("flags other than flagFence make it loud")
	}
	d.flags, d.seq = 0, ^uint32(0)
	if !d.Quiet() {
		t.Error("the futex sequence makes it loud")
	}
	if uintptr(unsafe.Pointer(&d.sleepers))%8 != 0 || unsafe.Offsetof(d.flags) != unsafe.Offsetof(d.sleepers)+4 {
		t.Error("sleepers and flags are not one aligned 64-bit word")
	}
}

func TestDedicatedGoroutine(t *testing.T) {
	e := newEngine(t)
	cpu := 0
	if runtime.GOOS != "linux" {
		cpu = -1
	}
	if err := e.Start(cpu); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(-1); err == nil {
		t.Error("second Start succeeded")
	}
	p := &countPoller{t: t}
	e.Register(p)
	r, err := e.NewTimer(2e-3)
	if err != nil {
		t.Fatal(err)
	}
	// Nobody but the dedicated goroutine polls: Done alone must turn true.
	deadline := time.Now().Add(5 * time.Second)
	for !r.Done() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Microsecond)
	}
	if !r.Done() {
		t.Fatal("timer did not fire with only the progress goroutine polling")
	}
	if p.calls.Load() == 0 {
		t.Error("progress goroutine never polled the registered poller")
	}
	e.Stop()
	e.Stop() // twice: harmless
	if err := e.Start(-1); err != nil {
		t.Fatalf("restart: %v", err)
	}
	e.Close()
	if err := e.Start(-1); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Close = %v, want ErrClosed", err)
	}
}

func TestStartBadCPU(t *testing.T) {
	if runtime.GOOS != "linux" {
		testskip.Skip(t, testskip.NotLinux, "pinning is Linux only")
	}
	e := newEngine(t)
	if err := e.Start(1 << 16); err == nil {
		e.Stop()
		t.Fatal("Start on a CPU that does not exist succeeded")
	}
	if err := e.Start(-1); err != nil {
		t.Fatalf("Start after a failed Start: %v", err)
	}
}

// idleCPU measures the share of one core the process uses over one second
// while the engine is idle. Anything else the process or the host does
// only adds to it, so it keeps the lowest of up to three seconds, stopping
// at the first under 2%.
func idleCPU(t *testing.T) float64 {
	best := 1.0
	for range 3 {
		runtime.GC()
		time.Sleep(100 * time.Millisecond) // past spin and pause: parked
		c0, w0 := cpuTime(t), time.Now()
		time.Sleep(time.Second)
		c1, w1 := cpuTime(t), time.Now()
		best = min(best, (c1-c0).Seconds()/w1.Sub(w0).Seconds())
		if best < 0.02 {
			break
		}
	}
	return best
}

func TestIdleCPUDedicated(t *testing.T) {
	if testing.Short() {
		testskip.Skip(t, testskip.Short, "takes over a second")
	}
	e := newEngine(t)
	e.Register(&countPoller{t: t})
	if err := e.Start(-1); err != nil {
		t.Fatal(err)
	}
	share := idleCPU(t)
	t.Logf("idle engine with a progress goroutine: %.2f%% of a core", share*100)
	if share >= 0.02 {
		t.Errorf("idle engine uses %.2f%% of a core, want under 2%%", share*100)
	}
}

func TestIdleCPUWaiter(t *testing.T) {
	if testing.Short() {
		testskip.Skip(t, testskip.Short, "takes over a second")
	}
	e := newEngine(t)
	e.Register(&countPoller{t: t})
	r, err := e.NewTimer(4.5)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { r.Wait(); close(done) }()
	share := idleCPU(t)
	t.Logf("goroutine waiting on a 4.5 s timer: %.2f%% of a core", share*100)
	if share >= 0.02 {
		t.Errorf("waiting on a timer uses %.2f%% of a core, want under 2%%", share*100)
	}
	if err := r.Cancel(); err != nil {
		t.Fatal(err)
	}
	<-done
}

// TestPollingFlagOwnLine checks that the polling flag, which every poll
// of the engine writes, has a cache line to itself: engines of goroutine
// ranks lie side by side in memory.
func TestPollingFlagOwnLine(t *testing.T) {
	var e Engine
	at := unsafe.Offsetof(e.polling)
	if at < 64 || unsafe.Offsetof(e.pollers)-at < 64 {
		t.Errorf("polling flag at %d, next field at %d: want a line of padding before and after", at, unsafe.Offsetof(e.pollers))
	}
}

// TestDoorbellOwnLine checks that the engine's own doorbell, which a
// goroutine rank reads at every wake-up it owes its peer, shares no line
// with the fields the peer's polls write (pollN, coarse, nextDue): with
// them on its line, an 8-byte ping-pong between goroutine ranks took
// 0.52-0.54 us one way instead of 0.38-0.40 (bench -transport inproc).
func TestDoorbellOwnLine(t *testing.T) {
	var e Engine
	words := unsafe.Offsetof(e.own.flags) + unsafe.Sizeof(e.own.flags) // seq, sleepers, flags
	before := unsafe.Offsetof(e.own) - (unsafe.Offsetof(e.bell) + unsafe.Sizeof(e.bell))
	after := unsafe.Offsetof(e.strategy) - (unsafe.Offsetof(e.own) + words)
	if before < 64-words || after < 64-words {
		t.Errorf("doorbell at %d: %d bytes before its words and %d after: want %d either side, so that no other field shares their line",
			unsafe.Offsetof(e.own), before, after, 64-words)
	}
}

// TestSerial: a serial engine polls without its flag, and a progress
// goroutine and serial mode exclude each other.
func TestSerial(t *testing.T) {
	e := newEngine(t)
	p := &countPoller{t: t, work: 1}
	e.Register(p)
	if err := e.SetSerial(true); err != nil {
		t.Fatal(err)
	}
	if n := e.Progress(); n != 1 || p.calls.Load() != 1 {
		t.Fatalf("serial Progress = %d, %d calls", n, p.calls.Load())
	}
	if asm.LoadAcquire32(&e.polling) != 0 {
		t.Error("a serial Progress left the polling flag taken")
	}
	if err := e.Start(-1); err == nil {
		e.Stop()
		t.Fatal("Start ran a progress goroutine on a serial engine")
	}
	if err := e.SetSerial(false); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(-1); err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	if err := e.SetSerial(true); err == nil {
		t.Fatal("SetSerial(true) succeeded while a progress goroutine runs")
	}
}

// TestCoarse: the engine's coarse reading follows the clock through
// polls alone (no waiter reading the clock for it) and through a wait.
func TestCoarse(t *testing.T) {
	e := newEngine(t)
	t0 := e.Coarse()
	time.Sleep(2 * time.Millisecond)
	for range coarseEvery {
		e.Progress()
	}
	t1 := e.Coarse()
	if t1 <= t0 || SecondsToCounts(0.002) > t1-t0 {
		t.Fatalf("after 2 ms and %d polls the coarse reading moved %d counts, want at least %d", coarseEvery, t1-t0, SecondsToCounts(0.002))
	}
	// A waiter that parks refreshes it when its nap ends, so the polls
	// after a long nap see the time it lasted.
	p := newEngine(t, WithIdle(0, 0, time.Minute))
	t1 = p.Coarse()
	var c Completion
	go func() {
		time.Sleep(5 * time.Millisecond)
		p.Complete(&c)
	}()
	p.Wait(&c)
	if t2 := p.Coarse(); t2-t1 < SecondsToCounts(0.005) {
		t.Fatalf("after a 5 ms nap the coarse reading moved %d counts, want at least %d", t2-t1, SecondsToCounts(0.005))
	}
}

// TestMarkDoneLocal: a completion marked with a plain store is done for
// Done, Test and Wait on the marking goroutine, and Rearm makes it
// pending again.
func TestMarkDoneLocal(t *testing.T) {
	e := newEngine(t)
	var c Completion
	if c.Done() {
		t.Fatal("a new completion is done")
	}
	c.MarkDoneLocal()
	if !c.Done() || !e.Test(&c) {
		t.Fatal("MarkDoneLocal did not complete it")
	}
	e.Wait(&c) // returns at once
	c.Rearm()
	if c.Done() {
		t.Fatal("Rearm left it done")
	}
}
