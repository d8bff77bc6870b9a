package progress

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestWaitContextCompletes: the Context forms return nil once what they
// wait for happens, with a context that never ends (Background, the plain
// form's path) and with one that could.
func TestWaitContextCompletes(t *testing.T) {
	cancellable, cancel := context.WithCancel(context.Background())
	defer cancel()
	for name, ctx := range map[string]context.Context{"background": context.Background(), "cancellable": cancellable} {
		t.Run(name, func(t *testing.T) {
			e := newEngine(t, WithIdle(time.Hour, time.Hour, time.Minute))
			var c Completion
			e.Register(&lazyPoller{e: e, c: &c, n: 50})
			if err := e.WaitContext(ctx, &c); err != nil || !c.Done() {
				t.Fatalf("WaitContext = %v, done %v", err, c.Done())
			}
			c.Rearm()
			if i, err := e.WaitAnyContext(ctx, []*Completion{nil, &c}); i != 1 || err != nil {
				t.Fatalf("WaitAnyContext = %d, %v", i, err)
			}
			c.Rearm()
			if err := e.WaitAllContext(ctx, []*Completion{&c, nil}); err != nil || !c.Done() {
				t.Fatalf("WaitAllContext = %v, done %v", err, c.Done())
			}
			c.Rearm()
			if err := e.WaitUntilContext(ctx, c.Done); err != nil || !c.Done() {
				t.Fatalf("WaitUntilContext = %v, done %v", err, c.Done())
			}
			if i, err := e.WaitAnyContext(ctx, []*Completion{nil}); i != -1 || err != nil {
				t.Fatalf("WaitAnyContext of nil entries = %d, %v", i, err)
			}
		})
	}
}

// TestWaitContextEnded: with a context that has already ended, a
// completion that is not done returns the context's error at the first
// look,
// and one that is done returns nil.
func TestWaitContextEnded(t *testing.T) {
	e := newEngine(t, WithIdle(time.Hour, time.Hour, time.Minute))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var c Completion
	if err := e.WaitContext(ctx, &c); !errors.Is(err, context.Canceled) || c.Done() {
		t.Fatalf("WaitContext on a cancelled context = %v, done %v", err, c.Done())
	}
	if i, err := e.WaitAnyContext(ctx, []*Completion{&c}); i != -1 || !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitAnyContext = %d, %v", i, err)
	}
	if err := e.WaitAllContext(ctx, []*Completion{&c}); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitAllContext = %v", err)
	}
	if err := e.WaitUntilContext(ctx, c.Done); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitUntilContext = %v", err)
	}
	c.MarkDone()
	if err := e.WaitContext(ctx, &c); err != nil {
		t.Fatalf("WaitContext of a done completion = %v, want nil: the completion wins", err)
	}
	if i, err := e.WaitAnyContext(ctx, []*Completion{nil, &c}); i != 1 || err != nil {
		t.Fatalf("WaitAnyContext of a done completion = %d, %v", i, err)
	}
}

// parkedWaits are the Context forms, each waiting on something that
// never happens.
var parkedWaits = map[string]func(e *Engine, ctx context.Context) error{
	"Wait": func(e *Engine, ctx context.Context) error { return e.WaitContext(ctx, new(Completion)) },
	"WaitAny": func(e *Engine, ctx context.Context) error {
		_, err := e.WaitAnyContext(ctx, []*Completion{new(Completion), nil})
		return err
	},
	"WaitUntil": func(e *Engine, ctx context.Context) error {
		return e.WaitUntilContext(ctx, func() bool { return false })
	},
}

// TestWaitContextCancelWakesParked: a waiter parked for a nap of up to a
// minute wakes soon after its context is cancelled (the AfterFunc rings
// it), and returns context.Canceled.
func TestWaitContextCancelWakesParked(t *testing.T) {
	for name, wait := range parkedWaits {
		t.Run(name, func(t *testing.T) {
			e := newEngine(t, WithIdle(0, 0, time.Minute))
			ctx, cancel := context.WithCancel(context.Background())
			parks := pvParks.Value()
			got := make(chan error, 1)
			go func() { got <- wait(e, ctx) }()
			time.Sleep(50 * time.Millisecond) // long enough to park
			start := time.Now()
			cancel()
			select {
			case err := <-got:
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("err = %v, want context.Canceled", err)
				}
				t.Logf("woken %v after the cancel", time.Since(start))
			case <-time.After(5 * time.Second):
				t.Fatal("parked waiter not woken by its context's cancel")
			}
			if pvParks.Value() == parks {
				t.Error("the waiter never parked: the test did not test waking")
			}
		})
	}
}

