// Command hello is Tachyon's first program: every rank sends its rank to
// rank 0, which prints one line per rank, in rank order. Started alone it
// runs four goroutine ranks (mpi.Main calls mpi.Run); under a launcher it
// is one process's rank of the job (see the README).
//
// The README shows it, and docs/getting-started.md goes on from it.
package main

import (
	"fmt"
	"log"

	"github.com/tachyon-hpc/tachyon/mpi"
)

func main() {
	err := mpi.Main(4, func(world *mpi.Comm) error {
		if world.Rank() != 0 {
			return world.Send([]byte{byte(world.Rank())}, 0, 0)
		}
		buf := make([]byte, 1)
		for src := 1; src < world.Size(); src++ {
			if _, err := world.Recv(buf, src, 0); err != nil {
				return err
			}
			fmt.Printf("rank 0 of %d heard from rank %d\n", world.Size(), buf[0])
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}
