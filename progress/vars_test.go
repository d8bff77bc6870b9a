package progress

import (
	"context"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/asm"
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

// tries is how many times the timing tests measure before they fail: a
// host that takes the CPU away for milliseconds at the wrong moment
// spoils one measurement, rarely three in a row, while a wrong count
// spoils every one.
const tries = 3

// TestPollTime: progress_poll_time stays at zero until the first timed
// poll (the 256th), then estimates the time polls took: 256 times what
// the timed ones took, which the poller measured itself.
func TestPollTime(t *testing.T) {
	if pvPollTime.Class() != pvar.ClassTimer || pvPollTime.Bind() != pvar.BindComm {
		t.Fatalf("progress_poll_time is a %v bound to %v, want a timer bound to a communicator", pvPollTime.Class(), pvPollTime.Bind())
	}
	for try := 1; ; try++ {
		e, other := newEngine(t), newEngine(t)
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
		if n := pvPollTime.ValueOf(other.PvarOwner()); n != 0 {
			t.Fatalf("an engine that never polled: progress_poll_time %d counts", n)
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
		// A timed poll holds the poller's and a few nanoseconds more
		// (or the host's time away, between the two).
		if got >= 0.9*least && got >= 0.95*seen && got <= 1.05*seen+0.002 {
			return
		}
		if try == tries {
			t.Fatalf("progress_poll_time %.6f s; want about %.6f s (256 times the timed polls), at least %.6f s", got, seen, least)
		}
		t.Logf("try %d: progress_poll_time %.6f s, want about %.6f s: again", try, got, seen)
	}
}

// blocker ends a wait on e block after the wait has begun to idle (its
// first clock reading, Coarse's), and tells the least the wait must
// count: the span between two readings of the wait's, one no earlier
// than its first, the other no later than its last.
type blocker struct {
	e      *Engine
	block  time.Duration
	v0, v1 uint64 // Coarse's readings when the block began and when it ended
}

// run waits for the wait's first reading, sleeps for the block, and
// calls end.
func (b *blocker) run(end func()) {
	for b.v0 == 0 {
		time.Sleep(10 * time.Microsecond)
		b.v0 = asm.LoadRelaxed64(&b.e.coarse)
	}
	time.Sleep(b.block)
	b.v1 = asm.LoadRelaxed64(&b.e.coarse)
	end()
}

// check fails t if what the wait counted (got, seconds) is less than the
// span between the readings the blocker saw or more than the wait took;
// it reports whether got is about the block, as a wait that was not
// descheduled for most of it counts.
func (b *blocker) check(t *testing.T, got, took float64) bool {
	t.Helper()
	if least := CountsToSeconds(b.v1 - b.v0); got < least || got > 1.05*took+1e-3 {
		t.Fatalf("progress_wait_time %.6f s for a wait of %.6f s, whose readings span at least %.6f s", got, took, least)
	}
	return got >= 0.25*b.block.Seconds()
}

// waitBlocked waits with wait on a request that a blocker completes, and
// returns what the wait added to progress_wait_time and how long it took,
// in seconds.
func waitBlocked(t *testing.T, b *blocker, wait func(e *Engine, c *Completion)) (got, took float64) {
	var c Completion
	done := make(chan struct{})
	go func() {
		b.run(func() { b.e.Complete(&c) })
		close(done)
	}()
	start := time.Now()
	wait(b.e, &c)
	took = time.Since(start).Seconds()
	<-done
	if !c.Done() {
		t.Fatal("the wait returned before its completion")
	}
	return seconds(pvWaitTime, b.e), took
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
				for try := 1; ; try++ {
					b := &blocker{e: newEngine(t, WithIdleStrategy(s)), block: block}
					got, took := waitBlocked(t, b, bw.wait)
					if b.check(t, got, took) {
						return
					}
					if try == tries {
						t.Fatalf("progress_wait_time %.6f s for a wait of %.6f s, blocked for %v", got, took, block)
					}
					t.Logf("try %d: progress_wait_time %.6f s for a wait of %.6f s: again", try, got, took)
				}
			})
		}
	}

	t.Run("serial/Wait", func(t *testing.T) { // a plain add, not an atomic one
		for try := 1; ; try++ {
			e := newEngine(t)
			if err := e.SetSerial(true); err != nil {
				t.Fatal(err)
			}
			b := &blocker{e: e, block: block}
			got, took := waitBlocked(t, b, func(e *Engine, c *Completion) { e.Wait(c) })
			if b.check(t, got, took) {
				return
			}
			if try == tries {
				t.Fatalf("progress_wait_time %.6f s for a wait of %.6f s, blocked for %v", got, took, block)
			}
			t.Logf("try %d: progress_wait_time %.6f s for a wait of %.6f s: again", try, got, took)
		}
	})

	t.Run("ContextEnds", func(t *testing.T) {
		for try := 1; ; try++ {
			b := &blocker{e: newEngine(t), block: block}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				b.run(cancel)
				close(done)
			}()
			var c Completion
			start := time.Now()
			if err := b.e.WaitContext(ctx, &c); err == nil {
				t.Fatal("a wait on a request nothing completes returned nil")
			}
			took := time.Since(start).Seconds()
			<-done
			got := seconds(pvWaitTime, b.e)
			if b.check(t, got, took) {
				return
			}
			if try == tries {
				t.Fatalf("progress_wait_time %.6f s for a wait of %.6f s that its context ended after %v", got, took, block)
			}
			t.Logf("try %d: progress_wait_time %.6f s for a wait of %.6f s: again", try, got, took)
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
