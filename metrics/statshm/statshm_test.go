package statshm

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/testrole"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
	"github.com/tachyon-hpc/tachyon/pvar"
)

func TestMain(m *testing.M) { testrole.Main(m, runRole) }

// envDir names the directory a role publishes in.
const envDir = "STATSHM_TEST_DIR"

func runRole(role string) int {
	switch role {
	case "publish": // publish, say where, and wait to be killed
		p, err := Start(Config{Dir: os.Getenv(envDir), Rank: 0, Size: 1, Job: "role"})
		if err != nil {
			return testrole.Status(role, err)
		}
		println("path", p.Path()) // stderr: the test reads it
		time.Sleep(2 * time.Minute)
		return 0
	}
	return testrole.Status(role, errors.New("unknown role"))
}

var (
	testCount = pvar.NewCounter("statshm_test_count", "Test counter.", pvar.WithUnit("events"))
	testLevel = pvar.NewLevel("statshm_test_level", "Test level.", pvar.WithUnit("things"))
	// seqA and seqB are read in that order by every publication (the
	// table is in registration order and they register in name order):
	// within one publication seqB equals seqA.
	seqState atomic.Int64
	_        = pvar.NewFunc("statshm_test_seq_a", "Increments at each read.", pvar.ClassGeneric, func() int64 { return seqState.Add(1) })
	_        = pvar.NewFunc("statshm_test_seq_b", "The last seq_a.", pvar.ClassGeneric, func() int64 { return seqState.Load() })
)

// start starts a publisher in a test directory, stopped at cleanup.
func start(t *testing.T, cfg Config) *Publisher {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	p, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Error(err)
		}
	})
	return p
}

func find(st *Stat, name string) (Var, bool) {
	i := slices.IndexFunc(st.Vars, func(v Var) bool { return v.Name == name })
	if i < 0 {
		return Var{}, false
	}
	return st.Vars[i], true
}

func TestPublishRead(t *testing.T) {
	testLevel.Add(7)
	defer testLevel.Add(-7)
	before := testCount.Value()
	p := start(t, Config{Job: "job-x", Rank: 1, Size: 3, Interval: 2 * time.Millisecond})
	if dir, base := filepath.Split(p.Path()); !strings.HasPrefix(base, Prefix) {
		t.Fatalf("file %s in %s: want the prefix %s", base, dir, Prefix)
	}
	r, err := Open(p.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	st, err := r.Read()
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if st.PID != os.Getpid() || st.Rank != 1 || st.Size != 3 || st.Job != "job-x" || st.Host != host ||
		st.Command != filepath.Base(os.Args[0]) || st.Stale || !st.Consistent || st.Dropped != tooLong() ||
		st.Interval != 2*time.Millisecond || st.Path != p.Path() {
		t.Fatalf("header %+v", *st)
	}
	if since := time.Since(st.Started); since < 0 || since > time.Minute {
		t.Errorf("started %v ago", since)
	}
	for _, v := range pvar.All() {
		if len(v.Name()) > nameLen {
			continue // dropped, and counted
		}
		got, ok := find(st, v.Name())
		if !ok || got.Class != v.Class().String() || got.Unit != v.Unit() {
			t.Errorf("variable %s: got %+v, %v; want class %v unit %q", v.Name(), got, ok, v.Class(), v.Unit())
		}
	}
	if v, _ := find(st, "statshm_test_level"); v.Value != 7 || v.Class != "level" || v.Unit != "things" {
		t.Errorf("level: %+v", v)
	}
	testCount.Add(5)
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err = r.Read()
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := find(st, "statshm_test_count"); v.Value == int64(before+5) {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("counter %d, want %d: not republished", v.Value, before+5)
		}
		time.Sleep(time.Millisecond)
	}
	if age := time.Since(st.Updated); age < 0 || age > 5*time.Second {
		t.Errorf("updated %v ago", age)
	}
	paths, err := List(filepath.Dir(p.Path()))
	if err != nil || len(paths) != 1 || paths[0] != p.Path() {
		t.Fatalf("List: %q, %v", paths, err)
	}
}

