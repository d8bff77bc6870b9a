package mpi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/testskip"
	"github.com/tachyon-hpc/tachyon/metrics/statshm"
)

// TestMainPublishes: started alone, Main publishes the process for
// tachyonstat while its ranks run (as a world of n, rank unknown) and
// removes the file when they return; with metrics_stat off it makes none.
// (Init's publishing is tested against a tachyonrun job by
// cmd/tachyonstat.)
func TestMainPublishes(t *testing.T) {
	if Launched() {
		testskip.Skip(t, testskip.Launched, "this test process was started by a launcher")
	}
	dir := statshm.Dir()
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		testskip.Skipf(t, testskip.NoSharedMemory, "no directory %s (metrics_stat_dir): %v", dir, err)
	}
	mine := func() ([]*statshm.Stat, error) {
		paths, err := statshm.List(dir)
		if err != nil {
			return nil, err
		}
		var out []*statshm.Stat
		for _, p := range paths {
			if st, err := statshm.ReadFile(p); err == nil && st.PID == os.Getpid() && st.Size == 3 {
				out = append(out, st)
			}
		}
		return out, nil
	}
	var during []*statshm.Stat
	err := Main(3, func(w *Comm) error {
		if w.Rank() == 0 {
			var err error
			during, err = mine()
			if err != nil {
				return err
			}
		}
		return w.Barrier()
	})
	if err != nil {
		t.Fatal(err)
	}
	if !statshm.Enabled() {
		if len(during) != 0 {
			t.Fatalf("metrics_stat is off, yet Main published %s", during[0].Path)
		}
		return
	}
	if len(during) != 1 || during[0].Rank != -1 || during[0].Stale || len(during[0].Vars) == 0 {
		t.Fatalf("while Main ran: %v", describe(during))
	}
	if _, err := os.Stat(during[0].Path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s after Main returned: %v", during[0].Path, err)
	}
}

func describe(stats []*statshm.Stat) string {
	s := fmt.Sprintf("%d files", len(stats))
	for _, st := range stats {
		s += fmt.Sprintf("; %s rank %d of %d, stale %v, %d variables", st.Path, st.Rank, st.Size, st.Stale, len(st.Vars))
	}
	return s
}

// sessionFile returns the tachyonstat file of this process's session
// named name, nil if there is none.
func sessionFile(t *testing.T, name string) *statshm.Stat {
	t.Helper()
	paths, err := statshm.List(statshm.Dir())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		if st, err := statshm.ReadFile(p); err == nil && st.PID == os.Getpid() && st.Session == name {
			return st
		}
	}
	return nil
}

// sentMessages sums a file's counts of messages sent over every
// transport.
func sentMessages(st *statshm.Stat) int64 {
	var n int64
	for _, v := range st.Vars {
		if strings.HasPrefix(v.Name, "engine_") && strings.HasSuffix(v.Name, "_messages") {
			n += v.Value
		}
	}
	return n
}

// TestSessionPublishes: a session publishes for tachyonstat, in a file
// of its own (0600) that names it and holds its own endpoints' counts,
// which a closed connection's do not leave; WithStat(false) makes no
// file, and Close removes the session's.
func TestSessionPublishes(t *testing.T) {
	if fi, err := os.Stat(statshm.Dir()); err != nil || !fi.IsDir() {
		testskip.Skipf(t, testskip.NoSharedMemory, "no directory %s (metrics_stat_dir): %v", statshm.Dir(), err)
	}
	tag := fmt.Sprint(os.Getpid() % 100000)
	srvName, cliName, offName := "stat-srv-"+tag, "stat-cli-"+tag, "stat-off-"+tag
	srv := newTestSession(t, WithName(srvName), WithStat(true))
	cli, err := NewSession(WithStandalone(), WithName(cliName), WithStat(true))
	if err != nil {
		t.Fatal(err)
	}
	newTestSession(t, WithName(offName), WithStat(false))
	if st := sessionFile(t, offName); st != nil {
		t.Fatalf("WithStat(false) published %s", st.Path)
	}
	st := sessionFile(t, srvName)
	if st == nil {
		t.Fatal("no file of the session")
	}
	if fi, err := os.Stat(st.Path); err != nil || fi.Mode() != 0o600 {
		t.Fatalf("%s: mode %v (%v), want 0600", st.Path, fi.Mode(), err)
	}
	if st.Rank != 0 || st.Size != 1 || st.Job != "" {
		t.Fatalf("header %+v", *st)
	}
	sc, cc := echoPair(t, srv, cli)
	const n = 40
	for i := range n {
		if err := cc.Send([]byte{1}, 0, i); err != nil {
			t.Fatal(err)
		}
		if _, err := sc.Recv(make([]byte, 1), 0, i); err != nil {
			t.Fatal(err)
		}
	}
	// The client's file counts what it sent, the server's does not.
	var cst *statshm.Stat
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if cst = sessionFile(t, cliName); cst != nil && sentMessages(cst) >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the client's file: %+v", cst)
		}
	}
	if sst := sessionFile(t, srvName); sst == nil {
		t.Fatal("the server's file is gone")
	} else if got := sentMessages(sst); got >= n {
		t.Fatalf("the server's file counts the client's sends: %d", got)
	}
	// Disconnected, the connection's counts stay in the client's file.
	if err := cc.Disconnect(); err != nil {
		t.Fatal(err)
	}
	sc.Disconnect()
	closed := time.Now().Add(cst.Interval) // a publication that ends after this began after the connection closed
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if cst = sessionFile(t, cliName); cst != nil && cst.Updated.After(closed) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the client's file was not published again")
		}
	}
	if got := sentMessages(cst); got < n {
		t.Fatalf("after the connection closed the client's file counts %d sends, want at least %d", got, n)
	}
	if err := cli.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cst.Path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s after Close: %v", cst.Path, err)
	}
}
