package progress

import (
	"testing"
	"time"
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
