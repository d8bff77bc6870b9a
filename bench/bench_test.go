package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/testskip"
	"github.com/tachyon-hpc/tachyon/launch"
	"github.com/tachyon-hpc/tachyon/mpi"
)

func TestAnchorRoundTrip(t *testing.T) {
	res := []Result{{"latency", 0, 0.5}, {"latency", 8, 0.4}, {"msgrate", 8, 2.5}, {"bw", 8, 20}}
	var b bytes.Buffer
	writeAnchor(&b, res)
	want := "latency 0 0.500\nlatency 8 0.400\nmsgrate 8 2.500\nbw 8 20.0\n"
	if b.String() != want {
		t.Fatalf("anchor lines:\n%s\nwant\n%s", b.String(), want)
	}
	got, err := parseAnchor(strings.NewReader("# mpich\n" + want + "noise\n"))
	if err != nil || len(got) != len(res) {
		t.Fatalf("parse: %v %v", got, err)
	}
	for i := range res {
		if got[i] != res[i] {
			t.Fatalf("result %d: %+v, want %+v", i, got[i], res[i])
		}
	}
	if _, err := parseAnchor(strings.NewReader("latency x 1\n")); err == nil {
		t.Fatal("malformed line accepted")
	}
}

func TestTableRatios(t *testing.T) {
	res := []Result{{"latency", 8, 0.5}, {"msgrate", 8, 4}, {"bw", 8, 32}}
	anchors := map[string][]Result{"mpich": {{"latency", 8, 1.0}, {"msgrate", 8, 2}}}
	var b bytes.Buffer
	writeTable(&b, options{transport: "shm"}, res, anchors, "")
	out := b.String()
	for _, s := range []string{"0.500", "0.50", "2.00", "mpich"} {
		if !strings.Contains(out, s) {
			t.Fatalf("table lacks %q:\n%s", s, out)
		}
	}
	if strings.Contains(out, "where a window's time goes") {
		t.Fatalf("phases in a table of results without them:\n%s", out)
	}
}

// TestNetAnchorTable: the network anchor script's kernel lines become
// latency figures by name, a line without a figure is skipped, and an
// anchor measured at no size of the table is printed below it rather
// than as a column of dashes; an anchor without figures of a measure
// has no column in its table.
func TestNetAnchorTable(t *testing.T) {
	got := parseKernelAnchors("anchor sockperf-udp-p50 14 4.2 us\nanchor fi_pingpong-udp 8 3.5 us\nanchor qperf-udp_lat 8  us\n# noise\n")
	if len(got) != 2 || got["fi_pingpong-udp"][0] != (Result{"latency", 8, 3.5}) || got["sockperf-udp-p50"][0] != (Result{"latency", 14, 4.2}) {
		t.Fatalf("parsed %v", got)
	}
	got[mpichNetName] = []Result{{"latency", 8, 7}, {"msgrate", 8, 0.25}}
	var b bytes.Buffer
	writeTable(&b, options{transport: "shm", net: "xdp"}, []Result{{"latency", 8, 1.4}, {"msgrate", 8, 7.5}, {"bw", 8, 60}}, got, "")
	out := b.String()
	for _, s := range []string{"AF_XDP", "fi_pingpong-udp", "0.40", mpichNetName, "0.20", "30.00", "sockperf-udp-p50: 14 B 4.200 us"} {
		if !strings.Contains(out, s) {
			t.Fatalf("table lacks %q:\n%s", s, out)
		}
	}
	_, rate, _ := strings.Cut(out, "message rate")
	if rate, _, _ = strings.Cut(rate, "bandwidth"); strings.Contains(rate, "fi_pingpong") {
		t.Fatalf("a column for an anchor without rates:\n%s", out)
	}
	_, bw, _ := strings.Cut(out, "bandwidth")
	if strings.Contains(bw, mpichNetName) {
		t.Fatalf("a column for an anchor without bandwidths:\n%s", out)
	}
}

