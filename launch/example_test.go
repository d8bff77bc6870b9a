package launch_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"slices"
	"strings"

	"github.com/tachyon-hpc/tachyon/launch"
)

// A job of three processes, as tachyonrun -n 3 starts it: each rank learns
// its place from TACHYON_RANK and TACHYON_SIZE (mpi.Init reads them), and
// Run returns the job's exit status once every rank has exited. Here the
// ranks are a shell that prints them; the lines come in any order.
func Example() {
	var out bytes.Buffer
	code, err := launch.Run(context.Background(), launch.Config{
		N:       3,
		Program: "sh",
		Args:    []string{"-c", `echo "rank $TACHYON_RANK of $TACHYON_SIZE"`},
		Stdout:  &out,
	})
	if err != nil {
		log.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	slices.Sort(lines)
	fmt.Println(strings.Join(lines, "\n"))
	fmt.Println("exit status", code)
	// Output:
	// rank 0 of 3
	// rank 1 of 3
	// rank 2 of 3
	// exit status 0
}
