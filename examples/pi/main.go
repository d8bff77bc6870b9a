// Command pi computes π by integrating 4/(1+x²) over [0, 1]: each rank
// sums a strided share of the intervals and Reduce adds the parts up at
// rank 0.
//
//	tachyonrun -n 4 go run ./examples/pi
//	go run ./examples/pi -n 4
//
// docs/getting-started.md shows how to run it as goroutines or as a job.
package main

import (
	"flag"
	"fmt"
	"log"
	"math"

	"github.com/tachyon-hpc/tachyon/mpi"
)

func main() {
	n := flag.Int("n", 4, "ranks to run in-process when not started by a launcher")
	intervals := flag.Int("intervals", 10_000_000, "integration intervals")
	flag.Parse()
	body := func(c *mpi.Comm) error { return pi(c, *intervals) }
	if err := mpi.Main(*n, body); err != nil {
		log.Fatal(err)
	}
}

func pi(c *mpi.Comm, intervals int) error {
	rank, size := c.Rank(), c.Size()
	t0 := mpi.Wtime()
	h := 1.0 / float64(intervals)
	sum := 0.0
	for i := rank; i < intervals; i += size {
		x := h * (float64(i) + 0.5)
		sum += 4 / (1 + x*x)
	}
	total := make([]float64, 1)
	if err := mpi.Reduce(c, []float64{sum * h}, total, mpi.Sum, 0); err != nil || rank != 0 {
		return err
	}
	fmt.Printf("pi ≈ %.15f, error %.2e, %d ranks, %.3f s\n", total[0], math.Abs(total[0]-math.Pi), size, mpi.Wtime()-t0)
	return nil
}
