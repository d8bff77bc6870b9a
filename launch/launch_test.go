//go:build unix

package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/engine"
	"github.com/tachyon-hpc/tachyon/internal/testrole"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
	"github.com/tachyon-hpc/tachyon/mpi"
)

// Jobs in these tests run the test binary itself (internal/testrole):
// TestMain runs the role as one rank instead of the tests.
func TestMain(m *testing.M) { testrole.Main(m, runRole) }

func rankOf() int { r, _ := strconv.Atoi(os.Getenv(EnvRank)); return r }

// waitForever prints this process's pid, for the test to check it was
// stopped, and sleeps.
// announce has every rank but 1 print its pid, then waits until all have
// (a barrier), so that a test sees every pid whatever rank 1 does next.
func announce() {
	if rankOf() != 1 {
		fmt.Printf("pid %d\n", os.Getpid())
	}
	mpi.World().Barrier()
}

// waitForever prints this rank's pid and waits to be stopped.
func waitForever() int {
	fmt.Printf("pid %d\n", os.Getpid())
	return sleepForever()
}

// sleepForever waits to be stopped.
func sleepForever() int {
	time.Sleep(2 * time.Minute)
	return 0
}

func runRole(role string) int {
	switch role {
	case "pingpong": // rank 0 greets every rank, each answers
		if err := mpi.Init(); err != nil {
			fmt.Fprintln(os.Stderr, "Init:", err)
			return 1
		}
		w := mpi.World()
		me, size := w.Rank(), w.Size()
		buf := make([]byte, 64)
		if w.Rank() == 0 {
			for r := 1; r < w.Size(); r++ {
				if err := w.Send([]byte("hello "+strconv.Itoa(r)), r, 1); err != nil {
					fmt.Fprintln(os.Stderr, "Send:", err)
					return 1
				}
				st, err := w.Recv(buf, r, 2)
				if err != nil || string(buf[:st.Count]) != "ack "+strconv.Itoa(r) {
					fmt.Fprintf(os.Stderr, "Recv from %d: %q %v\n", r, buf[:st.Count], err)
					return 1
				}
			}
		} else {
			st, err := w.Recv(buf, 0, 1)
			if err != nil || string(buf[:st.Count]) != "hello "+strconv.Itoa(w.Rank()) {
				fmt.Fprintf(os.Stderr, "Recv: %q %v\n", buf[:st.Count], err)
				return 1
			}
			if err := w.Send([]byte("ack "+strconv.Itoa(w.Rank())), 0, 2); err != nil {
				fmt.Fprintln(os.Stderr, "Send:", err)
				return 1
			}
		}
		if err := mpi.Finalize(); err != nil {
			fmt.Fprintln(os.Stderr, "Finalize:", err)
			return 1
		}
		fmt.Printf("rank %d of %d ok\n", me, size)
		return 0
	case "exit3": // rank 1 exits with 3; the others wait to be stopped
		if err := mpi.Init(); err != nil {
			fmt.Fprintln(os.Stderr, "Init:", err)
			return 1
		}
		announce() // before rank 1 goes: a slow start (-race) lost a pid line
		if rankOf() == 1 {
			return 3
		}
		return sleepForever()
	case "abort7", "abort0": // rank 1 calls Abort(World, 7 or 0); the others wait
		if err := mpi.Init(); err != nil {
			fmt.Fprintln(os.Stderr, "Init:", err)
			return 1
		}
		announce()
		if rankOf() == 1 {
			mpi.Abort(mpi.World(), map[string]int{"abort7": 7, "abort0": 0}[role])
		}
		return sleepForever()
	case "kill9": // rank 1 dies by SIGKILL
		if err := mpi.Init(); err != nil {
			fmt.Fprintln(os.Stderr, "Init:", err)
			return 1
		}
		announce()
		if rankOf() == 1 {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		return sleepForever()
	case "ignoreterm": // the others ignore SIGTERM: only SIGKILL ends them
		if rankOf() != 1 {
			signal.Ignore(syscall.SIGTERM)
		}
		if err := mpi.Init(); err != nil {
			fmt.Fprintln(os.Stderr, "Init:", err)
			return 1
		}
		announce()
		if rankOf() == 1 {
			return 5
		}
		return sleepForever()
	case "sleep":
		return waitForever()
	case "print": // lines written in pieces, on both streams
		r := rankOf()
		for i := 0; i < 200; i++ {
			os.Stdout.WriteString(fmt.Sprintf("rank %d line %d ", r, i))
			if i%20 == 0 {
				time.Sleep(time.Millisecond)
			}
			os.Stdout.WriteString(strings.Repeat(strconv.Itoa(r), 10+i) + "\n")
			if i%50 == 0 {
				os.Stderr.WriteString(fmt.Sprintf("rank %d err %d\n", r, i))
			}
		}
		os.Stdout.WriteString(fmt.Sprintf("rank %d tail", r)) // no newline
		return 0
	case "long": // one 2.5 MiB line
		os.Stdout.WriteString(strings.Repeat("y", 5<<19) + "\n")
		return 0
	case "affinity":
		allowed, err := AllowedCPUs()
		if err != nil {
			fmt.Fprintln(os.Stderr, "AllowedCPUs:", err)
			return 1
		}
		cpus := make([]string, len(allowed))
		for i, c := range allowed {
			cpus[i] = strconv.Itoa(c)
		}
		fmt.Printf("rank %d cpus %s\n", rankOf(), strings.Join(cpus, ","))
		return 0
	case "env":
		fmt.Printf("rank=%s size=%s seg=%s extra=%s pmi_fd=%q args=%q\n", os.Getenv(EnvRank), os.Getenv(EnvSize),
			os.Getenv(EnvSegment), os.Getenv("LAUNCH_TEST_EXTRA"), os.Getenv("PMI_FD"), os.Args[1:])
		return 0
	}
	fmt.Fprintln(os.Stderr, "unknown role", role)
	return 2
}

var prefixSeq atomic.Int64

// testPrefix returns a segment prefix unique to this test run.
func testPrefix() string {
	return fmt.Sprintf("tachyon-ltest-%d-%d", os.Getpid(), prefixSeq.Add(1))
}

func shmDir() string {
	if d := os.Getenv("TACHYON_RINGS_SHM_DIR"); d != "" {
		return d
	}
	return "/dev/shm"
}

// segmentsWith lists the files of the shm directory whose names contain
// prefix (temporary files of a creation included).
func segmentsWith(t *testing.T, prefix string) []string {
	t.Helper()
	ents, err := os.ReadDir(shmDir())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.Contains(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// syncBuffer is a bytes.Buffer that counts its writes and records whether
// two ever overlapped.
type syncBuffer struct {
	mu       sync.Mutex
	b        bytes.Buffer
	inside   atomic.Int32
	overlaps atomic.Int32
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	if s.inside.Add(1) > 1 {
		s.overlaps.Add(1)
	}
	defer s.inside.Add(-1)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type result struct {
	code      int
	err       error
	out, err2 *syncBuffer
	took      time.Duration
	prefix    string
}

// runJob runs role on n ranks of the test binary and checks that the
// segment is gone afterwards.
func runJob(t *testing.T, ctx context.Context, n int, role string, edit func(*Config)) result {
	t.Helper()
	res := result{out: &syncBuffer{}, err2: &syncBuffer{}, prefix: testPrefix()}
	argv := testrole.Argv()
	cfg := Config{N: n, Program: argv[0], Args: argv[1:],
		Env: []string{testrole.Setting(role)}, Stdout: res.out, Stderr: res.err2, SegmentPrefix: res.prefix}
	if edit != nil {
		edit(&cfg)
	}
	if ctx == nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
	}
	start := time.Now()
	res.code, res.err = Run(ctx, cfg)
	res.took = time.Since(start)
	if left := segmentsWith(t, res.prefix); len(left) > 0 {
		t.Errorf("segments left in %s after the job: %v", shmDir(), left)
	}
	return res
}

// pidsGone checks that every "pid N" the ranks printed is no longer a
// live process.
func pidsGone(t *testing.T, out string, want int) {
	t.Helper()
	m := regexp.MustCompile(`pid (\d+)`).FindAllStringSubmatch(out, -1)
	if len(m) != want {
		t.Fatalf("%d ranks reported their pid, want %d:\n%s", len(m), want, out)
	}
	for _, s := range m {
		pid, _ := strconv.Atoi(s[1])
		if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
			t.Errorf("rank process %d still exists (kill 0: %v)", pid, err)
		}
	}
}

func TestPingPong(t *testing.T) {
	for _, n := range []int{1, 2, 4} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			res := runJob(t, nil, n, "pingpong", nil)
			if res.err != nil || res.code != 0 {
				t.Fatalf("Run = %d, %v\nstdout:\n%s\nstderr:\n%s", res.code, res.err, res.out, res.err2)
			}
			for r := 0; r < n; r++ {
				if !strings.Contains(res.out.String(), fmt.Sprintf("rank %d of %d ok\n", r, n)) {
					t.Fatalf("rank %d did not finish:\n%s\n%s", r, res.out, res.err2)
				}
			}
		})
	}
}

