package mpi_test

import (
	"fmt"

	"github.com/tachyon-hpc/tachyon/mpi"
)

// Every rank contributes its rank plus one; every rank gets the sum.
func ExampleAllreduce() {
	mpi.Run(4, func(world *mpi.Comm) error {
		sum := make([]float64, 1)
		if err := mpi.Allreduce(world, []float64{float64(world.Rank() + 1)}, sum, mpi.Sum); err != nil {
			return err
		}
		if world.Rank() == 0 {
			fmt.Println("sum:", sum[0])
		}
		return nil
	})
	// Output: sum: 10
}

// Rank 0's parameters reach every rank; rank 3 gathers what each made
// of them.
func ExampleBcast() {
	mpi.Run(4, func(world *mpi.Comm) error {
		params := make([]int32, 2)
		if world.Rank() == 0 {
			params[0], params[1] = 10, 3
		}
		if err := mpi.Bcast(world, params, 0); err != nil {
			return err
		}
		mine := []int32{params[0] + params[1]*int32(world.Rank())}
		all := make([]int32, world.Size())
		if err := mpi.Gather(world, mine, all, 3); err != nil {
			return err
		}
		if world.Rank() == 3 {
			fmt.Println(all)
		}
		return nil
	})
	// Output: [10 13 16 19]
}

// A nonblocking allreduce overlaps work of the rank's own; its request
// waits with any other.
func ExampleIallreduce() {
	mpi.Run(2, func(world *mpi.Comm) error {
		max := make([]int64, 1)
		req, err := mpi.Iallreduce(world, []int64{int64(7 * world.Rank())}, max, mpi.Max)
		if err != nil {
			return err
		}
		work := 0
		for i := range 1000 { // the rank's own work meanwhile
			work += i
		}
		if _, err := req.Wait(); err != nil {
			return err
		}
		if world.Rank() == 1 {
			fmt.Println("max:", max[0], "work:", work)
		}
		return nil
	})
	// Output: max: 7 work: 499500
}

// A user's operation that is not commutative is applied in rank order:
// here, keep the left operand's value where it is not zero.
func ExampleNewReduceOp() {
	firstNonZero := mpi.NewReduceOp(func(in, inout []int32) {
		for i := range inout {
			if in[i] != 0 {
				inout[i] = in[i]
			}
		}
	}, false)
	mpi.Run(3, func(world *mpi.Comm) error {
		r := int32(world.Rank())
		send := []int32{r, r - 1, 0}
		out := make([]int32, 3)
		if err := mpi.Allreduce(world, send, out, firstNonZero); err != nil {
			return err
		}
		if world.Rank() == 0 {
			fmt.Println(out)
		}
		return nil
	})
	// Output: [1 -1 0]
}
