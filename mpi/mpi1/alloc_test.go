package mpi1

import (
	"testing"

	"github.com/tachyon-hpc/tachyon/internal/testskip"
	"github.com/tachyon-hpc/tachyon/mpi"
)

// TestBlockingAllocs: a blocking CSEND and CRECV, contiguous, allocate
// nothing, as the facade's Send and Recv do not (CSEND to itself, which
// a short message completes at once); nor does PROBE.
func TestBlockingAllocs(t *testing.T) {
	if raceEnabled {
		testskip.Skip(t, testskip.RaceDetector, "the race detector allocates")
	}
	err := mpi.Run(1, func(c *mpi.Comm) error {
		return runRank(c, func(p *Proc) error {
			buf := make([]byte, 64)
			in := make([]byte, 64)
			allocs := testing.AllocsPerRun(500, func() {
				if p.CSEND(Blocking, buf, 0, 3, 64) != 64 || p.CRECV(Blocking, in, 0, 3, 64) != 64 {
					t.Fatalf("ERROR %d", p.ERROR())
				}
			})
			if allocs != 0 {
				t.Errorf("a blocking CSEND and CRECV allocate %v times", allocs)
			}
			// Nor do a probe, wildcards and the queries.
			allocs = testing.AllocsPerRun(500, func() {
				p.CSEND(Blocking, buf, 0, 3, 64)
				for p.PROBE(-1, -1) < 0 { // until it has arrived
				}
				if p.INFOL() != 64 || p.CRECV(Blocking, in, -1, -1, 64) != 64 || p.INFOS() != 0 || p.INFOT() != 3 {
					t.Fatalf("ERROR %d", p.ERROR())
				}
			})
			if allocs != 0 {
				t.Errorf("a PROBE and a wildcard CRECV allocate %v times", allocs)
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}