func TestExitCodePropagates(t *testing.T) {
	stoppedJob(t, "exit3", 3, "rank 1 exited with status 3; stopping the other 2 rank(s)")
}

func TestAbortCode(t *testing.T) {
	res := runJob(t, nil, 2, "abort7", nil)
	if res.err != nil || res.code != 7 {
		t.Fatalf("Run = %d, %v, want 7\n%s\n%s", res.code, res.err, res.out, res.err2)
	}
	pidsGone(t, res.out.String(), 1)
}

// TestAbortZero: an abort with code 0 ends the job all the same, with
// status 1, and says so.
func TestAbortZero(t *testing.T) {
	stoppedJob(t, "abort0", 1, "rank 1 aborted the job with code 0; stopping the other 2 rank(s)")
}

// stoppedJob runs a job of 3 ranks in which rank 1 plays role, and checks
// that the launcher stopped the other two promptly, exited with code and
// said note.
func stoppedJob(t *testing.T, role string, code int, note string) {
	t.Helper()
	res := runJob(t, nil, 3, role, nil)
	if res.err != nil || res.code != code {
		t.Fatalf("Run = %d, %v, want %d\n%s\n%s", res.code, res.err, code, res.out, res.err2)
	}
	if res.took > 30*time.Second {
		t.Fatalf("took %v: the other ranks were not stopped", res.took)
	}
	if !strings.Contains(res.err2.String(), note) {
		t.Errorf("no note %q:\n%s", note, res.err2)
	}
	pidsGone(t, res.out.String(), 2)
}

