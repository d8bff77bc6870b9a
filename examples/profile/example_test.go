package profile_test

import (
	"bytes"
	"fmt"
	"log"
	"regexp"
	"slices"
	"strings"

	"github.com/tachyon-hpc/tachyon/examples/profile"
	"github.com/tachyon-hpc/tachyon/mpi"
)

// Profiling a program: each rank's table is written when it finalizes
// (to os.Stderr, say; here to a buffer). The ranks of this world finalize
// in either order and the times differ from run to run, so the example
// prints the tables by rank with their times left out.
func ExampleInstall() {
	var out bytes.Buffer
	remove, err := profile.Install(&out)
	if err != nil {
		log.Fatal(err)
	}
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
	if err := remove(); err != nil {
		log.Fatal(err)
	}
	tables := strings.Split(strings.TrimSpace(out.String()), "\n\n")
	slices.Sort(tables)
	times := regexp.MustCompile(` +[0-9.]+(ns|µs|ms|s)\b`)
	fmt.Println(times.ReplaceAllString(strings.Join(tables, "\n\n"), " (time)"))
	// Output:
	// profile of rank 0: 1 calls, (time) in MPI
	//   operation               calls            bytes           time
	//   Send                        1             1024 (time)
	//   communicator         peer       sent     sent_bytes   received received_bytes
	//   MPI_COMM_WORLD          1          1           1024          0              0
	//
	// profile of rank 1: 1 calls, (time) in MPI
	//   operation               calls            bytes           time
	//   Recv                        1             1024 (time)
	//   communicator         peer       sent     sent_bytes   received received_bytes
	//   MPI_COMM_WORLD          0          0              0          1           1024
}
