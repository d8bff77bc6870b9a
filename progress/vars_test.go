package progress

import (
	"context"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/pvar"
)

// TestVarsPerEngine: each engine's polls, empty polls and timer lateness
// are its own (its owner's), and the process-wide value their sum.
func TestVarsPerEngine(t *testing.T) {
	a, b := newEngine(t), newEngine(t)
	if a.PvarOwner() == nil || a.PvarOwner() == b.PvarOwner() {
		t.Fatal("engines share an owner")
	}
	before := pvEmpty.Value()
	for range 5 {
		a.Progress()
	}
	for range 2 {
		b.Progress()
	}
	if pa, pb := pvPolls.ValueOf(a.PvarOwner()), pvPolls.ValueOf(b.PvarOwner()); pa != 5 || pb != 2 {
		t.Errorf("polls per engine %d, %d; want 5, 2", pa, pb)
	}
	if ea, eb := pvEmpty.ValueOf(a.PvarOwner()), pvEmpty.ValueOf(b.PvarOwner()); ea != 5 || eb != 2 {
		t.Errorf("empty polls per engine %d, %d; want 5, 2", ea, eb)
	}
	if got := pvEmpty.Value() - before; got < 7 {
		t.Errorf("process-wide empty polls grew by %d, want at least 7", got)
	}

	// A timer due in 1 ms whose engine does not poll for 20 ms fires
	// about 19 ms late.
	r, err := a.NewTimer(1e-3)
	if err != nil {
		t.Fatal(err)
	}
	if d := pvTimers.ValueOf(a.PvarOwner()); d != 1 {
		t.Errorf("timer wheel depth %d, want 1", d)
	}
	time.Sleep(20 * time.Millisecond)
	if err := r.Wait(); err != nil {
		t.Fatal(err)
	}
	lateCounts, most := pvLate.ValueOf(a.PvarOwner()), pvLateHWM.ValueOf(a.PvarOwner())
	if pvLate.Class() != pvar.ClassTimer {
		t.Errorf("progress_timer_lateness is a %v, want a timer", pvLate.Class())
	}
	late := uint64(CountsToSeconds(lateCounts) * 1e9) // ns, as the watermark
	if late < uint64(15*time.Millisecond) || most < int64(15*time.Millisecond) || int64(late) < most {
		t.Errorf("lateness %d ns, most %d ns; want at least 15 ms each, the sum no less than the most", late, most)
	}
	if late > uint64(10*time.Second) {
		t.Errorf("lateness %d ns for a timer 20 ms late", late)
	}
	if least := pvLateLWM.ValueOf(a.PvarOwner()); least != most {
		t.Errorf("one timer fired: least lateness %d ns, most %d", least, most)
	}
	if f := pvFired.ValueOf(a.PvarOwner()); f != 1 {
		t.Errorf("timers fired %d, want 1", f)
	}
	if late, most := pvLate.ValueOf(b.PvarOwner()), pvLateHWM.ValueOf(b.PvarOwner()); late != 0 || most != 0 {
		t.Errorf("the other engine's lateness %d, %d; want 0", late, most)
	}
	if d := pvTimers.ValueOf(a.PvarOwner()); d != 0 {
		t.Errorf("timer wheel depth %d after firing, want 0", d)
	}
	// Timers Close fires are not late: they fire because the engine ends.
	c, _ := New()
	if _, err := c.NewTimer(3600); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if late := pvLate.ValueOf(c.PvarOwner()); late != 0 {
		t.Errorf("a timer fired by Close counted %d ns late", late)
	}
}

// slowPoller spins for d at each poll, finding nothing, and records how
// long each poll of its took.
type slowPoller struct {
	d    time.Duration
	took []time.Duration
}

func (p *slowPoller) Poll() int {
	t0 := time.Now()
	for time.Since(t0) < p.d {
	}
	p.took = append(p.took, time.Since(t0))
	return 0
}

// seconds returns what timer v counted for e's owner, in seconds.
func seconds(v *pvar.Counter, e *Engine) float64 {
	return CountsToSeconds(v.ValueOf(e.PvarOwner()))
}

