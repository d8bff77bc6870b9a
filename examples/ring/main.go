// Command ring passes a token around every rank of the world a few times.
//
// As a job of processes:
//
//	tachyonrun -n 4 go run ./examples/ring
//
// or, without a launcher, as goroutines of one process:
//
//	go run ./examples/ring -n 4
//
// Either way, -profile prints a profile of each rank's calls at the end
// (package examples/profile), and -trace FILE writes a Chrome/Perfetto
// trace of the job to FILE (package tools/trace):
//
//	tachyonrun -n 4 go run ./examples/ring -profile
//	tachyonrun -n 4 go run ./examples/ring -trace /tmp/ring.json
//	go run ./examples/ring -n 4 -profile -trace /tmp/ring.json
//
// docs/getting-started.md shows how to run it as goroutines or as a job.
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"log"
	"os"

	"github.com/tachyon-hpc/tachyon/examples/profile"
	"github.com/tachyon-hpc/tachyon/mpi"
	"github.com/tachyon-hpc/tachyon/tools/trace"
)

func main() {
	n := flag.Int("n", 4, "ranks to run in-process when not started by a launcher")
	laps := flag.Int("laps", 3, "times the token goes around")
	prof := flag.Bool("profile", false, "print a profile of each rank's calls on standard error at the end")
	traceFile := flag.String("trace", "", "write a Chrome/Perfetto trace of the job to `file`")
	flag.Parse()
	if *prof {
		remove, err := profile.Install(os.Stderr)
		if err != nil {
			log.Fatal(err)
		}
		defer remove()
	}
	var tr *trace.Tracer
	if *traceFile != "" {
		var err error
		if tr, err = trace.Install(*traceFile); err != nil {
			log.Fatal(err)
		}
		defer tr.Remove()
	}
	if err := mpi.Main(*n, func(world *mpi.Comm) error { return ring(world, *laps) }); err != nil {
		log.Fatal(err)
	}
	if tr != nil {
		if err := tr.Err(); err != nil {
			log.Fatal(err)
		}
	}
}

// ring sends a counter from rank 0 around the ring laps times; each rank
// adds one.
func ring(c *mpi.Comm, laps int) error {
	rank, size := c.Rank(), c.Size()
	next, prev := (rank+1)%size, (rank-1+size)%size
	buf := make([]byte, 8)
	if rank == 0 {
		if err := c.Send(buf, next, 0); err != nil {
			return err
		}
	}
	for lap := 0; lap < laps; lap++ {
		if _, err := c.Recv(buf, prev, 0); err != nil {
			return err
		}
		v := binary.LittleEndian.Uint64(buf) + 1
		binary.LittleEndian.PutUint64(buf, v)
		if rank == 0 {
			fmt.Printf("lap %d: token %d\n", lap+1, v)
			if lap == laps-1 {
				return nil
			}
		}
		if err := c.Send(buf, next, 0); err != nil {
			return err
		}
	}
	return nil
}