func TestSignalDeath(t *testing.T) {
	res := runJob(t, nil, 3, "kill9", nil)
	if res.err != nil || res.code != 128+9 {
		t.Fatalf("Run = %d, %v, want 137\n%s", res.code, res.err, res.err2)
	}
	if !strings.Contains(res.err2.String(), "rank 1 was killed by signal 9") {
		t.Errorf("no note of the signal:\n%s", res.err2)
	}
	pidsGone(t, res.out.String(), 2)
}

// TestKillAfterGrace: ranks that ignore SIGTERM are killed after the
// grace period.
func TestKillAfterGrace(t *testing.T) {
	old := killGrace
	killGrace = 500 * time.Millisecond
	defer func() { killGrace = old }()
	res := runJob(t, nil, 3, "ignoreterm", nil)
	if res.err != nil || res.code != 5 {
		t.Fatalf("Run = %d, %v, want 5\n%s", res.code, res.err, res.err2)
	}
	if res.took < killGrace || res.took > 30*time.Second {
		t.Fatalf("took %v, want a little over the %v grace", res.took, killGrace)
	}
	pidsGone(t, res.out.String(), 2)
}

func TestCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(time.Second); cancel() }()
	res := runJob(t, ctx, 2, "sleep", nil)
	if !errors.Is(res.err, context.Canceled) || res.code == 0 {
		t.Fatalf("Run = %d, %v, want a non-zero code and context.Canceled", res.code, res.err)
	}
	if res.took > 30*time.Second {
		t.Fatalf("took %v", res.took)
	}
	pidsGone(t, res.out.String(), 2)
}

func TestCancelledBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := runJob(t, ctx, 2, "sleep", nil)
	if !errors.Is(res.err, context.Canceled) || res.code == 0 {
		t.Fatalf("Run = %d, %v", res.code, res.err)
	}
	if res.out.String() != "" {
		t.Fatalf("ranks ran:\n%s", res.out)
	}
}

func TestConfigErrors(t *testing.T) {
	notExec := filepath.Join(t.TempDir(), "data")
	os.WriteFile(notExec, []byte("x"), 0o644)
	cases := []struct {
		name   string
		edit   func(*Config)
		config bool // matches ErrConfig
		text   string
	}{
		{"no ranks", func(c *Config) { c.N = 0 }, true, "0 ranks"},
		{"negative", func(c *Config) { c.N = -3 }, true, "-3 ranks"},
		{"too many", func(c *Config) { c.N = MaxRanks + 1 }, true, "ranks"},
		{"no program", func(c *Config) { c.Program = "" }, true, "no program"},
		{"missing program", func(c *Config) { c.Program = "/nonexistent/tachyon-prog" }, false, "/nonexistent/tachyon-prog"},
		{"not in PATH", func(c *Config) { c.Program = "tachyon-no-such-program" }, false, "executable file not found"},
		{"not executable", func(c *Config) { c.Program = notExec }, false, "permission denied"},
		{"bad env", func(c *Config) { c.Env = []string{"NOEQUALS"} }, true, "KEY=VALUE"},
		{"bad prefix", func(c *Config) { c.SegmentPrefix = "a/b" }, true, "segment prefix"},
		{"dot prefix", func(c *Config) { c.SegmentPrefix = ".x" }, true, "segment prefix"},
		{"bad cpu", func(c *Config) { c.CPUs = []int{0, 4096} }, true, "CPU 4096"},
		{"negative cpu", func(c *Config) { c.CPUs = []int{-1} }, true, "CPU -1"},
		{"per host without NetNS", func(c *Config) { c.NetPerHost = 2 }, true, "ranks a host"},
		{"negative per host", func(c *Config) { c.NetNS, c.NetPerHost = true, -1 }, true, "ranks a host"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			prefix := testPrefix()
			cfg := Config{N: 2, Program: os.Args[0], Env: []string{testrole.Setting("sleep")}, SegmentPrefix: prefix}
			tc.edit(&cfg)
			if cfg.SegmentPrefix != prefix {
				prefix = "never-matches-anything"
			}
			code, err := Run(context.Background(), cfg)
			if err == nil || code == 0 || errors.Is(err, ErrConfig) != tc.config || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("Run = %d, %v; want an error containing %q (ErrConfig: %v)", code, err, tc.text, tc.config)
			}
			if left := segmentsWith(t, prefix); len(left) > 0 {
				t.Fatalf("segments created before the configuration was checked: %v", left)
			}
		})
	}
}

// TestStartFailure: a rank that cannot be started fails the job with a
// clear error; the ranks already started are stopped and the segment
// removed.
func TestStartFailure(t *testing.T) {
	beforeStart = func(r int) error {
		if r == 2 {
			return errors.New("injected failure")
		}
		return nil
	}
	defer func() { beforeStart = nil }()
	res := runJob(t, nil, 4, "sleep", nil)
	if res.err == nil || res.code == 0 || !strings.Contains(res.err.Error(), "starting rank 2 of 4") ||
		!strings.Contains(res.err.Error(), "injected failure") {
		t.Fatalf("Run = %d, %v", res.code, res.err)
	}
	// Ranks 0 and 1 may or may not have printed their pid before SIGTERM.
	for _, s := range regexp.MustCompile(`pid (\d+)`).FindAllStringSubmatch(res.out.String(), -1) {
		pid, _ := strconv.Atoi(s[1])
		if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
			t.Errorf("rank process %d still exists", pid)
		}
	}
}

