//go:build unix

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/testrole"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
	"github.com/tachyon-hpc/tachyon/launch"
	"github.com/tachyon-hpc/tachyon/mpi"
)

// The job's program is the test binary itself: TestMain runs the role
// (internal/testrole; tachyonrun passes the role's variable on to the
// ranks) instead of the tests.
func TestMain(m *testing.M) { testrole.Main(m, runRole) }

func runRole(role string) int {
	rank, _ := strconv.Atoi(os.Getenv(launch.EnvRank))
	switch role {
	case "hello": // a tiny MPI program: rank 0 sends every rank its greeting
		if err := mpi.Init(); err != nil {
			fmt.Fprintln(os.Stderr, "Init:", err)
			return 1
		}
		w := mpi.World()
		me, size := w.Rank(), w.Size()
		if me == 0 {
			for r := 1; r < size; r++ {
				if err := w.Send([]byte(fmt.Sprintf("hello %d", r)), r, 0); err != nil {
					fmt.Fprintln(os.Stderr, "Send:", err)
					return 1
				}
			}
			fmt.Printf("rank 0 of %d args %q\n", size, os.Args[2:])
		} else {
			buf := make([]byte, 32)
			st, err := w.Recv(buf, 0, 0)
			if err != nil {
				fmt.Fprintln(os.Stderr, "Recv:", err)
				return 1
			}
			fmt.Printf("rank %d of %d got %q\n", me, size, buf[:st.Count])
		}
		if err := mpi.Finalize(); err != nil {
			fmt.Fprintln(os.Stderr, "Finalize:", err)
			return 1
		}
		return 0
	case "fail": // rank 1 exits with 3, the others wait
		if rank == 1 {
			return 3
		}
		time.Sleep(2 * time.Minute)
		return 0
	case "sleep":
		fmt.Printf("pid %d\n", os.Getpid())
		time.Sleep(2 * time.Minute)
		return 0
	case "affinity":
		cpus, err := launch.AllowedCPUs()
		if err != nil {
			fmt.Fprintln(os.Stderr, "AllowedCPUs:", err)
			return 1
		}
		fmt.Printf("rank %d cpus %d\n", rank, len(cpus))
		for _, c := range cpus {
			fmt.Printf("rank %d on %d\n", rank, c)
		}
		return 0
	}
	fmt.Fprintln(os.Stderr, "unknown role", role)
	return 2
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// tachyonrun builds the command into a temporary directory once.
func tachyonrun(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tachyonrun-test")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "tachyonrun")
		goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, err := os.Stat(goTool); err != nil {
			goTool = "go"
		}
		out, err := exec.Command(goTool, "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// runCmd runs tachyonrun with args, the test binary's role in its
// environment, and returns its exit status and output.
func runCmd(t *testing.T, role string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(tachyonrun(t), args...)
	cmd.Env = append(os.Environ(), testrole.Setting(role))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	timer := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() })
	defer timer.Stop()
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

func TestHello(t *testing.T) {
	code, out, errs := runCmd(t, "hello", "-n", "3", "-prefix", "--", os.Args[0], testrole.NoTests, "x y")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{`[0] rank 0 of 3 args ["x y"]`, `[1] rank 1 of 3 got "hello 1"`, `[2] rank 2 of 3 got "hello 2"`} {
		if !strings.Contains(out, want+"\n") {
			t.Fatalf("want %q in:\n%s\n%s", want, out, errs)
		}
	}
}

func TestExitStatus(t *testing.T) {
	code, out, errs := runCmd(t, "fail", "-n", "3", os.Args[0], testrole.NoTests)
	if code != 3 {
		t.Fatalf("exit %d, want 3\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(errs, "rank 1 exited with status 3") {
		t.Fatalf("stderr:\n%s", errs)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-n", "0", "prog"},
		{"-n", "x", "prog"},
		{"-n", "2"},
		{"-n", "2", "-bind", "-cpus", "0", "prog"},
		{"-n", "2", "-cpus", "0,a", "prog"},
		{"-n", "2", "-cpus", "3-1", "prog"},
		{"-n", "2", "-nosuchflag", "prog"},
		{"-n", "99999", "prog"},
		{"-n", "2", "-per-host", "2", "prog"}, // without -netns
		{"-n", "2", "-netns", "-per-host", "0", "prog"},
	} {
		code, out, errs := runCmd(t, "hello", args...)
		if code != 2 || out != "" || strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, "tachyonrun: ") ||
			!strings.Contains(errs, "usage: tachyonrun -n N") {
			t.Errorf("tachyonrun %q: exit %d, stdout %q, stderr %q; want 2 and one usage line", args, code, out, errs)
		}
	}
	code, out, _ := runCmd(t, "hello", "-h")
	if code != 0 || !strings.Contains(out, "usage: tachyonrun") || !strings.Contains(out, "-bind") {
		t.Errorf("-h: exit %d, %q", code, out)
	}
}

func TestMissingProgram(t *testing.T) {
	code, out, errs := runCmd(t, "hello", "-n", "2", "/nonexistent/tachyon-prog")
	if code != 1 || out != "" || !strings.Contains(errs, "/nonexistent/tachyon-prog") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

func TestBind(t *testing.T) {
	allowed, err := launch.AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if len(allowed) < 2 {
		testskip.Skipf(t, testskip.FewCPUs, "needs 2 CPUs, this process may use %v", allowed)
	}
	for _, tc := range []struct {
		flags []string
		want  []int
	}{
		{[]string{"-bind"}, []int{allowed[0], allowed[1]}},
		{[]string{"-cpus", fmt.Sprintf("%d,%d", allowed[1], allowed[0])}, []int{allowed[1], allowed[0]}},
		{[]string{"-cpus", fmt.Sprintf("%d-%d", allowed[0], allowed[0])}, []int{allowed[0], allowed[0]}},
	} {
		args := append(append([]string{"-n", "2"}, tc.flags...), os.Args[0], testrole.NoTests)
		code, out, errs := runCmd(t, "affinity", args...)
		if code != 0 {
			t.Fatalf("%q: exit %d\n%s", args, code, errs)
		}
		for r, c := range tc.want {
			// Each line whole, but the ranks' lines may interleave.
			if !strings.Contains(out, fmt.Sprintf("rank %d cpus 1\n", r)) || !strings.Contains(out, fmt.Sprintf("rank %d on %d\n", r, c)) {
				t.Fatalf("%q: rank %d not bound to CPU %d alone:\n%s", args, r, c, out)
			}
		}
	}
	code, _, errs := runCmd(t, "affinity", "-n", "1", "-cpus", "1000", os.Args[0])
	if code != 1 || !strings.Contains(errs, "CPU 1000 is not one this process may run on") {
		t.Fatalf("-cpus 1000: exit %d, %q", code, errs)
	}
}

// TestSignals: SIGINT or SIGTERM to tachyonrun stops the ranks, removes
// the segment and exits with 128+signo.
func TestSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(tachyonrun(t), "-n", "2", os.Args[0], testrole.NoTests)
			cmd.Env = append(os.Environ(), testrole.Setting("sleep"))

			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var errb bytes.Buffer
			cmd.Stderr = &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			timer := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() })
			defer timer.Stop()
			var pids []int
			sc := bufio.NewScanner(stdout)
			for len(pids) < 2 && sc.Scan() {
				if m := regexp.MustCompile(`^pid (\d+)$`).FindStringSubmatch(sc.Text()); m != nil {
					p, _ := strconv.Atoi(m[1])
					pids = append(pids, p)
				}
			}
			if len(pids) < 2 {
				t.Fatalf("ranks did not start: %s", errb.String())
			}
			segs := jobSegments(t, cmd.Process.Pid)
			if len(segs) != 1 {
				t.Fatalf("job segments of the running launcher: %v", segs)
			}
			cmd.Process.Signal(sig)
			for sc.Scan() {
			}
			cmd.Wait()
			if code := cmd.ProcessState.ExitCode(); code != 128+int(sig) {
				t.Fatalf("exit %d, want %d\n%s", code, 128+int(sig), errb.String())
			}
			for _, p := range pids {
				if err := syscall.Kill(p, 0); err != syscall.ESRCH {
					t.Errorf("rank process %d still exists", p)
				}
			}
			if segs := jobSegments(t, cmd.Process.Pid); len(segs) != 0 {
				t.Errorf("segments left: %v", segs)
			}
		})
	}
}

// jobSegments lists the segments of the jobs the launcher with this pid
// created.
func jobSegments(t *testing.T, pid int) []string {
	t.Helper()
	dir := os.Getenv("TACHYON_RINGS_SHM_DIR")
	if dir == "" {
		dir = "/dev/shm"
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), fmt.Sprintf("%s-%d-", launch.DefaultSegmentPrefix, pid)) {
			out = append(out, e.Name())
		}
	}
	return out
}
