package engine

import (
	"testing"

	"github.com/tachyon-hpc/tachyon/internal/testcvar"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
)

// TestNetScaleAllocs: in a job of 64 ranks whose rank 0 talks to rank 1
// alone, an empty poll and a warm round trip allocate nothing, and only
// the connections that carried frames have begun (their windows made).
func TestNetScaleAllocs(t *testing.T) {
	if raceEnabled {
		testskip.Skip(t, testskip.RaceDetector, "the race detector allocates")
	}
	testcvar.Set(t, "nic_drop_rate", "0") // a lost frame makes a wait park, and parking may allocate
	a, z := scaleJob(t, 64)
	buf := make([]byte, 8)
	round := roundTrip(a, z, buf)
	for range 200 {
		round()
	}
	if n := testing.AllocsPerRun(1000, round); n != 0 {
		t.Errorf("%v allocations per round trip", n)
	}
	if n := testing.AllocsPerRun(1000, func() { a.Poll() }); n != 0 {
		t.Errorf("%v allocations per empty poll", n)
	}
	a.lock()
	defer a.unlock()
	if len(a.net.live) != 1 || a.net.live[0].rank != 1 {
		t.Errorf("rank 0 began %d connections, want the one to rank 1", len(a.net.live))
	}
	for r, c := range a.net.conns {
		if c != nil && r != 1 && c.tx != nil {
			t.Errorf("rank 0's connection to rank %d, which carried nothing, has its windows", r)
		}
	}
	if len(a.net.work) != 0 || len(a.net.ready) != 0 {
		t.Errorf("idle, rank 0 has %d connections with work, %d with packets ready", len(a.net.work), len(a.net.ready))
	}
}
