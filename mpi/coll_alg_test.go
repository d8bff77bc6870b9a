package mpi

import (
	"testing"

	"github.com/tachyon-hpc/tachyon/pvar"
)

// TestCollectiveAlgorithms checks that TestCollectives' runs take every
// algorithm: the counters of each rise.
func TestCollectiveAlgorithms(t *testing.T) {
	counters := []*pvar.Counter{pvBcastBinomial, pvBcastScatter, pvAllreduceRD, pvAllreduceRab, pvAllreduceRing,
		pvAllgatherRD, pvAllgatherRing, pvAlltoallBruck, pvAlltoallPairwise}
	before := make([]uint64, len(counters))
	for i, c := range counters {
		before[i] = c.Value()
	}
	for _, low := range []bool{false, true} {
		undo := func() {}
		if low {
			undo = lowThresholds(t)
		}
		for _, n := range []int{3, 4, 6} {
			if err := Run(n, func(c *Comm) error {
				for _, m := range []int{4, 1000} {
					if err := collCheck(c, m); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		undo()
	}
	for i, c := range counters {
		if c.Value() == before[i] {
			t.Errorf("%s did not run", c.Name())
		}
	}
}