func TestStopRemoves(t *testing.T) {
	dir := t.TempDir()
	p, err := Start(Config{Dir: dir, Rank: -1})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Open(p.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if _, err := os.Stat(p.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("file after Stop: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("left in the directory: %v", ents)
	}
	// A reader that had it open still reads the last values.
	if st, err := r.Read(); err != nil || st.Rank != -1 || len(st.Vars) == 0 {
		t.Fatalf("Read after Stop: %+v, %v", st, err)
	}
}

// growthRuns numbers TestGrowth's runs in this process.
var growthRuns atomic.Int32

// tooLong returns how many registered variables have names longer than a
// descriptor holds: the file drops them.
func tooLong() int {
	n := 0
	for _, v := range pvar.All() {
		if len(v.Name()) > nameLen {
			n++
		}
	}
	return n
}

// TestGrowth: variables registered after Start join the table, in a reader
// opened before too, until it is full; the rest are counted as dropped.
func TestGrowth(t *testing.T) {
	long0 := tooLong()
	n := len(pvar.All()) - long0
	p := start(t, Config{Capacity: n + 1, Interval: time.Hour})
	r, err := Open(p.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if st, err := r.Read(); err != nil || len(st.Vars) != n || st.Dropped != long0 {
		t.Fatalf("before: %d variables, %d dropped, %v; want %d, %d", len(st.Vars), st.Dropped, err, n, long0)
	}
	// Names of this run's own: variables stay registered, and go test
	// -count runs the test again in the process.
	late := fmt.Sprintf("statshm_test_late%d_", growthRuns.Add(1))
	pvar.NewCounter(late+"1", "Registered after Start.")
	long := pvar.NewCounter(late+strings.Repeat("x", nameLen), "A name longer than a descriptor holds.")
	pvar.NewCounter(late+"2", "Registered after Start, too many.")
	long.Add(1)
	p.publish()
	st, err := r.Read()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Vars) != n+1 || st.Dropped != long0+2 {
		t.Fatalf("after: %d variables, %d dropped; want %d, %d", len(st.Vars), st.Dropped, n+1, long0+2)
	}
	if v := st.Vars[n]; v.Name != late+"1" || v.Class != "counter" {
		t.Fatalf("added: %+v", v)
	}
	p.publish() // the dropped stay dropped, counted once
	if st, err := r.Read(); err != nil || len(st.Vars) != n+1 || st.Dropped != long0+2 {
		t.Fatalf("again: %d variables, %d dropped, %v", len(st.Vars), st.Dropped, err)
	}
}

// TestConsistentReads: readers racing the publisher see whole
// publications (seq_b equal to seq_a) and counters that never go back.
func TestConsistentReads(t *testing.T) {
	p := start(t, Config{Interval: time.Hour})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // a writer of the job, on its own shard
		defer wg.Done()
		s := testCount.Shard()
		defer s.Close()
		for {
			select {
			case <-stop:
				return
			default:
				s.Inc()
			}
		}
	}()
	go func() { // publications back to back, for readers to run into
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				p.publish()
			}
		}
	}()
	reads := 2000
	if testing.Short() {
		reads = 200
	}
	var readers sync.WaitGroup
	for range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			r, err := Open(p.Path())
			if err != nil {
				t.Error(err)
				return
			}
			defer r.Close()
			var last int64
			consistent := 0
			defer func() {
				if consistent == 0 {
					t.Errorf("none of %d reads was consistent", reads)
				}
			}()
			for i := 0; i < reads; i++ {
				st, err := r.Read()
				if err != nil {
					t.Error(err)
					return
				}
				a, _ := find(st, "statshm_test_seq_a")
				b, _ := find(st, "statshm_test_seq_b")
				c, _ := find(st, "statshm_test_count")
				if st.Consistent {
					consistent++
				}
				if st.Consistent && a.Value != b.Value {
					t.Errorf("read %d: seq_a %d, seq_b %d: two publications mixed", i, a.Value, b.Value)
					return
				}
				if c.Value < last {
					t.Errorf("read %d: counter went from %d to %d", i, last, c.Value)
					return
				}
				last = c.Value
			}
		}()
	}
	readers.Wait()
	close(stop)
	wg.Wait()
}

// TestPublisherStuck: a publisher that stays in a publication (it died
// there) leaves readers its values, marked not consistent, without a hang.
func TestPublisherStuck(t *testing.T) {
	p := start(t, Config{Interval: time.Hour})
	p.mu.Lock() // no publication can end the one faked here
	defer p.mu.Unlock()
	seq := load(p.mem, offSeq)
	store(p.mem, offSeq, seq|1)
	defer store(p.mem, offSeq, seq)
	st, err := ReadFile(p.Path())
	if err != nil || st.Consistent || len(st.Vars) == 0 {
		t.Fatalf("got %v, %v; want the values, not consistent", st, err)
	}
}

