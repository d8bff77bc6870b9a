package trace_test

import (
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"

	"github.com/tachyon-hpc/tachyon/mpi"
	"github.com/tachyon-hpc/tachyon/tools/trace"
)

// Tracing a program, run in-process or by a launcher: after Finalize, the
// file holds every rank's calls, a track per rank, which Perfetto opens.
// The example reads the trace back and prints each call with its track.
func ExampleInstall() {
	dir, err := os.MkdirTemp("", "trace-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "job.json")

	t, err := trace.Install(path)
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

	b, err := os.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	var tr struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Ph   string         `json:"ph"`
			Tid  int            `json:"tid"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(b, &tr); err != nil {
		log.Fatal(err)
	}
	var calls []string
	for _, e := range tr.TraceEvents {
		if e.Ph == "X" {
			calls = append(calls, fmt.Sprintf("rank %d: %s %v bytes", e.Tid, e.Name, e.Args["bytes"]))
		}
	}
	slices.Sort(calls)
	for _, c := range calls {
		fmt.Println(c)
	}
	// Output:
	// rank 0: Send 1024 bytes
	// rank 1: Recv 1024 bytes
}
