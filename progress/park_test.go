package progress

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// parked reports whether the engine has a watcher and how many followers
// sleep behind it.
func (e *Engine) parked() (watcher bool, followers int) {
	lk := &e.lot
	lk.mu.Lock()
	defer lk.mu.Unlock()
	n := 0
	for f := lk.head; f != nil; f = f.next {
		n++
	}
	return lk.watcher != nil, n
}

// waitParked waits until n goroutines are parked on e, one watching, and
// then a little more, so that the watcher is asleep in the kernel.
func waitParked(t *testing.T, e *Engine, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if w, f := e.parked(); w && f == n-1 {
			break
		}
		if time.Now().After(deadline) {
			w, f := e.parked()
			t.Fatalf("waiting for %d parked goroutines: watcher %v, %d followers", n, w, f)
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
}

// settle waits until the engine's count of goroutines woken from a park
// reaches at least want and then stays put for 50 ms (a loaded machine
// may run the goroutines late), and returns the count.
func settle(t *testing.T, e *Engine, want uint64) uint64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	last, still := e.lot.wakes.Load(), 0
	for (last < want || still < 5) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		if w := e.lot.wakes.Load(); w != last {
			last, still = w, 0
		} else {
			still++
		}
	}
	return last
}

// TestRingWakesOne: with eight goroutines parked on an engine, a ring of
// its doorbell wakes one of them (the kernel wakes one thread), which
// finds no condition met and sleeps again; a ring after one goroutine's
// condition holds wakes that one and the watcher, and no other.
func TestRingWakesOne(t *testing.T) {
	const n = 8
	e := newEngine(t, WithIdle(0, 0, time.Minute))
	var flags [n]atomic.Bool
	done := make(chan int, n)
	for i := range n {
		go func() {
			e.WaitUntil(flags[i].Load)
			done <- i
		}()
	}
	waitParked(t, e, n)
	d := e.Doorbell()

	w0 := settle(t, e, 0)
	WakeFence()
	atomic.AddUint32(&d.seq, 1) // a ring, by hand, to see the kernel's count
	if woke := futexWake(&d.seq, 1<<30); runtime.GOOS == "linux" && woke != 1 {
		t.Errorf("a ring with %d goroutines parked woke %d threads, want 1", n, woke)
	}
	if w := settle(t, e, w0+1); w != w0+1 {
		t.Errorf("a ring woke %d goroutines, want 1", w-w0)
	}
	w0 = settle(t, e, 0)
	d.Ring()
	if w := settle(t, e, w0+1); w != w0+1 {
		t.Errorf("Ring woke %d goroutines, want 1", w-w0)
	}
	if w, f := e.parked(); !w || f != n-1 {
		t.Fatalf("after the rings: watcher %v, %d followers; want all %d parked", w, f, n)
	}

	// Each goroutine's condition in turn: the ring wakes the watcher,
	// which wakes the goroutine whose condition holds (or, when that is
	// the watcher itself, hands the watch to a follower).
	for k := range n {
		w0 = settle(t, e, 0)
		flags[k].Store(true)
		d.Ring()
		select {
		case i := <-done:
			if i != k {
				t.Fatalf("goroutine %d returned; only %d's condition holds", i, k)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("goroutine %d not woken by the ring after its condition held", k)
		}
		want := w0 + 2
		if k == n-1 {
			want = w0 + 1 // the last one, the watcher, has no follower to hand over to
		}
		if w := settle(t, e, want); w != want {
			t.Errorf("goroutine %d's ring woke %d goroutines, want %d", k, w-w0, want-w0)
		}
		select {
		case i := <-done:
			t.Fatalf("goroutine %d returned with its condition false", i)
		default:
		}
	}
}

// queuePoller completes, at each poll, the completions queued for it,
// marking them all and then ringing once, as a transport does.
type queuePoller struct {
	e  *Engine
	mu sync.Mutex
	q  []*Completion
}

func (p *queuePoller) push(c *Completion) {
	p.mu.Lock()
	p.q = append(p.q, c)
	p.mu.Unlock()
	p.e.Doorbell().Ring() // work for whoever polls
}

func (p *queuePoller) Poll() int {
	p.mu.Lock()
	q := p.q
	p.q = nil
	p.mu.Unlock()
	for _, c := range q {
		c.MarkDone()
	}
	if len(q) > 0 {
		p.e.Doorbell().Ring()
	}
	return len(q)
}

// TestNoLostWakeup: many goroutines wait on one engine, with every wait
// parked at once and no timeout to rescue a lost wake-up, while others
// complete their requests in random order every way there is: Complete,
// a poller that marks a batch and rings once, a condition set and rung,
// and with and without a dedicated progress goroutine. Every round must
// end, and each waiter must see its own completion.
func TestNoLostWakeup(t *testing.T) {
	rounds := 300
	if testing.Short() {
		rounds = 40
	}
	for _, dedicated := range []bool{false, true} {
		t.Run(fmt.Sprintf("dedicated=%v", dedicated), func(t *testing.T) {
			e := newEngine(t, WithIdle(0, 0, time.Hour))
			p := &queuePoller{e: e}
			e.Register(p)
			if dedicated {
				if err := e.Start(-1); err != nil {
					t.Fatal(err)
				}
			}
			noLostWakeup(t, e, p, rounds)
		})
	}
}

func noLostWakeup(t *testing.T, e *Engine, p *queuePoller, rounds int) {
	const waiters = 24
	cs := make([]Completion, waiters)
	var flags [waiters]atomic.Bool
	for r := range rounds {
		for i := range cs {
			cs[i].Rearm()
			flags[i].Store(false)
		}
		var wg sync.WaitGroup
		errs := make(chan error, waiters)
		for i := range waiters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				switch (i + r) % 3 {
				case 0:
					e.Wait(&cs[i])
				case 1:
					if k := e.WaitAny([]*Completion{nil, &cs[i]}); k != 1 {
						errs <- fmt.Errorf("WaitAny returned %d", k)
					}
				case 2:
					e.WaitUntil(flags[i].Load)
					return
				}
				if !cs[i].Done() {
					errs <- fmt.Errorf("waiter %d returned before its completion", i)
				}
			}()
		}
		// Let some of them park before the completions begin.
		if r%2 == 0 {
			time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
		}
		order := rand.Perm(waiters)
		var feeders sync.WaitGroup
		for part := range 2 {
			feeders.Add(1)
			go func() {
				defer feeders.Done()
				for j := part; j < waiters; j += 2 {
					i := order[j]
					switch {
					case (i+r)%3 == 2:
						flags[i].Store(true)
						e.Doorbell().Ring()
					case rand.IntN(2) == 0:
						e.Complete(&cs[i])
					default:
						p.push(&cs[i])
					}
					if rand.IntN(4) == 0 {
						runtime.Gosched()
					}
				}
			}()
		}
		feeders.Wait()
		finished := make(chan struct{})
		go func() { wg.Wait(); close(finished) }()
		select {
		case <-finished:
		case <-time.After(20 * time.Second):
			w, f := e.parked()
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("round %d: waiters still parked after every completion (watcher %v, %d followers, n %d, sleepers %d): a lost wake-up\n%s", r, w, f, e.lot.n.Load(), e.bell.sleepers, buf)
		}
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", r, err)
		}
	}
}

