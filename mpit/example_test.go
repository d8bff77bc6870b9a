package mpit_test

import (
	"fmt"
	"log"

	"github.com/tachyon-hpc/tachyon/mpit"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// Listing every control variable, as the seed's Example 14.4 means to: an
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

// Counting the messages sent with the rendezvous protocol during a phase
// of the program, in a session of the tool's own.
func ExampleSession() {
	mpit.Init()
	defer mpit.Finalize()
	s, err := mpit.NewSession()
	if err != nil {
		log.Fatal(err)
	}
	defer s.Free()
	i, err := mpit.PvarIndex("engine_rendezvous", pvar.ClassCounter)
	if err != nil {
		log.Fatal(err)
	}
	h, _, err := s.HandleAlloc(i, nil)
	if err != nil {
		log.Fatal(err)
	}
	s.Start(h) // a counter's handle starts stopped
	// ... the phase ...
	s.Stop(h)
	n, err := s.Read(h)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(n, "rendezvous messages in the phase")
	// Output: 0 rendezvous messages in the phase
}
