package trace_test

import (
	"log"

	"github.com/tachyon-hpc/tachyon/mpi"
	"github.com/tachyon-hpc/tachyon/tools/trace"
)

// Tracing a program, run in-process or by a launcher: after Finalize,
// /tmp/job.json holds every rank's calls.
func ExampleInstall() {
	t, err := trace.Install("/tmp/job.json")
	if err != nil {
		log.Fatal(err)
	}
	defer t.Remove()
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
	if err := t.Err(); err != nil {
		log.Fatal(err)
	}
}