// TestExecFailure: a program that passes the checks but cannot be
// executed.
func TestExecFailure(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "garbage")
	if err := os.WriteFile(bad, []byte("\x00\x01\x02 not a program"), 0o755); err != nil {
		t.Fatal(err)
	}
	res := runJob(t, nil, 2, "sleep", func(c *Config) { c.Program = bad })
	if res.err == nil || res.code == 0 || !strings.Contains(res.err.Error(), "starting rank 0 of 2") {
		t.Fatalf("Run = %d, %v", res.code, res.err)
	}
}

func TestOutputPrefixedNotInterleaved(t *testing.T) {
	const n = 4
	res := runJob(t, nil, n, "print", func(c *Config) { c.Prefix = true })
	if res.err != nil || res.code != 0 {
		t.Fatalf("Run = %d, %v\n%s", res.code, res.err, res.err2)
	}
	line := regexp.MustCompile(`^\[(\d)\] rank (\d) line (\d+) (\d+)$`)
	counts := make([]int, n)
	for _, l := range strings.Split(strings.TrimSuffix(res.out.String(), "\n"), "\n") {
		if m := regexp.MustCompile(`^\[(\d)\] rank (\d) tail$`).FindStringSubmatch(l); m != nil && m[1] == m[2] {
			continue
		}
		m := line.FindStringSubmatch(l)
		if m == nil || m[1] != m[2] {
			t.Fatalf("mixed or unprefixed line %q", l)
		}
		i, _ := strconv.Atoi(m[3])
		if m[4] != strings.Repeat(m[1], 10+i) {
			t.Fatalf("broken line %q", l)
		}
		r, _ := strconv.Atoi(m[1])
		if i != counts[r] {
			t.Fatalf("rank %d: line %d after %d lines", r, i, counts[r])
		}
		counts[r]++
	}
	for r, c := range counts {
		if c != 200 {
			t.Errorf("rank %d: %d lines, want 200", r, c)
		}
		if !strings.Contains(res.out.String(), fmt.Sprintf("[%d] rank %d tail\n", r, r)) {
			t.Errorf("rank %d: last partial line lost", r)
		}
		for i := 0; i < 200; i += 50 {
			if !strings.Contains(res.err2.String(), fmt.Sprintf("[%d] rank %d err %d\n", r, r, i)) {
				t.Errorf("rank %d: stderr line %d lost:\n%s", r, i, res.err2)
			}
		}
	}
	if o := res.out.overlaps.Load() + res.err2.overlaps.Load(); o > 0 {
		t.Errorf("%d overlapping writes", o)
	}
}

func TestOutputUnprefixed(t *testing.T) {
	res := runJob(t, nil, 2, "print", nil)
	if res.err != nil || res.code != 0 {
		t.Fatalf("Run = %d, %v", res.code, res.err)
	}
	line := regexp.MustCompile(`^rank (\d) (line \d+ (\d+)|tail)$`)
	for _, l := range strings.Split(strings.TrimSuffix(res.out.String(), "\n"), "\n") {
		m := line.FindStringSubmatch(l)
		if m == nil || (m[3] != "" && strings.Trim(m[3], m[1]) != "") {
			t.Fatalf("mixed line %q", l)
		}
	}
}

func TestLongLine(t *testing.T) {
	res := runJob(t, nil, 1, "long", func(c *Config) { c.Prefix = true })
	if res.err != nil || res.code != 0 {
		t.Fatalf("Run = %d, %v", res.code, res.err)
	}
	lines := strings.Split(strings.TrimSuffix(res.out.String(), "\n"), "\n")
	total := 0
	for _, l := range lines {
		if !strings.HasPrefix(l, "[0] ") || strings.Trim(l[4:], "y") != "" {
			t.Fatalf("bad piece %.40q...", l)
		}
		total += len(l) - 4
	}
	if total != 5<<19 || len(lines) != 3 {
		t.Fatalf("%d bytes in %d lines, want %d in 3", total, len(lines), 5<<19)
	}
}

