// Package testrole lets a test binary re-execute itself as a child process
// that plays a named role instead of running the tests: one rank of a job,
// an echo peer, a process that dies on cue. It is for this module's tests
// only.
//
// The contract:
//
//   - Env names the role. A package's TestMain calls Main, which runs the
//     role when Env is set and the tests when it is not.
//   - Command starts the test binary as a role directly; for a launcher
//     (mpiexec, srun, tachyonrun, launch.Run) a test passes Argv as the
//     program and Env=role in the launcher's environment (Setting, or
//     mpiexec's "-env", Env, role): whatever starts the process, the role is
//     read from the process's environment.
//   - A role process runs no tests: Argv carries NoTests, and Main never
//     calls m.Run when Env is set, whatever the arguments.
//   - The role's function returns the process's exit status; Main exits
//     with it.
package testrole

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// Env is the environment variable whose value is the role a re-executed
// test binary plays. Every package's tests use this one name.
const Env = "TACHYON_TEST_ROLE"

// NoTests is the test binary flag that runs no test, for a re-executed
// binary's command line: a role process is told by Env, not by its
// arguments, but NoTests keeps a binary that misses Env from running the
// whole suite again.
const NoTests = "-test.run=^$"

// Main is the body of a TestMain. If Env names a role it calls run with
// that role and exits the process with run's result; otherwise it runs m's
// tests and exits with their status. It never returns.
func Main(m *testing.M, run func(role string) int) {
	if role := Role(); role != "" {
		os.Exit(run(role))
	}
	os.Exit(m.Run())
}

// Role returns the role this process plays, "" when it runs the tests.
func Role() string { return os.Getenv(Env) }

// Status is an exit status for a role whose work returned err: 0 when err
// is nil; otherwise it prints the role, this process's pid and err on
// standard error and returns 1.
func Status(role string, err error) int {
	if err == nil {
		return 0
	}
	fmt.Fprintf(os.Stderr, "role %s (pid %d): %v\n", role, os.Getpid(), err)
	return 1
}

// Setting returns the environment entry "Env=role", for a launcher's
// environment or a Config.Env.
func Setting(role string) string { return Env + "=" + role }

// Argv returns the command line that re-executes this test binary with no
// tests: its path (os.Args[0]) and NoTests. Append the role's own
// arguments after it.
func Argv() []string { return []string{os.Args[0], NoTests} }

// Command returns a command that runs this test binary as role, with this
// process's environment, then Setting(role), then env (KEY=VALUE entries,
// later ones winning), and extra arguments after Argv. The caller sets
// its output, files and start.
func Command(role string, env []string, args ...string) *exec.Cmd {
	return CommandContext(context.Background(), role, env, args...)
}

// CommandContext is Command with a context that kills the process when it
// is done.
func CommandContext(ctx context.Context, role string, env []string, args ...string) *exec.Cmd {
	argv := append(Argv(), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(append(os.Environ(), Setting(role)), env...)
	return cmd
}
