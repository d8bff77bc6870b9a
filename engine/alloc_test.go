package engine

import (
	"github.com/tachyon-hpc/tachyon/internal/testskip"
	"testing"
)

// TestEagerAllocs guards the message path: once warm, an eager send and
// its receive allocate nothing, whether the receive was posted first or
// the message waited in the unexpected queue, blocking or not.
func TestEagerAllocs(t *testing.T) {
	if raceEnabled {
		testskip.Skip(t, testskip.RaceDetector, "the race detector allocates")
	}
	w, err := NewWorld(1)
	if err != nil {
		t.Fatal(err)
	}
	ep := w.Endpoint(0)
	defer ep.Close()
	buf := make([]byte, 8)
	big := make([]byte, 4000) // several cells
	cases := map[string]func(){
		"send-recv": func() {
			ep.Send(buf, 0, 1, 0, Standard)
			ep.Recv(buf, 0, 1, 0)
		},
		"irecv-send-wait": func() {
			r, _ := ep.Irecv(buf, 0, 2, 0)
			ep.Send(buf, 0, 2, 0, Standard)
			r.Wait()
		},
		"isend-recv": func() {
			r, _ := ep.Isend(buf, 0, 3, 0, Standard)
			ep.Recv(buf, 0, 3, 0)
			r.Wait()
		},
		"isendnow-recv": func() {
			isendNow(ep, buf, 0, 6, 0, Standard)
			ep.Recv(buf, 0, 6, 0)
		},
		"multi-cell": func() {
			ep.Send(big, 0, 4, 0, Standard)
			ep.Recv(big, 0, 4, 0)
		},
		"wildcard": func() {
			r, _ := ep.Irecv(buf, AnySource, AnyTag, 0)
			ep.Send(buf, 0, 5, 0, Standard)
			r.Wait()
		},
	}
	for name, f := range cases {
		for i := 0; i < 100; i++ {
			f()
		}
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s: %v allocations per message", name, n)
		}
	}
}
