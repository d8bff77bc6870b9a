package progress

import (
	"github.com/tachyon-hpc/tachyon/pvar"
	"testing"
	"time"
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
