package progress

import (
	"errors"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestTimerNeverEarly(t *testing.T) {
	e := newEngine(t)
	rng := rand.New(rand.NewPCG(1, 2))
	type armed struct {
		r     *TimerRequest
		start float64
		due   float64
	}
	timers := make([]armed, 500)
	for i := range timers {
		due := rng.Float64() * 5e-3
		start := Wtime()
		r, err := e.NewTimer(due)
		if err != nil {
			t.Fatal(err)
		}
		timers[i] = armed{r, start, due}
	}
	cs := make([]*Completion, len(timers))
	for i := range timers {
		cs[i] = &timers[i].r.Completion
	}
	for range timers {
		i := e.WaitAny(cs)
		now := Wtime()
		if a := timers[i]; now < a.start+a.due {
			t.Errorf("timer %d due at %.9f completed early, at %.9f", i, a.start+a.due, now)
		}
		cs[i] = nil
	}
	if e.WaitAny(cs) != -1 {
		t.Error("WaitAny of all-nil entries did not return -1")
	}
}

func TestTimerZeroAndNegative(t *testing.T) {
	e := newEngine(t)
	for _, due := range []float64{0, -1, math.Copysign(0, -1)} {
		r, err := e.NewTimer(due)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Done() || r.Cancelled() {
			t.Errorf("NewTimer(%v): done %v cancelled %v, want completed", due, r.Done(), r.Cancelled())
		}
		if err := r.Reset(1); !errors.Is(err, ErrInactive) {
			t.Errorf("Reset of completed timer = %v, want ErrInactive", err)
		}
	}
}

func TestTimerBadDue(t *testing.T) {
	e := newEngine(t)
	for _, due := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if r, err := e.NewTimer(due); !errors.Is(err, ErrDueTime) || r != nil {
			t.Errorf("NewTimer(%v) = %v, %v; want ErrDueTime", due, r, err)
		}
	}
	r, err := e.NewTimer(10)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Reset(math.NaN()); !errors.Is(err, ErrDueTime) {
		t.Errorf("Reset(NaN) = %v, want ErrDueTime", err)
	}
	if r.Done() {
		t.Error("failed Reset completed the timer")
	}
}

func TestTimerResetEarlierAndLater(t *testing.T) {
	e := newEngine(t)
	r, err := e.NewTimer(60)
	if err != nil {
		t.Fatal(err)
	}
	start := Wtime()
	if err := r.Reset(2e-3); err != nil {
		t.Fatal(err)
	}
	r.Wait()
	if got := Wtime() - start; got < 2e-3 || got > 1 {
		t.Errorf("reset earlier to 2 ms: completed after %g s", got)
	}

	r, err = e.NewTimer(1e-3)
	if err != nil {
		t.Fatal(err)
	}
	start = Wtime()
	if err := r.Reset(50e-3); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if ok, _ := r.Test(); ok {
		t.Fatal("timer reset to 50 ms completed at its old due time")
	}
	r.Wait()
	if got := Wtime() - start; got < 50e-3 {
		t.Errorf("reset later to 50 ms: completed after %g s", got)
	}
	if err := r.Reset(1); !errors.Is(err, ErrInactive) {
		t.Errorf("Reset after completion = %v, want ErrInactive", err)
	}

	r, err = e.NewTimer(60)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Reset(0); err != nil || !r.Done() || r.Cancelled() {
		t.Errorf("Reset(0) = %v: done %v cancelled %v; want completed now", err, r.Done(), r.Cancelled())
	}
}

func TestTimerCancel(t *testing.T) {
	e := newEngine(t)
	r, err := e.NewTimer(60)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Cancel(); err != nil {
		t.Fatal(err)
	}
	if err := r.Wait(); err != nil || !r.Done() || !r.Cancelled() {
		t.Fatalf("cancelled timer: wait %v done %v cancelled %v", err, r.Done(), r.Cancelled())
	}
	if err := r.Reset(1); !errors.Is(err, ErrInactive) {
		t.Errorf("Reset of cancelled timer = %v, want ErrInactive", err)
	}
	if err := r.Cancel(); err != nil || !r.Cancelled() {
		t.Errorf("second Cancel = %v", err)
	}

	done, _ := e.NewTimer(0)
	if err := done.Cancel(); err != nil || done.Cancelled() {
		t.Errorf("Cancel of a completed timer: %v, cancelled %v; want no effect", err, done.Cancelled())
	}
	if pending := pvTimers.Value(); pending != 0 {
		t.Errorf("progress_timers_pending = %d after every timer finished", pending)
	}
}