// TestIdleStrategies: each strategy does what it says while a goroutine
// waits 30 ms for a completion: park parks (and then its one waiter is the
// watcher), yield and spin never do.
func TestIdleStrategies(t *testing.T) {
	for _, s := range []IdleStrategy{IdlePark, IdleYield, IdleSpin} {
		e := newEngine(t, WithIdleStrategy(s), WithIdle(time.Millisecond, time.Millisecond, time.Minute))
		if e.IdleStrategy() != s {
			t.Fatalf("WithIdleStrategy(%v) made an engine with %v", s, e.IdleStrategy())
		}
		var c Completion
		parks := pvParks.Value()
		time.AfterFunc(30*time.Millisecond, func() { e.Complete(&c) })
		e.Wait(&c)
		if got := pvParks.Value() - parks; (got > 0) != (s == IdlePark) {
			t.Errorf("%v: %d parks while waiting 30 ms", s, got)
		}
	}
}

// TestIdleStrategyNames: names round-trip, the control variable sets the
// default, and the option wins over it.
func TestIdleStrategyNames(t *testing.T) {
	for _, s := range []IdleStrategy{IdlePark, IdleYield, IdleSpin} {
		if got, err := ParseIdleStrategy(s.String()); err != nil || got != s {
			t.Errorf("ParseIdleStrategy(%q) = %v, %v", s.String(), got, err)
		}
	}
	if _, err := ParseIdleStrategy("nap"); err == nil {
		t.Error("ParseIdleStrategy accepted nap")
	}
	if s := IdleStrategy(7).String(); s != "IdleStrategy(7)" {
		t.Errorf("String of an unknown strategy: %q", s)
	}
	if _, err := New(WithIdleStrategy(IdleStrategy(7))); err == nil {
		t.Error("New accepted an unknown idle strategy")
	}
	if got := newEngine(t).IdleStrategy(); got != IdlePark {
		t.Errorf("default strategy %v, want park", got)
	}
	old := idleVar.Get()
	if err := idleVar.Set("yield"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { idleVar.Set(old) })
	if got := newEngine(t).IdleStrategy(); got != IdleYield {
		t.Errorf("progress_idle=yield made an engine with %v", got)
	}
	if got := newEngine(t, WithIdleStrategy(IdleSpin)).IdleStrategy(); got != IdleSpin {
		t.Errorf("WithIdleStrategy(IdleSpin) under progress_idle=yield made %v", got)
	}
}

