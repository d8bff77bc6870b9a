package progress

import (
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/testcvar"
)

// TestOversubscribed: an oversubscribed engine has no spin phase, unless
// WithIdle gives the phases; its yield phase still ends at progress_pause.
func TestOversubscribed(t *testing.T) {
	for _, c := range []struct {
		opts []Option
		spin bool
	}{
		{nil, true},
		{[]Option{WithOversubscribed(false)}, true},
		{[]Option{WithOversubscribed(true)}, false},
		{[]Option{WithOversubscribed(true), WithIdle(time.Millisecond, time.Millisecond, time.Second)}, true},
	} {
		e := newEngine(t, c.opts...)
		if got := e.spinC > 0; got != c.spin || e.parkC <= e.spinC {
			t.Errorf("%d options: spin phase %v (%d counts, parks at %d), want %v", len(c.opts), got, e.spinC, e.parkC, c.spin)
		}
	}
}

// TestOversubscribedYield: an oversubscribed engine yields its thread at
// every poll of the yield phase, others every progress_yield_every polls,
// and both as progress_yield_every says once it is set.
func TestOversubscribedYield(t *testing.T) {
	if e := newEngine(t); e.yieldEvery != 16 {
		t.Errorf("yields every %d polls, want 16", e.yieldEvery)
	}
	if e := newEngine(t, WithOversubscribed(true)); e.yieldEvery != 1 {
		t.Errorf("oversubscribed: yields every %d polls, want 1", e.yieldEvery)
	}
	testcvar.Set(t, "progress_yield_every", "4")
	for _, over := range []bool{false, true} {
		if e := newEngine(t, WithOversubscribed(over)); e.yieldEvery != 4 {
			t.Errorf("progress_yield_every 4, oversubscribed %v: yields every %d polls", over, e.yieldEvery)
		}
	}
}
