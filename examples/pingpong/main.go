// Command pingpong times a message bouncing between ranks 0 and 1.
//
//	tachyonrun -n 2 go run ./examples/pingpong
//	go run ./examples/pingpong          # two goroutine ranks
//
// docs/getting-started.md shows how to run it as goroutines or as a job.
package main

import (
	"flag"
	"fmt"
	"log"

	"github.com/tachyon-hpc/tachyon/mpi"
)

func main() {
	size := flag.Int("size", 8, "message size in bytes")
	iters := flag.Int("iters", 10000, "round trips")
	flag.Parse()
	body := func(c *mpi.Comm) error { return pingpong(c, *size, *iters) }
	if err := mpi.Main(2, body); err != nil {
		log.Fatal(err)
	}
}

func pingpong(c *mpi.Comm, size, iters int) error {
	if c.Size() < 2 {
		return fmt.Errorf("needs at least 2 ranks")
	}
	buf := make([]byte, size)
	if err := c.Barrier(); err != nil {
		return err
	}
	t0 := mpi.Wtime()
	for i := 0; i < iters; i++ {
		switch c.Rank() {
		case 0:
			if err := c.Send(buf, 1, 0); err != nil {
				return err
			}
			if _, err := c.Recv(buf, 1, 0); err != nil {
				return err
			}
		case 1:
			if _, err := c.Recv(buf, 0, 0); err != nil {
				return err
			}
			if err := c.Send(buf, 0, 0); err != nil {
				return err
			}
		}
	}
	if c.Rank() == 0 {
		fmt.Printf("%d bytes: %.3f us one way\n", size, (mpi.Wtime()-t0)*1e6/float64(2*iters))
	}
	return nil
}
