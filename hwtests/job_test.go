//go:build linux

package hwtests

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

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
