//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/testrole"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
	"github.com/tachyon-hpc/tachyon/metrics/statshm"
	"github.com/tachyon-hpc/tachyon/mpi"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// The job's program is the test binary itself (internal/testrole).
func TestMain(m *testing.M) { testrole.Main(m, runRole) }

// envStop names the file whose existence tells the "spin" job to end.
const envStop = "TACHYONSTAT_TEST_STOP"

func runRole(role string) int {
	switch role {
	case "spin": // two ranks ping-pong, counting rounds, until the stop file appears
		return testrole.Status(role, spin())
	case "sessions": // two sessions, each publishing, until standard input ends
		return testrole.Status(role, sessions())
	case "tachyonstat": // the command itself, for another user
		return run(context.Background(), os.Args[2:], os.Stdout, os.Stderr)
	case "publish": // publish without MPI, say the path, wait to be killed
		p, err := statshm.Start(statshm.Config{Rank: 3, Size: 4, Job: "killed"})
		if err != nil {
			return testrole.Status(role, err)
		}
		fmt.Println("path", p.Path())
		time.Sleep(2 * time.Minute)
		return 0
	}
	return testrole.Status(role, errors.New("unknown role"))
}

func spin() error {
	rounds := pvar.NewCounter("tachyonstat_test_rounds", "Ping-pong rounds of the test job.", pvar.WithUnit("rounds"))
	if err := mpi.Init(); err != nil {
		return err
	}
	w := mpi.World()
	if w.Size() != 2 {
		return fmt.Errorf("a job of %d ranks, want 2", w.Size())
	}
	deadline := time.Now().Add(2 * time.Minute)
	buf := make([]byte, 1)
	for {
		if w.Rank() == 0 {
			buf[0] = 0
			if _, err := os.Stat(os.Getenv(envStop)); err == nil || time.Now().After(deadline) {
				buf[0] = 1
			}
			if err := w.Send(buf, 1, 0); err != nil {
				return err
			}
			if _, err := w.Recv(buf, 1, 0); err != nil {
				return err
			}
			rounds.Add(1)
			if buf[0] == 1 {
				break
			}
			time.Sleep(time.Millisecond) // a modest job: the machine is shared
		} else {
			if _, err := w.Recv(buf, 0, 0); err != nil {
				return err
			}
			rounds.Add(1)
			if err := w.Send(buf, 0, 0); err != nil {
				return err
			}
			if buf[0] == 1 {
				break
			}
		}
	}
	return mpi.Finalize()
}

// sessions opens two standalone sessions, alpha and beta, says "ready",
// and closes them when its standard input ends.
func sessions() error {
	var open []*mpi.Session
	for _, name := range []string{"alpha", "beta"} {
		s, err := mpi.NewSession(mpi.WithStandalone(), mpi.WithName(name))
		if err != nil {
			return err
		}
		open = append(open, s)
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	for _, s := range open {
		if err := s.Close(context.Background()); err != nil {
			return err
		}
	}
	return nil
}

// tachyonstat runs the command in this process.
func tachyonstat(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// buildTachyonrun builds cmd/tachyonrun into a test directory.
func buildTachyonrun(t *testing.T) string {
	t.Helper()
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		if goTool, err = exec.LookPath("go"); err != nil {
			testskip.Skip(t, testskip.NoGoCommand, "no go command to build tachyonrun with")
		}
	}
	bin := filepath.Join(t.TempDir(), "tachyonrun")
	if out, err := exec.Command(goTool, "build", "-o", bin, "../tachyonrun").CombinedOutput(); err != nil {
		t.Fatalf("go build tachyonrun: %v\n%s", err, out)
	}
	return bin
}

func decode(t *testing.T, out string) document {
	t.Helper()
	var doc document
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("tachyonstat -json wrote %v:\n%s", err, out)
	}
	return doc
}

func value(st *statshm.Stat, name string) (int64, bool) {
	i := slices.IndexFunc(st.Vars, func(v statshm.Var) bool { return v.Name == name })
	if i < 0 {
		return 0, false
	}
	return st.Vars[i].Value, true
}

