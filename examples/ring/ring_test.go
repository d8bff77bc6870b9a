package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tachyon-hpc/tachyon/internal/testskip"
)

// TestToolsUnderTachyonrun: the ring, a job of three processes under
// tachyonrun with -profile and -trace, prints each rank's profile at
// Finalize and leaves one merged trace with a track of Sends and Recvs
// per rank, and no rank's file beside it.
func TestToolsUnderTachyonrun(t *testing.T) {
	gocmd, err := exec.LookPath("go")
	if err != nil {
		testskip.Skip(t, testskip.NoGoCommand, "no go command to build tachyonrun and the ring")
	}
	dir := t.TempDir()
	for pkg, out := range map[string]string{
		"github.com/tachyon-hpc/tachyon/cmd/tachyonrun": "tachyonrun",
		"github.com/tachyon-hpc/tachyon/examples/ring":  "ring",
	} {
		if b, err := exec.Command(gocmd, "build", "-o", filepath.Join(dir, out), pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	tracePath := filepath.Join(dir, "ring.json")
	cmd := exec.Command(filepath.Join(dir, "tachyonrun"), "-n", "3", filepath.Join(dir, "ring"), "-laps", "2", "-profile", "-trace", tracePath)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("tachyonrun: %v\n%s", err, out)
	}
	for _, want := range []string{"profile of rank 0:", "profile of rank 1:", "profile of rank 2:", "lap 2: token 6"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	b, err := os.ReadFile(tracePath)
	if err != nil {
		t.Fatal(err)
	}
	var trace struct {
		TraceEvents []struct {
			Name string `json:"name"`
			Ph   string `json:"ph"`
			Tid  *int   `json:"tid"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(b, &trace); err != nil {
		t.Fatalf("the trace is not JSON: %v\n%s", err, b)
	}
	calls := map[int]map[string]int{}
	for _, e := range trace.TraceEvents {
		if e.Ph == "X" && e.Tid != nil {
			if calls[*e.Tid] == nil {
				calls[*e.Tid] = map[string]int{}
			}
			calls[*e.Tid][e.Name]++
		}
	}
	for rank := range 3 {
		if calls[rank]["Send"] == 0 || calls[rank]["Recv"] == 0 {
			t.Errorf("rank %d's track has %v, want Sends and Recvs", rank, calls[rank])
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "ring.*.json")); len(left) > 0 {
		t.Errorf("rank files left after the merge: %v", left)
	}
}