func TestEnvironment(t *testing.T) {
	t.Setenv("PMI_FD", "9") // left over from an outer launcher: not passed on
	t.Setenv(EnvRank, "77")
	res := runJob(t, nil, 2, "env", func(c *Config) {
		c.Env = append(c.Env, "LAUNCH_TEST_EXTRA=yes", EnvRank+"=99")
		c.Args = append(c.Args, "a b", "c")
	})
	if res.err != nil || res.code != 0 {
		t.Fatalf("Run = %d, %v\n%s", res.code, res.err, res.err2)
	}
	for r := 0; r < 2; r++ {
		want := regexp.MustCompile(fmt.Sprintf(`rank=%d size=2 seg=%s-\d+-\d+-\d+ extra=yes pmi_fd="" args=\["-test.run=\^\$" "a b" "c"\]`,
			r, regexp.QuoteMeta(res.prefix)))
		if !want.MatchString(res.out.String()) {
			t.Fatalf("rank %d: environment not as expected:\n%s", r, res.out)
		}
	}
}

func TestBinding(t *testing.T) {
	allowed, err := AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if len(allowed) < 2 {
		testskip.Skipf(t, testskip.FewCPUs, "needs 2 CPUs, this process may use %v", allowed)

	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, _ := AllowedCPUs()
	cpus := []int{allowed[1], allowed[0]}
	res := runJob(t, nil, 3, "affinity", func(c *Config) { c.CPUs = cpus })
	if res.err != nil || res.code != 0 {
		t.Fatalf("Run = %d, %v\n%s", res.code, res.err, res.err2)
	}
	for r := 0; r < 3; r++ {
		if want := fmt.Sprintf("rank %d cpus %d\n", r, cpus[r%2]); !strings.Contains(res.out.String(), want) {
			t.Fatalf("want %q in:\n%s", want, res.out)
		}
	}
	// Unbound: ranks keep the launcher's whole set.
	res = runJob(t, nil, 1, "affinity", nil)
	all := make([]string, len(allowed))
	for i, c := range allowed {
		all[i] = strconv.Itoa(c)
	}
	if want := "rank 0 cpus " + strings.Join(all, ",") + "\n"; res.out.String() != want {
		t.Fatalf("unbound rank: %q, want %q", res.out, want)
	}
	if after, _ := AllowedCPUs(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("caller's affinity changed from %v to %v", before, after)
	}
}

// TestStaleRemoved: a segment a dead job left under the prefix is removed
// by the next Run.
func TestStaleRemoved(t *testing.T) {
	prefix := testPrefix()
	// Closed without Remove: the file stays, held by nobody, as after a
	// launcher killed with SIGKILL.
	seg, err := engine.CreateShmJob(prefix+"-stale", 2)
	if err != nil {
		t.Fatal(err)
	}
	seg.Close()
	stale := filepath.Join(shmDir(), prefix+"-stale")
	if _, err := os.Stat(stale); err != nil {
		t.Fatal(err)
	}
	res := runJob(t, nil, 1, "pingpong", func(c *Config) { c.SegmentPrefix = prefix })
	if res.err != nil || res.code != 0 {
		t.Fatalf("Run = %d, %v", res.code, res.err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		os.Remove(stale)
		t.Fatalf("stale segment still there: %v", err)
	}
}

// TestMPIEnvNames: the launcher's variables are the ones mpi.Init reads.
func TestMPIEnvNames(t *testing.T) {
	if EnvRank != mpi.EnvRank || EnvSize != mpi.EnvSize || EnvSegment != mpi.EnvSegment {
		t.Fatal("launch and mpi disagree on the environment variables")
	}
}
