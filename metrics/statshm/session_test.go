package statshm

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/engine"
	"github.com/tachyon-hpc/tachyon/internal/testname"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// TestFileMode: the file is its owner's alone (0600), and a link planted
// at the temporary name it is made under is replaced, not followed.
func TestFileMode(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	next := Prefix + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(started.Load(), 10)
	if err := os.Symlink(victim, filepath.Join(dir, "."+next+".tmp")); err != nil {
		t.Fatal(err)
	}
	p := start(t, Config{Dir: dir, Rank: -1})
	if filepath.Base(p.Path()) != next {
		t.Fatalf("file %s, want %s (another test started a publisher meanwhile?)", p.Path(), next)
	}
	fi, err := os.Lstat(p.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode() != 0o600 {
		t.Fatalf("file mode %v, want -rw------- (0600)", fi.Mode())
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "keep me" {
		t.Fatalf("the planted link's target: %q, %v", b, err)
	}
	if _, err := ReadFile(p.Path()); err != nil {
		t.Fatal(err)
	}
}

// TestSessionOwners: a session's file names the session and holds, for
// variables bound to communicators, what its owners counted together,
// what an owner that left counted included (but a level's), and the
// process's value for the others.
func TestSessionOwners(t *testing.T) {
	c := pvar.NewCounter(testname.Uniq("statshm_test_owned"), "x", pvar.WithBind(pvar.BindComm))
	l := pvar.NewLevel(testname.Uniq("statshm_test_owned_level"), "x", pvar.WithBind(pvar.BindComm))
	h := pvar.NewHighWatermark(testname.Uniq("statshm_test_owned_hwm"), "x", pvar.WithBind(pvar.BindComm))
	o1, o2, other := pvar.NewOwner(), pvar.NewOwner(), pvar.NewOwner()
	c1, c2, c3 := c.ShardOf(o1), c.ShardOf(o2), c.ShardOf(other)
	l2 := l.ShardOf(o2)
	h2 := h.ShardOf(o2)
	c1.Add(3)
	c2.Add(5)
	c3.Add(100)
	l.ShardOf(o1).Set(1)
	l2.Set(4)
	h2.Observe(9)
	var mu sync.Mutex
	owners := []*pvar.Owner{o1, o2}
	list := func() []*pvar.Owner {
		mu.Lock()
		defer mu.Unlock()
		return append([]*pvar.Owner(nil), owners...)
	}
	name := "a-session-named-at-length-beyond" // cut to 24 bytes
	p := start(t, Config{Session: name, Owners: list, Interval: time.Millisecond})
	read := func() *Stat {
		t.Helper()
		st, err := ReadFile(p.Path())
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	want := func(st *Stat, v *pvar.Var, x int64) {
		t.Helper()
		if got, ok := find(st, v.Name()); !ok || got.Value != x {
			t.Errorf("%s = %d (%v), want %d", v.Name(), got.Value, ok, x)
		}
	}
	st := read()
	if st.Session != name[:sessionLen] {
		t.Fatalf("session %q, want %q", st.Session, name[:sessionLen])
	}
	want(st, c.Var, 8)
	want(st, l.Var, 5)
	want(st, h.Var, 9)
	want(st, testCount.Var, int64(testCount.Value())) // not bound: the process's
	// o2's rank closes and o2 leaves the session.
	c2.Close()
	l2.Close()
	h2.Close()
	mu.Lock()
	owners = owners[:1]
	mu.Unlock()
	c1.Add(1)
	deadline := time.Now().Add(10 * time.Second)
	for {
		st = read()
		if v, _ := find(st, c.Name()); v.Value != 8 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	want(st, c.Var, 9)
	want(st, l.Var, 1)
	want(st, h.Var, 9)
}

// TestProcessFile: a file without Owners names no session.
func TestProcessFile(t *testing.T) {
	p := start(t, Config{Rank: 2, Size: 4})
	st, err := ReadFile(p.Path())
	if err != nil {
		t.Fatal(err)
	}
	if st.Session != "" {
		t.Fatalf("session %q, want none", st.Session)
	}
}

// BenchmarkPublishSession: the cost of one publication of a session's
// file whose session holds three endpoints (as a world and two
// connections: here a world of three ranks), beside BenchmarkPublish's
// of the process's values.
func BenchmarkPublishSession(b *testing.B) {
	w, err := engine.NewWorld(3)
	if err != nil {
		b.Fatal(err)
	}
	owners := make([]*pvar.Owner, 3)
	for i := range owners {
		owners[i] = w.Endpoint(i).PvarOwner()
		defer w.Endpoint(i).Close()
	}
	p, err := Start(Config{Dir: b.TempDir(), Interval: time.Hour, Session: "bench", Owners: func() []*pvar.Owner { return owners }})
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