func TestTimerFree(t *testing.T) {
	e := newEngine(t)
	r, err := e.NewTimer(1e-3)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Free(); err != nil {
		t.Fatal(err)
	}
	if e.wheel.Len() != 0 {
		t.Error("freed timer still on the wheel")
	}
	for name, err := range map[string]error{
		"Free":   r.Free(),
		"Reset":  r.Reset(1),
		"Cancel": r.Cancel(),
		"Wait":   r.Wait(),
	} {
		if !errors.Is(err, ErrFreed) {
			t.Errorf("%s after Free = %v, want ErrFreed", name, err)
		}
	}
	if _, err := r.Test(); !errors.Is(err, ErrFreed) {
		t.Errorf("Test after Free = %v, want ErrFreed", err)
	}
}

// flag is a stand-in for a communication request that a poller completes.
type flag struct {
	e     *Engine
	c     Completion
	after int // polls until completion
}

func (f *flag) Poll() int {
	if f.after > 0 {
		f.after--
		if f.after == 0 {
			f.e.Complete(&f.c)
			return 1
		}
	}
	return 0
}

func TestWaitMixedRequests(t *testing.T) {
	e := newEngine(t)
	comm := &flag{e: e, after: 1000}
	e.Register(comm)
	slow, _ := e.NewTimer(60)
	fast, _ := e.NewTimer(1e-3)
	cs := []*Completion{&slow.Completion, nil, &comm.c, &fast.Completion}
	if i, ok := e.TestAny(cs); ok {
		t.Fatalf("TestAny = %d before anything completed", i)
	}
	first := e.WaitAny(cs)
	if first != 2 && first != 3 {
		t.Fatalf("WaitAny = %d, want the communication request (2) or the fast timer (3)", first)
	}
	cs[first] = nil
	second := e.WaitAny(cs)
	if second+first != 5 {
		t.Fatalf("WaitAny = %d then %d", first, second)
	}
	cs[second] = nil
	slow.Reset(1e-3)
	e.WaitAll(cs)
	if !slow.Done() || !comm.c.Done() || !fast.Done() {
		t.Fatal("WaitAll returned before every request completed")
	}
	if i, ok := e.TestAny([]*Completion{nil}); i != -1 || !ok {
		t.Errorf("TestAny of nil entries = %d, %v", i, ok)
	}
}

func TestCloseCancelsTimers(t *testing.T) {
	e, err := New()
	if err != nil {
		t.Fatal(err)
	}
	r, _ := e.NewTimer(60)
	done := make(chan struct{})
	go func() { r.Wait(); close(done) }()
	time.Sleep(10 * time.Millisecond)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("waiter on a pending timer still blocked after Close")
	}
	if !r.Cancelled() {
		t.Error("timer pending at Close not reported cancelled")
	}
	if _, err := e.NewTimer(1); !errors.Is(err, ErrClosed) {
		t.Errorf("NewTimer after Close = %v, want ErrClosed", err)
	}
	if err := e.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close = %v, want ErrClosed", err)
	}
}

func TestTimerManyPending(t *testing.T) {
	if testing.Short() {
		testskip.Skip(t, testskip.Short, "arms a million timers")
	}
	e := newEngine(t)
	const n = 1_000_000
	rs := make([]*TimerRequest, n)
	for i := range rs {
		var err error
		if rs[i], err = e.NewTimer(1 + float64(i)*1e-6); err != nil {
			t.Fatal(err)
		}
	}
	if got := e.wheel.Len(); got != n {
		t.Fatalf("wheel holds %d timers, want %d", got, n)
	}
	for _, r := range rs[n/2:] {
		r.Cancel()
	}
	if got := e.wheel.Len(); got != n/2 {
		t.Fatalf("after cancelling half: %d pending", got)
	}
}
