package mpi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/testring"
	"github.com/tachyon-hpc/tachyon/internal/testrole"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
)

// Jobs under MPICH's Hydra: mpiexec.mpich starts the re-executed test
// binary, whose Init joins the job through PMI.

var _ = scenario("pmi-ring", func(w *Comm) error {
	n, me := w.Size(), w.Rank()
	if want, _ := strconv.Atoi(os.Getenv("MPI_TEST_PMI_N")); n != want {
		return fmt.Errorf("world of %d ranks, want %d", n, want)
	}
	if r := os.Getenv("PMI_RANK"); r != "" && r != strconv.Itoa(me) { // unset in the PMI_PORT model
		return fmt.Errorf("rank %d, PMI_RANK=%s", me, r)
	}
	// Rank 0 unlinked the segment's name once everyone had attached.
	if me == 0 && n > 1 {
		ents, _ := os.ReadDir("/dev/shm")
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), fmt.Sprintf("%s%d-", pmiPrefix, os.Getpid())) {
				return fmt.Errorf("segment %s still linked after Init", e.Name())
			}
		}
	}
	if err := testring.Pass(me, n, func(send []byte, dest int, recv []byte, source int) (int, error) {
		st, err := w.Sendrecv(send, dest, testring.Tag, recv, source, testring.Tag)
		return st.Count, err
	}, w.Barrier); err != nil {
		return err
	}
	fmt.Printf("pmi rank %d of %d ok\n", me, n)
	return nil
})

var _ = scenario("pmi-abort", func(w *Comm) error {
	if w.Rank() == 1 {
		Abort(w, 7)
	}
	_, err := w.Recv(make([]byte, 8), 1, 0) // never sent: ended by the launcher
	return err
})

func runMpiexec(t *testing.T, name string, args ...string) (string, int, time.Duration) {
	t.Helper()
	mpiexec, err := exec.LookPath("mpiexec.mpich")
	if err != nil {
		testskip.Skip(t, testskip.NoMPICH, "mpiexec.mpich not on PATH (apt-get install mpich)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, mpiexec, append(args, testrole.Argv()...)...)
	cmd.Env = append(os.Environ(), testrole.Setting(name), "MPI_TEST_PMI_N="+args[len(args)-1])

	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("mpiexec still running after 2 minutes:\n%s", out.String())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return out.String(), cmd.ProcessState.ExitCode(), time.Since(start)
}

func TestHydraJob(t *testing.T) {
	for _, args := range [][]string{{"-n", "1"}, {"-n", "2"}, {"-n", "4"}, {"-n", "12"}, {"-pmi-port", "-n", "3"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			out, code, _ := runMpiexec(t, "pmi-ring", args...)
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			n, _ := strconv.Atoi(args[len(args)-1])
			for r := 0; r < n; r++ {
				if !strings.Contains(out, fmt.Sprintf("pmi rank %d of %d ok\n", r, n)) {
					t.Fatalf("rank %d did not finish:\n%s", r, out)
				}
			}
		})
	}
}

func TestHydraAbort(t *testing.T) {
	out, code, took := runMpiexec(t, "pmi-abort", "-n", "3")
	if code != 7 {
		t.Fatalf("exit %d, want 7:\n%s", code, out)
	}
	if !strings.Contains(out, `rank=1 reason="Abort(7) called"`) {
		// mpiexec may end the job before it forwards the aborting rank's
		// last line: the exit status is the contract, the line a courtesy.
		t.Logf("abort message not forwarded:\n%s", out)
	}
	if took > 30*time.Second {
		t.Fatalf("took %v: the other ranks were not ended", took)
	}
}

// TestUnjoinable: a process that a launcher Tachyon cannot join started as
// one of several ranks is told so by Init, rather than becoming one of
// several singleton worlds; a task of one, or a batch script, is a
// singleton as before.
func TestUnjoinable(t *testing.T) {
	for _, v := range []string{"SLURM_STEP_NUM_TASKS", "SLURM_PROCID", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", EnvSegment, "PMI_FD", "PMI_PORT"} {
		t.Setenv(v, "")
	}
	for _, tc := range []struct {
		env  []string
		want string // in the error; "" for none
	}{
		{[]string{"SLURM_STEP_NUM_TASKS", "4", "SLURM_PROCID", "2"}, "srun started this process as task 2 of 4 without a PMI-1 connection (PMI_FD is unset): run srun --mpi=pmi2"},
		{[]string{"SLURM_STEP_NUM_TASKS", "1", "SLURM_PROCID", "0"}, ""},
		{[]string{"SLURM_NTASKS", "4", "SLURM_PROCID", "0"}, ""}, // a batch script
		{[]string{"OMPI_COMM_WORLD_SIZE", "2", "OMPI_COMM_WORLD_RANK", "1"}, "Open MPI's mpirun started this process as rank 1 of 2"},
		{[]string{"OMPI_COMM_WORLD_SIZE", "1", "OMPI_COMM_WORLD_RANK", "0"}, ""},
		{[]string{"PMIX_RANK", "3"}, "a PMIx launcher started this process as rank 3"},
	} {
		t.Run(strings.Join(tc.env, "="), func(t *testing.T) {
			for i := 0; i < len(tc.env); i += 2 {
				t.Setenv(tc.env[i], tc.env[i+1])
			}
			err := unjoinable()
			if got := Launched(); got != (tc.want != "") {
				t.Errorf("Launched() = %v", got)
			}
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || ErrorClass(err) != ErrOther {
				t.Fatalf("got %v (class %v), want %q", err, ErrorClass(err), tc.want)
			}
		})
	}
}
