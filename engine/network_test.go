package engine

import (
	"math/rand/v2"
	"testing"
)

// TestNetTimers: the heap of connection timers pops in key order, a
// connection is in it once however often it is armed, and arming it
// earlier moves its key while arming it later does not.
func TestNetTimers(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h netTimers
	conns := make([]*netConn, 64)
	want := map[*netConn]uint64{} // the key each connection in the heap should have
	for i := range conns {
		conns[i] = &netConn{}
	}
	for range 20000 {
		if r.IntN(3) > 0 || len(h.h) == 0 {
			c, at := conns[r.IntN(len(conns))], 1+r.Uint64N(1000)
			h.arm(c, at)
			if k, ok := want[c]; !ok || at < k {
				want[c] = at
			}
		} else {
			top := h.top()
			c := h.pop()
			if c.timerAt != top || want[c] != top {
				t.Fatalf("popped key %d (top %d), want %d", c.timerAt, top, want[c])
			}
			for _, k := range want {
				if k < top {
					t.Fatalf("popped %d with %d still in the heap", top, k)
				}
			}
			delete(want, c)
		}
		if len(h.h) != len(want) {
			t.Fatalf("%d in the heap, want %d", len(h.h), len(want))
		}
		for i, c := range h.h {
			if int(c.hidx) != i+1 {
				t.Fatalf("connection at %d has index %d", i, c.hidx)
			}
		}
	}
}
