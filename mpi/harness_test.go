package mpi

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/engine"
	"github.com/tachyon-hpc/tachyon/internal/testrole"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
	"github.com/tachyon-hpc/tachyon/rings"
)

// Facade tests run each scenario twice: as an in-process world (Run) and
// as a job of processes over shared memory, the test binary re-executed
// once per rank (internal/testrole) with the launcher's environment
// variables and the scenario as its role. A process rank calls Init, runs
// the scenario on World, and Finalizes.

// threadEnv, if set, makes a process rank call InitThread with that level
// instead of Init, and check what it provides.
const threadEnv = "MPI_TEST_THREAD"

var (
	scenariosMu sync.Mutex
	scenarios   = map[string]func(*Comm) error{}
)

func TestMain(m *testing.M) { testrole.Main(m, runScenarioProcess) }

func runScenarioProcess(name string) int {
	if svc := serviceRoles[name]; svc != nil {
		return svc() // a process started on its own: no launcher, no Init
	}
	fn := scenarios[name]
	if fn == nil {
		fmt.Fprintf(os.Stderr, "unknown scenario %q\n", name)
		return 2
	}
	if os.Getenv("MPI_TEST_WTIME_EARLY") != "" && os.Getenv(EnvRank) == "1" {
		Wtime() // the clock starts now, on its own, not as the job's
	}
	if lv := os.Getenv(threadEnv); lv != "" {
		n, _ := strconv.Atoi(lv)
		want := ThreadLevel(n)
		got, err := InitThread(want)
		if err != nil {
			fmt.Fprintln(os.Stderr, "InitThread:", err)
			return 1
		}
		if q, err := QueryThread(); got != want || q != want || err != nil {
			fmt.Fprintf(os.Stderr, "InitThread(%v) provided %v, QueryThread %v (%v)\n", want, got, q, err)
			return 1
		}
	} else if err := Init(); err != nil {
		fmt.Fprintln(os.Stderr, "Init:", err)
		return 1
	}
	if err := fn(World()); err == errFinalized {
		return 0
	} else if err != nil {
		fmt.Fprintf(os.Stderr, "rank %d: %v\n", World().Rank(), err)
		return 1
	}
	if err := Finalize(); err != nil {
		fmt.Fprintf(os.Stderr, "rank %d: Finalize: %v\n", World().Rank(), err)
		return 1
	}
	return 0
}

// scenario registers fn under name; every test that uses it runs it with
// both kinds of world.
func scenario(name string, fn func(*Comm) error) string {
	scenariosMu.Lock()
	defer scenariosMu.Unlock()
	scenarios[name] = fn
	return name
}

// both runs scenario name on n ranks in-process and across processes,
// the processes with the KEY=VALUE entries env added to their
// environment.
func both(t *testing.T, n int, name string, env ...string) {
	t.Helper()
	fn := scenarios[name]
	t.Run("inproc", func(t *testing.T) {
		if err := Run(n, func(c *Comm) error {
			if err := fn(c); err != nil {
				return err
			}
			return c.Finalize()
		}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("processes", func(t *testing.T) { runProcesses(t, n, name, env...) })
}

// runProcesses runs scenario name as a job of n processes.
func runProcesses(t *testing.T, n int, name string, extraEnv ...string) {
	t.Helper()
	seg := fmt.Sprintf("tachyon-mpi-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	s, err := engine.CreateShmJob(seg, n)
	if errors.Is(err, rings.ErrUnsupported) {
		testskip.Skip(t, testskip.NoSharedMemory, "no shared memory:", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Remove(); s.Close() }()
	cmds := make([]*exec.Cmd, n)
	outs := make([]*testrole.Output, n)
	for r := range cmds {
		cmd := testrole.Command(name, append([]string{EnvSegment + "=" + seg,
			EnvRank + "=" + strconv.Itoa(r), EnvSize + "=" + strconv.Itoa(n)}, extraEnv...))
		outs[r] = &testrole.Output{}
		cmd.Stdout, cmd.Stderr = outs[r], outs[r]

		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[r] = cmd
	}
	done := make(chan struct{})
	timer := time.AfterFunc(2*time.Minute, func() {
		for _, c := range cmds {
			c.Process.Kill()
		}
		close(done)
	})
	defer timer.Stop()
	for r, c := range cmds {
		if err := c.Wait(); err != nil {
			select {
			case <-done:
				t.Errorf("rank %d killed after 2 minutes:\n%s", r, outs[r].String())
			default:
				t.Errorf("rank %d: %v\n%s", r, err, outs[r].String())
			}
		}
	}
}
