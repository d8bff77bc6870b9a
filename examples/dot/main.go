// Command dot computes the dot product of two vectors spread over the
// ranks, each rank holding a contiguous share, and the norm of the first:
// each rank sums its share's products and Allreduce adds the partial sums
// up on every rank, so that every rank knows the result (as an iterative
// solver's ranks need it to decide whether to go on).
//
//	tachyonrun -n 4 go run ./examples/dot
//	go run ./examples/dot -n 4
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
	length := flag.Int("len", 1_000_000, "length of the vectors")
	flag.Parse()
	if err := mpi.Main(*n, func(c *mpi.Comm) error {
		d, norm, err := dot(c, *length)
		if err == nil && c.Rank() == 0 {
			fmt.Printf("x·y = %.0f, |x| = %.6f, %d ranks\n", d, norm, c.Size())
		}
		return err
	}); err != nil {
		log.Fatal(err)
	}
}

// dot returns x·y and |x| for x[i] = i+1 and y[i] = 1/(i+1) + 1 over
// [0, length), on every rank: the dot product is length + length(length+1)/2.
func dot(c *mpi.Comm, length int) (float64, float64, error) {
	rank, size := c.Rank(), c.Size()
	lo, hi := length*rank/size, length*(rank+1)/size
	var part [2]float64 // x·y and x·x of this rank's share
	for i := lo; i < hi; i++ {
		x, y := float64(i+1), 1/float64(i+1)+1
		part[0] += x * y
		part[1] += x * x
	}
	if err := mpi.Allreduce(c, nil, part[:], mpi.Sum); err != nil {
		return 0, 0, err
	}
	return part[0], math.Sqrt(part[1]), nil
}