// TestOneActiveWaiter: of several goroutines waiting on one engine, one
// spins and the others park at once (IdlePark), holding no P.
func TestOneActiveWaiter(t *testing.T) {
	e := newEngine(t, WithIdle(time.Hour, time.Hour, time.Minute)) // the active one would spin for good
	var c Completion
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() { defer wg.Done(); e.Wait(&c) }()
	}
	waitParked(t, e, 3)
	time.Sleep(50 * time.Millisecond)
	if w, f := e.parked(); !w || f != 2 {
		t.Errorf("watcher %v, %d followers; want three of four waiters parked", w, f)
	}
	e.Complete(&c)
	wg.Wait()
}

// BenchmarkParkedWake: from Complete to the goroutine parked on the
// request running again, for the engine's watcher and for a follower
// behind a watcher that waits on something else (two hops). It reports
// the median and 99th percentile as p50-ns and p99-ns.
func BenchmarkParkedWake(b *testing.B) {
	for _, follower := range []bool{false, true} {
		name := "watcher"
		if follower {
			name = "follower"
		}
		b.Run(name, func(b *testing.B) {
			e, err := New(WithIdle(0, 0, time.Minute))
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			var other Completion
			parked := 1
			if follower {
				go e.Wait(&other)
				parked = 2
			}
			lat := make([]time.Duration, 0, b.N)
			for range b.N {
				b.StopTimer()
				var c Completion
				woke := make(chan time.Time, 1)
				go func() { e.Wait(&c); woke <- time.Now() }()
				for {
					if w, f := e.parked(); w && f == parked-1 {
						break
					}
					time.Sleep(100 * time.Microsecond)
				}
				time.Sleep(time.Millisecond) // asleep in the kernel
				b.StartTimer()
				t0 := time.Now()
				e.Complete(&c)
				lat = append(lat, (<-woke).Sub(t0))
			}
			e.Complete(&other)
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2]), "p50-ns")
			b.ReportMetric(float64(lat[(len(lat)-1)*99/100]), "p99-ns")
		})
	}
}

// TestFollowersContextAndClose: goroutines parked as followers behind a
// watcher that waits on something else: one whose context is cancelled
// wakes (the context's ring wakes the watcher, which finds the context
// ended), one whose deadline passes wakes by it on this package's clock
// though its context's Done never closes (the watcher naps no longer
// than the follower's deadline), and Close, while the others stay
// parked, has every one of them leave the doorbell before it returns.
func TestFollowersContextAndClose(t *testing.T) {
	e, err := New(WithIdle(0, 0, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var plain Completion
	plainLeft := make(chan struct{})
	go func() { e.Wait(&plain); close(plainLeft) }()
	waitParked(t, e, 1)

	cancelled, cancel := context.WithCancel(context.Background())
	never, stop := context.WithCancel(context.Background())
	defer stop()
	deadline := time.Now().Add(60 * time.Millisecond)
	errs := make(chan error, 3)
	go func() { errs <- e.WaitContext(cancelled, new(Completion)) }()
	go func() {
		err := e.WaitContext(deadlineOnly{never, deadline}, new(Completion))
		if late := time.Since(deadline); err == nil || late < -100*time.Microsecond || late > 5*time.Second {
			err = fmt.Errorf("deadline: %v, %v after it", err, late)
		}
		errs <- err
	}()
	var other Completion
	left := make(chan struct{})
	go func() { e.Wait(&other); close(left) }()
	waitParked(t, e, 4)

	cancel()
	select {
	case err := <-errs:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the cancelled follower returned %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a follower whose context was cancelled stayed parked")
	}
	select {
	case err := <-errs:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a follower whose deadline passed stayed parked")
	}
	if w, f := e.parked(); !w || f != 1 {
		t.Fatalf("watcher %v, %d followers; want the two plain waiters still parked", w, f)
	}

	closed := make(chan error, 1)
	go func() { closed <- e.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return while goroutines were parked")
	}
	if w, f := e.parked(); w || f != 0 {
		t.Errorf("after Close: watcher %v, %d followers", w, f)
	}
	plain.MarkDone() // they poll a closed engine now: let them go
	other.MarkDone()
	<-left
	<-plainLeft
	if n := e.napping.Load(); n != 0 {
		t.Errorf("%d goroutines on the doorbell after Close and the waits", n)
	}
}
