//go:build linux

package hwtests

import (
	"context"
	"fmt"
	"github.com/tachyon-hpc/tachyon/internal/testrole"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestHydraAbortZero: under MPICH's mpiexec (Hydra), a rank's Abort with
// code 0 ends the whole job: the other ranks, blocked in a receive that
// nothing answers, are ended with it, well before the test's deadline.
// (The aborting rank's own line may be lost: Hydra ends its output
// forwarding with the job.)
func TestHydraAbortZero(t *testing.T) {
	ctx, cmd := hydra(t, "-n", "3", "-env", testrole.Env, "abort0", os.Args[0], testrole.NoTests)
	begin := time.Now()
	out, _ := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the job still ran a minute after rank 1's Abort(0):\n%s", out)
	}
	if strings.Contains(string(out), "rank 0 of 3:") || strings.Contains(string(out), "rank 2 of 3:") {
		t.Fatalf("a waiting rank failed rather than being ended:\n%s", out)
	}
	t.Logf("mpiexec exit %d after %v", cmd.ProcessState.ExitCode(), time.Since(begin).Round(time.Millisecond))
}

// TestHydraAppNum: under an MPMD mpiexec each block's ranks read their
// block's number in the MPI_APPNUM attribute, and MPI_UNIVERSE_SIZE is
// at least the world.
func TestHydraAppNum(t *testing.T) {
	_, cmd := hydra(t, "-n", "1", "-env", testrole.Env, "appnum", os.Args[0], testrole.NoTests,
		":", "-n", "2", "-env", testrole.Env, "appnum", os.Args[0], testrole.NoTests)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	for r, a := range []int{0, 1, 1} {
		if !strings.Contains(string(out), fmt.Sprintf("rank %d appnum %d universe ", r, a)) {
			t.Fatalf("rank %d does not say appnum %d:\n%s", r, a, out)
		}
	}
	if strings.Contains(string(out), "universe 1\n") || strings.Contains(string(out), "universe 2\n") {
		t.Fatalf("a universe smaller than the world:\n%s", out)
	}
}

// hydra returns an mpiexec.mpich command with args, its process group
// killed after a minute or when the test ends (the context says whether
// the minute ended it: jobCommand), or skips the test without MPICH.
func hydra(t *testing.T, args ...string) (context.Context, *exec.Cmd) {
	t.Helper()
	return jobCommand(t, time.Minute, needMPICH(t), args...)
}