// TestWaitContextDeadlineWakesParked: a waiter parked for a nap of up to a
// minute wakes by its context's deadline and returns
// context.DeadlineExceeded, no earlier than the deadline.
func TestWaitContextDeadlineWakesParked(t *testing.T) {
	for name, wait := range parkedWaits {
		t.Run(name, func(t *testing.T) {
			e := newEngine(t, WithIdle(0, 0, time.Minute))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
			defer cancel()
			d, _ := ctx.Deadline()
			err := wait(e, ctx)
			checkDeadline(t, err, d)
		})
	}
}

// checkDeadline fails t unless a wait whose deadline was d returned
// context.DeadlineExceeded at d or soon after. The deadline is read on
// the package's clock, calibrated against the monotonic clock: 100 µs
// of slack covers the two clocks' disagreement over the wait.
func checkDeadline(t *testing.T, err error, d time.Time) {
	t.Helper()
	late := time.Since(d)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
	if late < -100*time.Microsecond || late > 5*time.Second {
		t.Fatalf("returned %v after the deadline, want 0 to 5 s", late)
	}
	t.Logf("returned %v after the deadline", late)
}

// deadlineOnly is a context with a deadline whose Done never closes: only
// the waiter's own reading of the deadline can end its wait.
type deadlineOnly struct {
	context.Context
	d time.Time
}

func (c deadlineOnly) Deadline() (time.Time, bool) { return c.d, true }

// TestWaitContextDeadlineBoundsNap: the nap of a parked waiter is bounded
// by its context's deadline, which ends the wait on this package's clock
// even when no one rings and the context's Done does not close.
func TestWaitContextDeadlineBoundsNap(t *testing.T) {
	e := newEngine(t, WithIdle(0, 0, time.Minute))
	never, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := time.Now().Add(30 * time.Millisecond)
	parks := pvParks.Value()
	err := e.WaitContext(deadlineOnly{never, d}, new(Completion))
	checkDeadline(t, err, d)
	if pvParks.Value() == parks {
		t.Error("the waiter never parked: the test did not test the nap's bound")
	}
}

// TestWaitContextDisarmed: once a wait that parked is over, its
// context's end rings nothing (the doorbell may be gone by then): the
// waker is cleared.
func TestWaitContextDisarmed(t *testing.T) {
	e := newEngine(t, WithIdle(0, 0, time.Minute))
	ctx, cancel := context.WithCancel(context.Background())
	var c Completion
	w := e.newIdler()
	k := newCtxWait(ctx, ctx.Done())
	k.arm(&w)
	wake := k.wake
	go func() { time.Sleep(10 * time.Millisecond); e.Complete(&c) }()
	for !c.Done() {
		k.park(&w, waitOneCtx{&c, k.done})
	}
	k.disarm()
	seq := atomic.LoadUint32(&e.bell.seq)
	cancel()
	wake.ring() // as a late AfterFunc would
	if wake.bell != nil || atomic.LoadUint32(&e.bell.seq) != seq {
		t.Fatal("a disarmed waker rang the doorbell")
	}
}

// TestWaitContextAllocs: with a context that can end but does not, the
// Context forms allocate nothing through many empty polls in the spin
// and pause phases, as the plain forms.
func TestWaitContextAllocs(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, idle := range []struct{ spin, pause time.Duration }{{time.Hour, time.Hour}, {0, time.Hour}} {
		e := newEngine(t, WithIdle(idle.spin, idle.pause, time.Minute))
		var c Completion
		e.Register(&lazyPoller{e: e, c: &c, n: 200})
		cs := []*Completion{&c}
		ready := c.Done
		if n := testing.AllocsPerRun(100, func() {
			c.Rearm()
			e.WaitContext(ctx, &c)
			c.Rearm()
			e.WaitAnyContext(ctx, cs)
			c.Rearm()
			e.WaitAllContext(ctx, cs)
			c.Rearm()
			e.WaitUntilContext(ctx, ready)
		}); n != 0 {
			t.Errorf("spin %v: the Context forms through 200 empty polls allocate %v times", idle.spin, n)
		}
	}
}

// completer completes c at every poll and reports it, as a transport's
// poller reports the receive it completed.
type completer struct {
	e *Engine
	c *Completion
}

func (p *completer) Poll() int {
	p.e.Complete(p.c)
	return 1
}

// BenchmarkWaitContext is the cost of a context that does not end on a
// wait that a poll completes: against Wait in the same run.
func BenchmarkWaitContext(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, bc := range []struct {
		name string
		wait func(e *Engine, c *Completion)
	}{
		{"Wait", func(e *Engine, c *Completion) { e.Wait(c) }},
		{"WaitContext", func(e *Engine, c *Completion) { e.WaitContext(ctx, c) }},
		{"WaitContextBackground", func(e *Engine, c *Completion) { e.WaitContext(context.Background(), c) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			e := newEngine(b)
			var c Completion
			e.Register(&completer{e: e, c: &c})
			for b.Loop() {
				c.Rearm()
				bc.wait(e, &c)
			}
		})
	}
}