// TestPollTime: progress_poll_time stays at zero until the first timed
// poll (the 256th), then estimates the time polls took: 256 times what
// the timed ones took, which the poller measured itself.
func TestPollTime(t *testing.T) {
	e, other := newEngine(t), newEngine(t)
	if pvPollTime.Class() != pvar.ClassTimer || pvPollTime.Bind() != pvar.BindComm {
		t.Fatalf("progress_poll_time is a %v bound to %v, want a timer bound to a communicator", pvPollTime.Class(), pvPollTime.Bind())
	}
	p := &slowPoller{d: 20 * time.Microsecond}
	e.Register(p)
	for range pollTimeEvery - 1 {
		e.Progress()
	}
	if got := pvPollTime.ValueOf(e.PvarOwner()); got != 0 {
		t.Fatalf("%d polls, none timed yet: progress_poll_time %d counts, want 0", pollTimeEvery-1, got)
	}
	const timed = 5
	for range timed*pollTimeEvery - (pollTimeEvery - 1) {
		e.Progress()
	}
	var sampled time.Duration // what the timed polls took, as the poller saw it
	for i, d := range p.took {
		if (i+1)%pollTimeEvery == 0 {
			sampled += d
		}
	}
	got := seconds(pvPollTime, e)
	least := pollTimeEvery * timed * p.d.Seconds() // every poll spins at least d
	seen := pollTimeEvery * sampled.Seconds()
	// A timed poll holds the poller's and a few nanoseconds more; 5 ms
	// over all of them leaves room for a preemption between the two.
	if got < 0.9*least || got < 0.95*seen || got > 1.05*seen+0.005 {
		t.Errorf("progress_poll_time %.6f s; want about %.6f s (256 times the timed polls), at least %.6f s", got, seen, least)
	}
	if n := pvPollTime.ValueOf(other.PvarOwner()); n != 0 {
		t.Errorf("an engine that never polled: progress_poll_time %d counts", n)
	}
}

// TestWaitTime: a wait that blocks for a known time adds about that time
// to progress_wait_time, whichever wait it is and whether it parks,
// yields or spins; a wait that returns at once, or an engine's dedicated
// goroutine idling, adds nothing.
func TestWaitTime(t *testing.T) {
	if pvWaitTime.Class() != pvar.ClassTimer || pvWaitTime.Bind() != pvar.BindComm {
		t.Fatalf("progress_wait_time is a %v bound to %v, want a timer bound to a communicator", pvWaitTime.Class(), pvWaitTime.Bind())
	}
	const block = 20 * time.Millisecond
	// A context that could end (its Done is not nil) but does not.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waits := []struct {
		name string
		wait func(e *Engine, c *Completion) // returns once c is complete
	}{
		{"Wait", func(e *Engine, c *Completion) { e.Wait(c) }},
		{"WaitAny", func(e *Engine, c *Completion) { e.WaitAny([]*Completion{nil, c}) }},
		{"WaitAll", func(e *Engine, c *Completion) { e.WaitAll([]*Completion{c, c}) }},
		{"WaitUntil", func(e *Engine, c *Completion) { e.WaitUntil(c.Done) }},
		{"WaitContext", func(e *Engine, c *Completion) { e.WaitContext(ctx, c) }},
		{"WaitAnyContext", func(e *Engine, c *Completion) { e.WaitAnyContext(ctx, []*Completion{c}) }},
		{"WaitUntilContext", func(e *Engine, c *Completion) { e.WaitUntilContext(ctx, c.Done) }},
	}
	for _, s := range []IdleStrategy{IdlePark, IdleYield, IdleSpin} {
		for _, bw := range waits {
			t.Run(s.String()+"/"+bw.name, func(t *testing.T) {
				e := newEngine(t, WithIdleStrategy(s))
				var c Completion
				start := time.Now()
				go func() {
					time.Sleep(block)
					e.Complete(&c)
				}()
				bw.wait(e, &c)
				took := time.Since(start)
				if !c.Done() {
					t.Fatal("the wait returned before its completion")
				}
				// Counted from the first empty poll, a microsecond or so
				// after start, to a reading at most a few polls before
				// the return.
				got := seconds(pvWaitTime, e)
				if got < 0.8*block.Seconds() || got > 1.05*took.Seconds()+1e-3 {
					t.Errorf("progress_wait_time %.6f s for a wait of %.6f s, blocked for at least %v", got, took.Seconds(), block)
				}
			})
		}
	}

	t.Run("ContextEnds", func(t *testing.T) {
		e := newEngine(t)
		var c Completion
		ctx, cancel := context.WithTimeout(context.Background(), block)
		defer cancel()
		start := time.Now()
		if err := e.WaitContext(ctx, &c); err == nil {
			t.Fatal("a wait on a request nothing completes returned nil")
		}
		took := time.Since(start)
		if got := seconds(pvWaitTime, e); got < 0.8*block.Seconds() || got > 1.05*took.Seconds()+1e-3 {
			t.Errorf("progress_wait_time %.6f s for a wait of %.6f s that its context ended", got, took.Seconds())
		}
	})

	t.Run("Nothing", func(t *testing.T) {
		e := newEngine(t)
		var c, d Completion
		unregister := e.Register(&completer{e: e, c: &d})
		e.Complete(&c)
		e.Wait(&c) // complete already
		e.Wait(&d) // the first poll completes it
		e.WaitUntil(d.Done)
		unregister()
		if err := e.Start(-1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(block) // the dedicated goroutine idles, parks: no wait
		e.Stop()
		if n := pvWaitTime.ValueOf(e.PvarOwner()); n != 0 {
			t.Errorf("waits that returned at once, and a dedicated goroutine's idling: progress_wait_time %d counts, want 0", n)
		}
	})
}