// valid returns the bytes of a valid file whose table holds 4 variables.
// TestStates: the file names a state variable's values (the names
// pvar.NewState gave), as many whole names as its slot holds, and Read
// gives the name of each value; -1 (nothing in any state) and a value
// past the names read as a number alone. A file without the states
// region, as one made before it came, reads with values and no names.
func TestStates(t *testing.T) {
	long := make([]string, 20)
	for i := range long {
		long[i] = fmt.Sprintf("state-number-%02d", i) // 15 bytes and a NUL: 8 fit in a slot
	}
	mode := pvar.NewState("statshm_test_state", "Test state.", []string{"good", "bad", "ugly"})
	many := pvar.NewState("statshm_test_state_many", "Test state with more names than a slot holds.", long)
	_ = pvar.NewState("statshm_test_state_none", "Test state no shard is in.", []string{"on", "off"})
	m := mode.Shard()
	defer m.Close()
	m.Set(1)
	x := many.Shard()
	defer x.Close()
	x.Set(6)
	p := start(t, Config{Interval: time.Hour})
	check := func(st *Stat, named bool) {
		t.Helper()
		for _, c := range []struct {
			name, state string
			value       int64
		}{{"statshm_test_state", "bad", 1}, {"statshm_test_state_many", "state-number-06", 6}, {"statshm_test_state_none", "", -1}} {
			if !named {
				c.state = ""
			}
			if v, ok := find(st, c.name); !ok || v.Class != "state" || v.Value != c.value || v.State != c.state {
				t.Errorf("%s: %+v, %v; want value %d, state %q", c.name, v, ok, c.value, c.state)
			}
		}
	}
	st, err := ReadFile(p.Path())
	if err != nil {
		t.Fatal(err)
	}
	check(st, true)

	x.Set(8) // the ninth name did not fit
	p.publish()
	if st, err = ReadFile(p.Path()); err != nil {
		t.Fatal(err)
	}
	if v, _ := find(st, "statshm_test_state_many"); v.Value != 8 || v.State != "" {
		t.Errorf("a value past the names the slot holds: %+v", v)
	}
	x.Set(6)
	p.publish()

	b, err := os.ReadFile(p.Path())
	if err != nil {
		t.Fatal(err)
	}
	capacity := int(binary.NativeEndian.Uint64(b[offCapacity:]))
	old := slices.Clone(b[:statesOff(capacity)])
	binary.NativeEndian.PutUint64(old[offStates:], 0)
	path := filepath.Join(t.TempDir(), Prefix+"1-0")
	if err := os.WriteFile(path, old, 0o600); err != nil {
		t.Fatal(err)
	}
	if st, err = ReadFile(path); err != nil {
		t.Fatalf("a file without the states region: %v", err)
	}
	check(st, false)

	for _, c := range []struct {
		names []string
		want  []string
	}{
		{[]string{"a", "b"}, []string{"a", "b"}},
		{[]string{"a", "", "c"}, []string{"a"}},
		{[]string{"a", "b\x00c"}, []string{"a"}},
		{[]string{strings.Repeat("x", statesLen)}, nil},
		{[]string{strings.Repeat("x", statesLen-1)}, []string{strings.Repeat("x", statesLen-1)}},
	} {
		mem := make([]byte, statesLen)
		putStates(mem, 0, c.names)
		if got := getStates(mem, 0); !slices.Equal(got, c.want) {
			t.Errorf("putStates(%q) reads back %q, want %q", c.names, got, c.want)
		}
	}
}

