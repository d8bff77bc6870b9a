package profile_test

import (
	"log"
	"os"

	"github.com/tachyon-hpc/tachyon/examples/profile"
	"github.com/tachyon-hpc/tachyon/mpi"
)

// Profiling a program: each rank's table goes to standard error when it
// finalizes.
func ExampleInstall() {
	remove, err := profile.Install(os.Stderr)
	if err != nil {
		log.Fatal(err)
	}
	defer remove()
	err = mpi.Main(2, func(world *mpi.Comm) error {
		buf := make([]byte, 1024)
		if world.Rank() == 0 {
			return world.Send(buf, 1, 0)
		}
		_, err := world.Recv(buf, 0, 0)
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
}
