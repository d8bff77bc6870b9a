package mpit_test

import (
	"fmt"
	"log"

	"github.com/tachyon-hpc/tachyon/mpi"
	"github.com/tachyon-hpc/tachyon/mpit"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// Listing every control variable, as MPI-3.1's Example 14.4 means to: an
// index below CvarNum is always valid, so any error ends the loop.
func ExampleCvarInfo() {
	if err := mpit.Init(); err != nil {
		log.Fatal(err)
	}
	defer mpit.Finalize()
	n, err := mpit.CvarNum()
	if err != nil {
		log.Fatal(err)
	}
	for i := range n {
		d, err := mpit.CvarInfo(i)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s (%s, %s): %s\n", d.Name, d.Datatype, d.Scope, d.Desc)
	}
}

// Counting the messages one rank sends with the rendezvous protocol during
// a phase of the program, in a session of the tool's own. The variable is
// bound to a communicator: a handle bound to a rank's World reads that
// rank's count, here in a world of two goroutine ranks.
func ExampleSession() {
	mpit.Init()
	defer mpit.Finalize()
	i, err := mpit.PvarIndex("engine_rendezvous", pvar.ClassCounter)
	if err != nil {
		log.Fatal(err)
	}
	err = mpi.Run(2, func(world *mpi.Comm) error {
		s, err := mpit.NewSession()
		if err != nil {
			return err
		}
		defer s.Free()
		h, _, err := s.HandleAlloc(i, world)
		if err != nil {
			return err
		}
		s.Start(h)                 // a counter's handle starts stopped
		big := make([]byte, 1<<20) // above engine_eager_limit
		if world.Rank() == 0 {
			err = world.Send(big, 1, 0)
		} else {
			_, err = world.Recv(big, 0, 0)
		}
		if err != nil {
			return err
		}
		s.Stop(h)
		n, err := s.Read(h)
		if err != nil {
			return err
		}
		if world.Rank() == 0 {
			fmt.Println(n, "rendezvous message sent by rank 0")
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: 1 rendezvous message sent by rank 0
}
