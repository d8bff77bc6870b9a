package main

import (
	"fmt"
	"math"
	"testing"

	"github.com/tachyon-hpc/tachyon/mpi"
)

// TestDot: every rank gets the dot product and the norm, for several
// numbers of ranks.
func TestDot(t *testing.T) {
	const length = 10_000
	wantDot := float64(length + length*(length+1)/2)
	wantNorm := math.Sqrt(float64(length) * (length + 1) * (2*length + 1) / 6)
	for _, n := range []int{1, 2, 3, 5} {
		err := mpi.Run(n, func(c *mpi.Comm) error {
			d, norm, err := dot(c, length)
			if err != nil {
				return err
			}
			if math.Abs(d-wantDot) > 1e-6*wantDot || math.Abs(norm-wantNorm) > 1e-9*wantNorm {
				return fmt.Errorf("rank %d of %d: dot %v, norm %v; want %v, %v", c.Rank(), n, d, norm, wantDot, wantNorm)
			}
			return c.Finalize()
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
