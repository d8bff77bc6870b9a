//go:build linux

package hwtests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/nethost"
	"github.com/tachyon-hpc/tachyon/internal/testrole"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// Jobs across test hosts: a rank is this test binary, started by MPICH's
// mpiexec into a test host (network namespace, host name, /dev/shm:
// nethost's shim) and playing a role (internal/testrole), the hosts
// made by nictest.Network. The helpers here build mpiexec's MPMD
// arguments, run the job within a limit and check that every rank
// finished.

// needMPICH returns the path of MPICH's mpiexec, or skips the test
// without it.
func needMPICH(t *testing.T) string {
	t.Helper()
	mpiexec, err := exec.LookPath("mpiexec.mpich")
	if err != nil {
		testskip.Skip(t, testskip.NoMPICH, "mpiexec.mpich is not installed (CI installs MPICH)")
	}
	return mpiexec
}

// needHostJobs returns the path of MPICH's mpiexec for a job across test
// hosts, or skips the test without MPICH or without network namespaces.
func needHostJobs(t *testing.T) string {
	t.Helper()
	mpiexec := needMPICH(t)
	if err := nethost.Available(); err != nil {
		testskip.Skip(t, testskip.NoNamespaces, err)
	}
	return mpiexec
}

// hostJob is a job under mpiexec across the hosts of a test network, one
// MPMD block a host: rank r runs role on host r/perHost.
type hostJob struct {
	role    string
	perHost int // ranks on each host; 1 if 0
	// shareHost gives the ranks of each host a segment directory of
	// their own to share (TACHYON_RINGS_SHM_DIR): each rank has a
	// /dev/shm of its own (nethost's shim), and a shared directory makes
	// a host's ranks one host to the engine (HostID), over shared memory.
	shareHost bool
	env       []string                // KEY=VALUE entries for every rank
	hostEnv   func(host int) []string // more for the ranks of host i; nil for none
}

// ranks returns how many ranks the job has on nw.
func (j hostJob) ranks(nw *nethost.Network) int { return len(nw.Hosts) * j.hostRanks() }

func (j hostJob) hostRanks() int { return max(j.perHost, 1) }

// args returns mpiexec's MPMD arguments for the job on nw: each rank
// enters its host through this test binary (the shim) and runs role.
func (j hostJob) args(t *testing.T, nw *nethost.Network) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for i, h := range nw.Hosts {
		if i > 0 {
			args = append(args, ":")
		}
		k, v, _ := strings.Cut(h.EnterEnv(), "=")
		args = append(args, "-n", strconv.Itoa(j.hostRanks()), "-env", k, v, "-env", testrole.Env, j.role)
		var env []string
		if j.shareHost {
			dir := filepath.Join(t.TempDir(), h.Name)
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			env = append(env, "TACHYON_RINGS_SHM_DIR="+dir)
		}
		env = append(env, j.env...)
		if j.hostEnv != nil {
			env = append(env, j.hostEnv(i)...)
		}
		for _, kv := range env {
			k, v, _ := strings.Cut(kv, "=")
			args = append(args, "-env", k, v)
		}
		args = append(args, exe, exe, testrole.NoTests)
	}
	return args
}

// run runs the job on nw under mpiexec (jobCommand: killed at limit) and
// returns its output and how long it took. The test fails if the job
// fails or is killed, or unless every rank r printed done(r, its host's
// name) in the output.
func (j hostJob) run(t *testing.T, mpiexec string, nw *nethost.Network, limit time.Duration, done func(r int, host string) string) (string, time.Duration) {
	t.Helper()
	start := time.Now()
	ctx, cmd := jobCommand(t, limit, mpiexec, j.args(t, nw)...)
	b, err := cmd.CombinedOutput()
	out, took := string(b), time.Since(start).Round(time.Millisecond)
	if ctx.Err() != nil {
		t.Fatalf("killed after %v (limit %v):\n%s", took, limit, out)
	}
	if err != nil {
		t.Fatalf("%v after %v:\n%s", err, took, out)
	}
	for r := range j.ranks(nw) {
		h := nw.Hosts[r/j.hostRanks()].Name
		if line := done(r, h); !strings.Contains(out, line) {
			t.Fatalf("rank %d did not finish on host %s (no %q):\n%s", r, h, line, out)
		}
	}
	return out, took
}

// finished is the line rank r of a job of n ranks prints on host when
// it is done, for the roles that say so ("colls rank 3 of 8 on h1 ok").
func finished(role string, n int) func(r int, host string) string {
	return func(r int, host string) string { return fmt.Sprintf("%s rank %d of %d on %s ok", role, r, n, host) }
}

// pvarRead returns the value of this process's performance variable
// name, for a rank's report, or -1 where it has none.
func pvarRead(name string) int64 {
	v, ok := pvar.Lookup(name)
	if !ok {
		return -1
	}
	return v.Read()
}

// jobCommand returns the command of a job (a launcher and the ranks it
// starts) that never outlives its test: it runs in a process group of its
// own, its context ends at limit or a minute before go test's deadline,
// whichever comes first, and when the context ends, the test fails or
// the test ends, the whole group is killed, the ranks in test hosts
// included (they enter network and mount namespaces, not a PID namespace
// of their own, so the group reaches them). The context says whether
// the deadline ended it.
func jobCommand(t *testing.T, limit time.Duration, name string, args ...string) (context.Context, *exec.Cmd) {
	t.Helper()
	deadline := time.Now().Add(limit)
	if d, ok := t.Deadline(); ok && d.Add(-time.Minute).Before(deadline) {
		deadline = d.Add(-time.Minute)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = os.Environ()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killGroup(cmd) }
	cmd.WaitDelay = 10 * time.Second // output pipes held by a rank that escaped the group
	t.Cleanup(func() {
		cancel()
		killGroup(cmd)
	})
	return ctx, cmd
}

// killGroup kills the process group of cmd's process, if it started.
func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if err == syscall.ESRCH {
		return nil // gone already
	}
	return err
}