// TestRunningJob: tachyonstat -json shows the variables of a running
// tachyonrun job, a counter grows between two reads, and the files are
// gone when the job ends.
func TestRunningJob(t *testing.T) {
	if runtime.GOOS != "linux" {
		testskip.Skip(t, testskip.NotLinux, "tachyonrun's shared-memory jobs are Linux only")
	}
	bin := buildTachyonrun(t)
	dir, stop := t.TempDir(), filepath.Join(t.TempDir(), "stop")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	job := exec.CommandContext(ctx, bin, append([]string{"-n", "2", "--"}, testrole.Argv()...)...)
	job.Env = append(os.Environ(), testrole.Setting("spin"), "TACHYON_METRICS_STAT_DIR="+dir, envStop+"="+stop)
	var jobOut bytes.Buffer
	job.Stdout, job.Stderr = &jobOut, &jobOut
	if err := job.Start(); err != nil {
		t.Fatal(err)
	}
	ended := false
	defer func() {
		if !ended {
			os.WriteFile(stop, nil, 0o644)
			job.Wait()
		}
	}()

	// Both ranks appear, with their job, and the variables of the engine
	// and of the program.
	var doc document
	for deadline := time.Now().Add(time.Minute); ; {
		code, out, errs := tachyonstat("-json", "-dir", dir)
		if code == 0 {
			if doc = decode(t, out); len(doc.Processes) == 2 {
				if _, ok := value(doc.Processes[1], "tachyonstat_test_rounds"); ok {
					break
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no two ranks after a minute: exit %d\n%s\n%s\njob:\n%s", code, out, errs, jobOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	p0, p1 := doc.Processes[0], doc.Processes[1]
	if p0.Rank != 0 || p1.Rank != 1 || p0.Size != 2 || p1.Size != 2 || p0.Job != p1.Job ||
		!strings.HasPrefix(p0.Job, "tachyon-job") || p0.PID == p1.PID || p0.Stale || !p0.Consistent || p0.Host == "" ||
		p0.Session != "default" || p1.Session != "default" {
		t.Fatalf("processes:\n%+v\n%+v", *p0, *p1)
	}
	for _, name := range []string{"progress_polls", "engine_unexpected_queue", "tachyonstat_test_rounds"} {
		if _, ok := value(p0, name); !ok {
			t.Errorf("rank 0 has no %s", name)
		}
	}
	first, _ := value(p0, "tachyonstat_test_rounds")
	for deadline := time.Now().Add(30 * time.Second); ; {
		_, out, _ := tachyonstat("-json", "-dir", dir, "-rank", "0", "tachyonstat_")
		d := decode(t, out)
		if len(d.Processes) != 1 || len(d.Processes[0].Vars) != 1 {
			t.Fatalf("-rank 0 tachyonstat_: %s", out)
		}
		if now := d.Processes[0].Vars[0].Value; now > first {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tachyonstat_test_rounds stayed at %d for 30s", first)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The engine's timers: rank 1 waits in each Recv while rank 0
	// sleeps, and the text view shows them in seconds.
	for deadline := time.Now().Add(30 * time.Second); ; {
		_, out, _ := tachyonstat("-json", "-dir", dir, "-rank", "1", "progress_wait_time", "progress_poll_time")
		d := decode(t, out)
		if len(d.Processes) != 1 || len(d.Processes[0].Vars) != 2 {
			t.Fatalf("-rank 1 progress_wait_time progress_poll_time: %s", out)
		}
		vs := d.Processes[0].Vars
		if vs[0].Class != "timer" || vs[1].Class != "timer" {
			t.Fatalf("the engine's times are not timers: %+v", vs)
		}
		if vs[0].Value > 0 && vs[1].Value > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rank 1's poll and wait times stayed at %+v for 30s", vs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	code, out, errs := tachyonstat("-dir", dir, "-rank", "1", "progress_wait_time")
	if code != 0 || !regexp.MustCompile(`progress_wait_time\s+timer\s+[0-9]+\.[0-9]{6}s\s+seconds\n`).MatchString(out) {
		t.Errorf("rank 1's wait time in the text view: exit %d\n%s\n%s", code, out, errs)
	}

	// The listing and the table of variables.
	code, out, errs = tachyonstat("-dir", dir)
	if code != 0 || !strings.Contains(out, fmt.Sprint(p0.PID)) || !strings.Contains(out, fmt.Sprint(p1.PID)) || !strings.HasPrefix(out, "PID") {
		t.Errorf("listing: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = tachyonstat("-dir", dir, "-job", p0.Job[:len(p0.Job)-1], "-rank", "1", "tachyonstat_test")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("pid %d  rank 1 of 2", p1.PID)) || !strings.Contains(out, "tachyonstat_test_rounds") ||
		strings.Contains(out, "progress_polls") {
		t.Errorf("variables of rank 1: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = tachyonstat("-dir", dir, "-watch", "20ms", "-count", "2", "-pid", fmt.Sprint(p0.PID), "tachyonstat_test")
	if code != 0 || strings.Count(out, "tachyonstat_test_rounds") != 2 || !strings.Contains(out, "RATE/S") {
		t.Errorf("-watch: exit %d\n%s\n%s", code, out, errs)
	}

	// The job ends: Finalize removes the files.
	if err := os.WriteFile(stop, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := job.Wait()
	ended = true
	if err != nil {
		t.Fatalf("job: %v\n%s", err, jobOut.String())
	}
	if paths, err := statshm.List(dir); err != nil || len(paths) != 0 {
		t.Fatalf("left after the job: %q, %v", paths, err)
	}
	code, out, errs = tachyonstat("-json", "-dir", dir)
	if code != 1 || len(decode(t, out).Processes) != 0 || !strings.Contains(errs, "no running Tachyon process") {
		t.Fatalf("after the job: exit %d\n%s\n%s", code, out, errs)
	}
}

// TestStaleAndForeign: the file of a killed process is left out but
// counted, shown with -stale and removed with -remove-stale; a file that
// is not a tachyonstat file is skipped with a warning.
func TestStaleAndForeign(t *testing.T) {
	if runtime.GOOS != "linux" {
		testskip.Skip(t, testskip.NotLinux, "a dead publisher is told by /proc")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, statshm.Prefix+"junk"), []byte("not a stat file"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := testrole.Command("publish", []string{"TACHYON_METRICS_STAT_DIR=" + dir})
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "path ") {
		t.Fatalf("the publisher said %q", sc.Text())
	}
	path := strings.TrimPrefix(sc.Text(), "path ")

	code, out, errs := tachyonstat("-dir", dir)
	if code != 0 || !strings.Contains(out, fmt.Sprint(cmd.Process.Pid)) || !strings.Contains(errs, "skipping "+filepath.Join(dir, statshm.Prefix+"junk")) {
		t.Fatalf("live: exit %d\n%s\n%s", code, out, errs)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()

	code, out, errs = tachyonstat("-dir", dir)
	if code != 1 || out != "" || !strings.Contains(errs, "1 stale files") {
		t.Fatalf("killed: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = tachyonstat("-dir", dir, "-stale")
	if code != 0 || !strings.Contains(out, fmt.Sprint(cmd.Process.Pid)) || !strings.Contains(out, "STALE") {
		t.Fatalf("-stale: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = tachyonstat("-dir", dir, "-json", "-stale")
	doc := decode(t, out)
	if code != 0 || len(doc.Processes) != 1 || !doc.Processes[0].Stale || doc.Processes[0].Path != path || doc.Processes[0].Rank != 3 ||
		!slices.Equal(doc.Stale, []string{path}) {
		t.Fatalf("-stale: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = tachyonstat("-dir", dir, "-remove-stale")
	if code != 0 || out != "removed "+path+"\n" {
		t.Fatalf("-remove-stale: exit %d\n%s\n%s", code, out, errs)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stale file still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, statshm.Prefix+"junk")); err != nil {
		t.Fatalf("the foreign file was removed: %v", err)
	}
}

// TestStateNames: a state variable shows the name of its value in the
// text view ("-" for -1, nothing in any state), and its value and name
// with -json.
func TestStateNames(t *testing.T) {
	link := pvar.NewState("tachyonstat_test_link", "A link's mode, for the test.", []string{"fast", "slow"})
	_ = pvar.NewState("tachyonstat_test_unset", "A state no shard is in, for the test.", []string{"on", "off"})
	x := link.Shard()
	defer x.Close()
	x.Set(1)
	dir := t.TempDir()
	p, err := statshm.Start(statshm.Config{Dir: dir, Interval: time.Hour, Rank: 0, Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	code, out, errs := tachyonstat("-dir", dir, "tachyonstat_test_")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	var rows [][]string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], "tachyonstat_test_") {
			rows = append(rows, f)
		}
	}
	if want := [][]string{{"tachyonstat_test_link", "state", "slow"}, {"tachyonstat_test_unset", "state", "-"}}; !slices.EqualFunc(rows, want, slices.Equal) {
		t.Errorf("the text view's rows %q, want %q:\n%s", rows, want, out)
	}
	code, out, errs = tachyonstat("-dir", dir, "-json", "tachyonstat_test_")
	doc := decode(t, out)
	if code != 0 || len(doc.Processes) != 1 {
		t.Fatalf("-json: exit %d\n%s\n%s", code, out, errs)
	}
	vars := doc.Processes[0].Vars
	if want := []statshm.Var{{Name: "tachyonstat_test_link", Class: "state", Value: 1, State: "slow"},
		{Name: "tachyonstat_test_unset", Class: "state", Value: -1}}; !slices.Equal(vars, want) {
		t.Errorf("-json variables %+v, want %+v", vars, want)
	}
	if !strings.Contains(out, `"state": "slow"`) {
		t.Errorf("-json lacks the state's name:\n%s", out)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-nosuchflag"},
		{"-rank", "-2"},
		{"-rank", "x"},
		{"-pid", "0"},
		{"-watch", "0s"},
		{"-watch", "soon"},
		{"-count", "3"},
		{"-watch", "1s", "-count", "-1"},
		{"-remove-stale", "-json"},
		{"-remove-stale", "engine_"},
	} {
		code, out, errs := tachyonstat(args...)
		if code != 2 || out != "" || strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, "tachyonstat: ") || !strings.Contains(errs, "usage: tachyonstat") {
			t.Errorf("tachyonstat %q: exit %d, stdout %q, stderr %q; want 2 and one usage line", args, code, out, errs)
		}
	}
	code, out, _ := tachyonstat("-h")
	if code != 0 || !strings.Contains(out, "usage: tachyonstat") || !strings.Contains(out, "-watch") {
		t.Errorf("-h: exit %d, %q", code, out)
	}
	code, out, errs := tachyonstat("-dir", filepath.Join(t.TempDir(), "missing"))
	if code != 1 || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "missing") {
		t.Errorf("missing directory: exit %d, %q, %q", code, out, errs)
	}
}

// TestSessions: a process's sessions each have a file, which names the
// session: listed, selected with -session, gone when the session closes.
func TestSessions(t *testing.T) {
	dir := t.TempDir()
	cmd := testrole.Command("sessions", []string{"TACHYON_METRICS_STAT_DIR=" + dir, "TACHYON_METRICS_STAT=1"})
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() || sc.Text() != "ready" {
		t.Fatalf("the process said %q\n%s", sc.Text(), errb.String())
	}
	pid := fmt.Sprint(cmd.Process.Pid)
	code, out, errs := tachyonstat("-dir", dir)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 || !strings.Contains(lines[0], "SESSION") ||
		!strings.HasPrefix(lines[1], pid) || !strings.Contains(lines[1], "alpha") || !strings.Contains(lines[2], "beta") {
		t.Fatalf("listing: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = tachyonstat("-json", "-dir", dir, "-session", "beta", "progress_polls")
	doc := decode(t, out)
	if code != 0 || len(doc.Processes) != 1 || doc.Processes[0].Session != "beta" || doc.Processes[0].Rank != 0 || doc.Processes[0].Size != 1 {
		t.Fatalf("-session beta: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, _ = tachyonstat("-dir", dir, "-session", "alpha", "progress_")
	if code != 0 || !strings.Contains(out, "session alpha") || strings.Contains(out, "beta") {
		t.Fatalf("-session alpha: exit %d\n%s", code, out)
	}
	in.Close()
	if err := cmd.Wait(); err != nil || errb.Len() != 0 {
		t.Fatalf("%v; the process wrote on standard error:\n%s", err, errb.String())
	}
	if paths, err := statshm.List(dir); err != nil || len(paths) != 0 {
		t.Fatalf("left after Close: %q, %v", paths, err)
	}
}

// TestOtherUsers: run as another user, tachyonstat lists the files it may
// read and skips the others' (each readable by its owner only) with one
// line on standard error, not an error that stops the listing.
func TestOtherUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		testskip.Skip(t, testskip.NotRoot, "runs tachyonstat as another user")
	}
	const nobody = 65534
	dir := t.TempDir()
	for d := filepath.Dir(dir); strings.HasPrefix(d, os.TempDir()+string(filepath.Separator)); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil { // t.TempDir's are 0700
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil { // as /dev/shm
		t.Fatal(err)
	}
	// The test binary, where the other user may run it.
	bin := filepath.Join(dir, "tachyonstat.test")
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	mine, err := statshm.Start(statshm.Config{Dir: dir, Rank: -1, Session: "root's"})
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Stop()
	theirs, err := statshm.Start(statshm.Config{Dir: dir, Rank: -1, Session: "nobody's"})
	if err != nil {
		t.Fatal(err)
	}
	defer theirs.Stop()
	if err := os.Chown(theirs.Path(), nobody, nobody); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, testrole.NoTests, "-dir", dir)
	cmd.Env = append(os.Environ(), testrole.Setting("tachyonstat"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	if err != nil || !strings.Contains(out.String(), "nobody's") || strings.Contains(out.String(), "root's") ||
		strings.Count(errb.String(), "\n") != 1 || !strings.Contains(errb.String(), "skipping 1 file(s) of other users") {
		t.Fatalf("as another user: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
	}
	// Root reads both.
	code, o, errs := tachyonstat("-dir", dir)
	if code != 0 || !strings.Contains(o, "nobody's") || !strings.Contains(o, "root's") || errs != "" {
		t.Fatalf("as root: exit %d\n%s\n%s", code, o, errs)
	}
}
