package testrole

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestMain(m *testing.M) {
	Main(m, func(role string) int {
		switch role {
		case "exit3":
			return 3
		case "echo": // prints its role, a variable and its arguments
			fmt.Printf("role=%s extra=%s args=%q\n", Role(), os.Getenv("TESTROLE_EXTRA"), os.Args[1:])
			return 0
		case "fail":
			return Status(role, errors.New("on cue"))
		case "ok":
			return Status(role, nil)
		}
		fmt.Fprintf(os.Stderr, "unknown role %q\n", role)
		return 2
	})
}

// TestCommandRunsRole: the child runs the role, not the tests, and sees
// the role, the extra environment and the extra arguments.
func TestCommandRunsRole(t *testing.T) {
	out, err := Command("echo", []string{"TESTROLE_EXTRA=yes"}, "a b", "c").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("role=echo extra=yes args=%q\n", []string{NoTests, "a b", "c"})
	if string(out) != want {
		t.Fatalf("output %q, want %q", out, want)
	}
}

// TestExitStatus: Main exits with the role's status; Status maps an error
// to 1 with a line naming the role, nil to 0.
func TestExitStatus(t *testing.T) {
	for _, tc := range []struct {
		role string
		code int
		err  string
	}{{"exit3", 3, ""}, {"fail", 1, "role fail (pid "}, {"ok", 0, ""}, {"nonesuch", 2, `unknown role "nonesuch"`}} {
		cmd := Command(tc.role, nil)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if code := cmd.ProcessState.ExitCode(); code != tc.code || (err != nil && !errors.As(err, &ee)) {
			t.Errorf("%s: exit %d (%v), want %d", tc.role, code, err, tc.code)
		}
		if !strings.Contains(stderr.String(), tc.err) {
			t.Errorf("%s: stderr %q does not say %q", tc.role, stderr.String(), tc.err)
		}
	}
}

// TestLaunchedThroughEnvironment: a process started by something else
// (here the plain exec package, as a launcher would) with Setting in its
// environment plays the role.
func TestLaunchedThroughEnvironment(t *testing.T) {
	argv := Argv()
	if argv[0] != os.Args[0] || argv[1] != NoTests || len(argv) != 2 {
		t.Fatalf("Argv() = %q", argv)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), Setting("exit3"))
	if err := cmd.Run(); cmd.ProcessState.ExitCode() != 3 {
		t.Fatalf("exit %d (%v), want 3", cmd.ProcessState.ExitCode(), err)
	}
	if Setting("x") != Env+"=x" {
		t.Fatalf("Setting(x) = %q", Setting("x"))
	}
}

// TestRoleEmptyInTests: the test process itself plays no role.
func TestRoleEmptyInTests(t *testing.T) {
	if Role() != "" {
		t.Fatalf("Role() = %q in the test process", Role())
	}
}