func valid(t *testing.T) []byte {
	t.Helper()
	p := start(t, Config{Interval: time.Hour, Capacity: 4})
	b, err := os.ReadFile(p.Path())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestMalformed(t *testing.T) {
	good := valid(t)
	put := func(off int, v uint64) func([]byte) []byte {
		return func(b []byte) []byte {
			b = slices.Clone(b)
			binary.NativeEndian.PutUint64(b[off:], v)
			return b
		}
	}
	for _, tc := range []struct {
		name   string
		make   func([]byte) []byte
		want   error
		atOpen bool
	}{
		{"empty", func([]byte) []byte { return nil }, ErrNotStat, true},
		{"short", func(b []byte) []byte { return b[:headerSize-1] }, ErrNotStat, true},
		{"foreign", func(b []byte) []byte { return []byte(strings.Repeat("not a stat file ", 64)) }, ErrNotStat, true},
		{"magic", func(b []byte) []byte { b = slices.Clone(b); b[0] = 'X'; return b }, ErrNotStat, true},
		{"version", put(offVersion, 2), ErrVersion, true},
		{"header size", put(offHeaderSize, 256), ErrCorrupt, true},
		{"descriptor size", put(offDescSize, 64), ErrCorrupt, true},
		{"no capacity", put(offCapacity, 0), ErrCorrupt, true},
		{"huge capacity", put(offCapacity, 1<<40), ErrCorrupt, true},
		{"capacity past the end", put(offCapacity, 5), ErrCorrupt, true},
		{"truncated table", func(b []byte) []byte { return b[:statesOff(4)-8] }, ErrCorrupt, true},
		{"truncated states", func(b []byte) []byte { return b[:len(b)-8] }, ErrCorrupt, true},
		{"states elsewhere", put(offStates, headerSize), ErrCorrupt, true},
		{"pid", put(offPID, 1<<40), ErrCorrupt, true},
		{"rank", put(offRank, 1<<40), ErrCorrupt, true},
		{"count past capacity", put(offCount, 5), ErrCorrupt, false},
		{"empty name", func(b []byte) []byte { b = slices.Clone(b); b[headerSize+descName] = 0; return b }, ErrCorrupt, false},
		{"negative class", put(headerSize+descClass, ^uint64(0)), ErrCorrupt, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), Prefix+"1-0")
			if err := os.WriteFile(path, tc.make(good), 0o644); err != nil {
				t.Fatal(err)
			}
			r, err := Open(path)
			if err == nil {
				defer r.Close()
				if tc.atOpen {
					t.Fatalf("Open succeeded, want %v", tc.want)
				}
				_, err = r.Read()
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := Open(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := Open(t.TempDir()); !errors.Is(err, ErrNotStat) {
		t.Errorf("directory: %v", err)
	}
}

// TestShrunk: a file truncated under a reader (by a foreign process) is an
// error of Read, not a crash (SIGBUS on the mapping).
func TestShrunk(t *testing.T) {
	if runtime.GOOS != "linux" {
		testskip.Skip(t, testskip.NotLinux, "SIGBUS on a truncated mapping is the Linux behaviour tested")
	}
	path := filepath.Join(t.TempDir(), Prefix+"1-0")
	if err := os.WriteFile(path, valid(t), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Read of a truncated file: %v, want ErrCorrupt", err)
	}
}

// TestStale: the file of a killed process is reported stale and removed
// by RemoveStale; a live one is neither.
func TestStale(t *testing.T) {
	if runtime.GOOS != "linux" {
		testskip.Skip(t, testskip.NotLinux, "a dead publisher is told by /proc")
	}
	dir := t.TempDir()
	live := start(t, Config{Dir: dir})
	cmd := testrole.Command("publish", []string{envDir + "=" + dir})
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(errPipe)
	var path string
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "path "); ok {
			path = p
			break
		}
		t.Log(sc.Text())
	}
	if path == "" {
		t.Fatal("the publishing process said no path")
	}
	if st, err := ReadFile(path); err != nil || st.Stale || st.PID != cmd.Process.Pid || st.Job != "role" {
		t.Fatalf("live: %+v, %v", st, err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if st, err := ReadFile(path); err != nil || !st.Stale {
		t.Fatalf("killed: %+v, %v; want stale", st, err)
	}
	removed, err := RemoveStale(dir)
	if err != nil || len(removed) != 1 || removed[0] != path {
		t.Fatalf("RemoveStale: %q, %v; want %s", removed, err, path)
	}
	if paths, _ := List(dir); len(paths) != 1 || paths[0] != live.Path() {
		t.Fatalf("left: %q, want the live file alone", paths)
	}
}

// FuzzOpen: no file makes Open or Read panic.
func FuzzOpen(f *testing.F) {
	p, err := Start(Config{Dir: f.TempDir(), Interval: time.Hour, Capacity: 2})
	if err != nil {
		f.Fatal(err)
	}
	good, err := os.ReadFile(p.Path())
	p.Stop()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:headerSize])
	f.Add([]byte(magic))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(dir, "f")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := Open(path)
		if err != nil {
			return
		}
		defer r.Close()
		r.Read()
	})
}

// BenchmarkPublish: the cost of one publication, the publisher's work
// every interval.
func BenchmarkPublish(b *testing.B) {
	p, err := Start(Config{Dir: b.TempDir(), Interval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Stop()
	b.ReportAllocs()
	for b.Loop() {
		p.publish()
	}
	b.ReportMetric(float64(len(p.vars)), "vars")
}

// BenchmarkRead: the cost of one reading of a file, tachyonstat's work.
func BenchmarkRead(b *testing.B) {
	p, err := Start(Config{Dir: b.TempDir(), Interval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Stop()
	r, err := Open(p.Path())
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Read(); err != nil {
			b.Fatal(err)
		}
	}
}