// TestSuiteInProcess runs the whole suite, small sizes, on two goroutine
// ranks and checks that every figure is there and positive.
func TestSuiteInProcess(t *testing.T) {
	res := inProcessSuite(t, 64, false)
	kinds := map[string]int{}
	for _, r := range res {
		if r.Value <= 0 {
			t.Errorf("%+v is not positive", r)
		}
		kinds[r.Kind]++
	}
	// latency 0..64: 8 sizes; msgrate and bw 1..64: 7 each; no phases.
	if kinds["latency"] != 8 || kinds["msgrate"] != 7 || kinds["bw"] != 7 || len(kinds) != 3 {
		t.Fatalf("results per kind: %v", kinds)
	}
}

// inProcessSuite runs the suite on two goroutine ranks and returns rank
// 0's results.
func inProcessSuite(t *testing.T, max int, phases bool) []Result {
	t.Helper()
	var res []Result
	err := mpi.Run(2, func(c *mpi.Comm) error {
		r, err := suite(c, max, phases, nil)
		if c.Rank() == 0 {
			res = r
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestSuitePhases: with phases, each message-rate size has both ranks'
// phases, and each rank's three tile its measured windows, each phase
// ending where the next begins. So the sender's add up to the time a
// message the rate gives (both are rank 0's clock over the same span),
// and the receiver's to no more (its span starts as it leaves the
// barrier and ends before its last acknowledgement arrives: less by as
// much as a stall of its goroutine there, which a loaded machine may
// make long). Without phases, there are none (TestSuiteInProcess).
func TestSuitePhases(t *testing.T) {
	res := inProcessSuite(t, 8, true)
	s := index(res)
	for _, size := range []int{1, 2, 4, 8} {
		perMsg := 1e3 / s["msgrate"][size] // ns
		for r, rank := range [][]string{phaseKinds[:3], phaseKinds[3:]} {
			sum := 0.0
			for _, k := range rank {
				v, ok := s[k][size]
				if !ok || v < 0 {
					t.Fatalf("%d B: %s = %v (%v)", size, k, v, ok)
				}
				sum += v
			}
			if lo := []float64{0.99, 0}[r]; sum <= lo*perMsg || sum > 1.01*perMsg {
				t.Errorf("%d B: %v add up to %.1f ns a message, the rate gives %.1f", size, rank, sum, perMsg)
			}
		}
	}
	var b bytes.Buffer
	writeTable(&b, options{transport: "inproc"}, res, nil, "")
	if !strings.Contains(b.String(), "where a window's time goes") {
		t.Fatalf("no phases in the table:\n%s", b.String())
	}
	b.Reset()
	writeAnchor(&b, res)
	back, err := parseAnchor(&b)
	if err != nil || len(back) != len(res) {
		t.Fatalf("anchor lines of %d results parsed back as %d (%v)", len(res), len(back), err)
	}
}

// TestOptions: the flags' values are checked, and -thread picks the level
// process ranks ask for and that the table's title names.
func TestOptions(t *testing.T) {
	base := options{max: 64, format: "table", transport: "shm", runs: 1}
	for _, tc := range []struct {
		thread, transport string
		ok                bool
		level             mpi.ThreadLevel
		title             string
	}{
		{"", "shm", true, mpi.ThreadSerialized, "shared memory (processes), ThreadSerialized"},
		{"serialized", "shm", true, mpi.ThreadSerialized, "ThreadSerialized"},
		{"multiple", "shm", true, mpi.ThreadMultiple, "shared memory (processes), ThreadMultiple"},
		{"", "inproc", true, 0, "in-process rings (goroutines), ThreadMultiple"},
		{"multiple", "inproc", true, 0, "ThreadMultiple"},
		{"serialized", "inproc", false, 0, ""},
		{"single", "shm", false, 0, ""},
	} {
		o := base
		o.thread, o.transport = tc.thread, tc.transport
		err := o.check()
		if (err == nil) != tc.ok {
			t.Errorf("-thread %q -transport %s: %v", tc.thread, tc.transport, err)
			continue
		}
		if !tc.ok {
			continue
		}
		if got := o.level(); tc.transport == "shm" && got != tc.level {
			t.Errorf("-thread %q: level %d, want %d", tc.thread, got, tc.level)
		}
		var b bytes.Buffer
		writeTable(&b, o, []Result{{"latency", 8, 0.5}}, nil, "")
		if title, _, _ := strings.Cut(b.String(), "\n"); !strings.Contains(title, tc.title) {
			t.Errorf("-thread %q -transport %s: title %q lacks %q", tc.thread, tc.transport, title, tc.title)
		}
	}
}

// TestCPUProfile: -cpuprofile's per-rank file is a profile (gzip data) of
// the suite, and a path that cannot be created is an error, not a panic.
func TestCPUProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	if got, want := rankProfile(path, 1), path+".rank1"; got != want {
		t.Fatalf("rank 1's profile %q, want %q", got, want)
	}
	err := mpi.Run(2, func(c *mpi.Comm) error {
		if c.Rank() == 0 {
			_, err := suite(c, 64, false, nil)
			return err
		}
		// One profile per process: the other rank writes it.
		_, err := profiledSuite(c, path, 64, false, nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path + ".rank1")
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("profile of %d bytes does not start as gzip data", len(b))
	}
	if _, err := os.Stat(path + ".rank0"); !os.IsNotExist(err) {
		t.Fatalf("rank 0 wrote a profile it was not asked for: %v", err)
	}
	if _, err := startProfile(filepath.Join(t.TempDir(), "missing", "cpu.pprof")); err == nil {
		t.Fatal("a profile in a missing directory started")
	}
}

// TestMedian: each figure is the median of its runs (the mean of the
// middle two for an even number), in the first run's order, and each
// implementation's runs are taken apart.
func TestMedian(t *testing.T) {
	runs := [][]Result{
		{{"latency", 8, 0.5}, {"msgrate", 8, 10}},
		{{"latency", 8, 0.4}, {"msgrate", 8, 2}},
		{{"latency", 8, 0.9}, {"msgrate", 8, 12}},
	}
	want := []Result{{"latency", 8, 0.5}, {"msgrate", 8, 10}}
	if got := median(runs); !slices.Equal(got, want) {
		t.Fatalf("median of three: %v, want %v", got, want)
	}
	if got, want := median(runs[:2]), []Result{{"latency", 8, 0.45}, {"msgrate", 8, 6}}; !slices.Equal(got, want) {
		t.Fatalf("median of two: %v, want %v", got, want)
	}
	if got := median(nil); got != nil {
		t.Fatalf("median of no runs: %v", got)
	}
	byName := medianByName([]map[string][]Result{
		{"mpich": runs[0], "openmpi": runs[1]},
		{"mpich": runs[1], "openmpi": runs[1]},
		{"mpich": runs[2], "openmpi": runs[1]},
	})
	if got := byName["mpich"]; !slices.Equal(got, want) {
		t.Fatalf("mpich: %v, want %v", got, want)
	}
	if got := byName["openmpi"]; !slices.Equal(got, runs[1]) {
		t.Fatalf("openmpi: %v, want %v", got, runs[1])
	}
	if medianByName(nil) != nil {
		t.Fatal("anchors without runs")
	}
}

// TestRunsOption: -runs is checked, and the table says its figures are
// medians.
func TestRunsOption(t *testing.T) {
	for _, tc := range []struct {
		runs    int
		profile string
		ok      bool
	}{{1, "", true}, {5, "", true}, {maxRuns, "", true}, {0, "", false}, {maxRuns + 1, "", false}, {1, "p", true}, {2, "p", false}} {
		o := options{max: 64, format: "table", transport: "shm", runs: tc.runs, profile: tc.profile}
		if err := o.check(); (err == nil) != tc.ok {
			t.Errorf("-runs %d -cpuprofile %q: %v", tc.runs, tc.profile, err)
		}
	}
	var b bytes.Buffer
	writeTable(&b, options{transport: "shm", runs: 5}, []Result{{"latency", 8, 0.5}}, map[string][]Result{"mpich": {{"latency", 8, 1}}}, "host pauses: none")
	for _, s := range []string{"median of 5 runs", "host pauses: none"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, b.String())
		}
	}
}

// benchCPUs returns twoCPUs, or skips where this process may use fewer
// than two CPUs.
func benchCPUs(t *testing.T) []int {
	t.Helper()
	cpus, err := twoCPUs()
	if err != nil {
		if allowed, aerr := launch.AllowedCPUs(); aerr == nil && len(allowed) < 2 {
			testskip.Skipf(t, testskip.FewCPUs, "%v (this process may use %v)", err, allowed)
		}
		t.Fatal(err)
	}
	return cpus
}

// TestHostPauses: the probe watches each CPU for about the time asked,
// and what it reports adds up.
func TestHostPauses(t *testing.T) {
	cpus := benchCPUs(t)
	ps := hostPauses(cpus, 20*time.Millisecond)
	if len(ps) != 2 {
		t.Fatalf("%d CPUs measured", len(ps))
	}
	for i, p := range ps {
		if p.cpu != cpus[i] || p.over < 20*time.Millisecond || p.lost > p.over ||
			p.longest > p.lost || (p.count == 0) != (p.lost == 0) || p.count > 0 && p.longest < pauseFloor {
			t.Fatalf("CPU %d: %+v", cpus[i], p)
		}
		sum := p.add(p)
		if sum.over != 2*p.over || sum.lost != 2*p.lost || sum.count != 2*p.count || sum.longest != p.longest {
			t.Fatalf("sum of %+v with itself: %+v", p, sum)
		}
	}
	if line := pausesLine(ps); !strings.Contains(line, fmt.Sprintf("CPU %d ", cpus[1])) {
		t.Fatalf("line %q", line)
	}
	if pausesLine(nil) != "" {
		t.Fatal("a line without measurements")
	}
}

// TestLineCrossing: the crossing time is measured, and the host's lines
// name the CPUs, both crossings and the pauses.
func TestLineCrossing(t *testing.T) {
	cpus := benchCPUs(t)
	d := lineCrossing(cpus)
	if d <= 0 || d > time.Millisecond {
		t.Fatalf("a cache line crosses in %v", d)
	}
	h := &host{cpus: cpus, before: 312 * time.Nanosecond, after: 95 * time.Nanosecond,
		pauses: []cpuPauses{{cpu: cpus[0]}, {cpu: cpus[1]}}}
	s := h.String()
	for _, want := range []string{fmt.Sprintf("CPU %d to CPU %d", cpus[0], cpus[1]), "312 ns before", "95 ns after", fmt.Sprintf("CPU %d none", cpus[1])} {
		if !strings.Contains(s, want) {
			t.Errorf("host lines lack %q:\n%s", want, s)
		}
	}
	if (*host)(nil).String() != "" {
		t.Fatal("lines for no host")
	}
}

// TestComparison: the comparison program builds with each installed MPI
// and prints, for every size, the lines parseAnchor reads.
func TestComparison(t *testing.T) {
	if _, err := exec.LookPath("mpicc.mpich"); err != nil {
		testskip.Skip(t, testskip.NoMPICH, "mpicc.mpich is not installed (CI installs MPICH)")
	}
	got, err := runComparison(4)
	if err != nil {
		t.Fatal(err)
	}
	for name, res := range got {
		s := index(res)
		for _, want := range []struct {
			kind  string
			sizes []int
		}{{"latency", []int{0, 1, 2, 4}}, {"msgrate", []int{1, 2, 4}}, {"bw", []int{1, 2, 4}}} {
			for _, n := range want.sizes {
				if v := s[want.kind][n]; !(v > 0) {
					t.Errorf("%s: %s of %d B is %v", name, want.kind, n, v)
				}
			}
		}
	}
}
