package mpi1

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/testrole"
	"github.com/tachyon-hpc/tachyon/launch"
	"github.com/tachyon-hpc/tachyon/mpi"
)

// Each scenario runs twice: as an in-process world (mpi.Run, each rank a
// goroutine with its own Proc) and as a job of processes started by
// launch.Run, the library behind tachyonrun, the test binary re-executed
// once per rank (internal/testrole) with the scenario as its role. A
// process rank calls mpi.Init, makes its Proc over mpi.World(), runs the
// scenario and Finalizes.

var (
	scenariosMu sync.Mutex
	scenarios   = map[string]func(p *Proc) error{}
)

func TestMain(m *testing.M) { testrole.Main(m, runRole) }

// runRole plays one rank of scenario name in a job of processes.
func runRole(name string) int {
	fn := scenarios[name]
	if fn == nil {
		fmt.Fprintf(os.Stderr, "unknown scenario %q\n", name)
		return 2
	}
	if err := mpi.Init(); err != nil {
		return testrole.Status(name, err)
	}
	rank := mpi.World().Rank()
	err := runRank(mpi.World(), fn)
	if ferr := mpi.Finalize(); err == nil {
		err = ferr
	}
	if err != nil {
		err = fmt.Errorf("rank %d: %w", rank, err)
	}
	return testrole.Status(name, err)
}

// runRank runs fn on a Proc over c and frees it.
func runRank(c *mpi.Comm, fn func(p *Proc) error) error {
	p, err := New(c)
	if err != nil {
		return err
	}
	err = fn(p)
	if err == errFreed {
		return nil
	}
	if ferr := p.Free(); err == nil {
		err = ferr
	}
	return err
}

// errFreed is what a scenario that freed its Proc itself returns when
// it succeeded.
var errFreed = errors.New("the scenario freed its Proc")

// scenario registers fn under name, for both.
func scenario(name string, fn func(p *Proc) error) string {
	scenariosMu.Lock()
	defer scenariosMu.Unlock()
	scenarios[name] = fn
	return name
}

// both runs scenario name on n ranks in-process and as processes.
func both(t *testing.T, n int, name string) {
	t.Helper()
	fn := scenarios[name]
	t.Run("inproc", func(t *testing.T) {
		if err := mpi.Run(n, func(c *mpi.Comm) error {
			if err := runRank(c, fn); err != nil {
				return fmt.Errorf("rank %d: %w", c.Rank(), err)
			}
			return c.Finalize()
		}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("processes", func(t *testing.T) { runProcesses(t, n, name) })
}

// runProcesses runs scenario name as a job of n processes.
func runProcesses(t *testing.T, n int, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out testrole.Output
	argv := testrole.Argv()
	code, err := launch.Run(ctx, launch.Config{
		N: n, Program: argv[0], Args: argv[1:],
		Env:    []string{testrole.Setting(name)},
		Prefix: true, Stdout: &out, Stderr: &out,
	})
	if err != nil || code != 0 {
		t.Fatalf("job of %d: exit %d, %v\n%s", n, code, err, out.String())
	}
}

// expect checks that a call returned want with error status code.
func expect(p *Proc, what string, got, want, code int) error {
	if got != want || p.ERROR() != code {
		return fmt.Errorf("%s = %d with ERROR %d (%s; cause %v), want %d with ERROR %d",
			what, got, p.ERROR(), ETEXT(p.ERROR()), p.Cause(), want, code)
	}
	return nil
}

// fails checks that a call returned -1 with error status code.
func fails(p *Proc, what string, got, code int) error { return expect(p, what, got, -1, code) }

// first returns the first non-nil error.
func first(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
