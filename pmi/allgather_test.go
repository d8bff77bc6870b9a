//go:build unix

package pmi

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
)

// serverClients connects n clients to a Server in this process, one per
// rank.
func serverClients(t *testing.T, n int) []*Client {
	t.Helper()
	s := NewServer(n, "kvs_allgather", nil)
	t.Cleanup(s.Close)
	cs := make([]*Client, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for r := range n {
		f, err := s.Attach(r)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cs[r], errs[r] = newClient(conn, r, n)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return cs
}

// allgatherAll runs Allgather on every client at once, rank r with
// vals[r], and returns each rank's result.
func allgatherAll(t *testing.T, cs []*Client, key string, vals []string) [][]string {
	t.Helper()
	got := make([][]string, len(cs))
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for r, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[r], errs[r] = c.Allgather(key, vals[r])
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return got
}

// TestAllgather: every rank gets every rank's value, in rank order, for
// jobs of 1 to 32 ranks and values from empty to vallen_max-1 bytes; the
// gets are O(N) in all: N-1 on rank 0 and one a chunk of the table on
// every other rank, where a Get of each value would make N-1 on each.
func TestAllgather(t *testing.T) {
	card := func(r int) string { // the size of an engine.NetPeer's card
		return fmt.Sprintf("xdp,198.18.7.%d:%d,02:00:c6:12:07:%02x,1,%d,%d", r+1, 40000+r, r, 0x9e3779b9*uint32(r+1), 40100+r)
	}
	for _, tc := range []struct {
		name string
		n    int
		val  func(r int) string
	}{
		{"1-card", 1, card},
		{"2-card", 2, card},
		{"16-card", 16, card},
		{"32-card", 32, card},
		{"5-empty", 5, func(int) string { return "" }},
		{"7-full", 7, func(r int) string {
			return strings.Repeat(string(rune('a'+r)), 1024-len("cmd=put kvsname=kvs_allgather key=test-ag-0 value=\n"))
		}},
		{"9-mixed", 9, func(r int) string { return strings.Repeat("x", r*113) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := serverClients(t, tc.n)
			vals := make([]string, tc.n)
			for r := range vals {
				vals[r] = tc.val(r)
			}
			before := pvGets.Value()
			got := allgatherAll(t, cs, "test-ag", vals)
			for r := range got {
				if !slices.Equal(got[r], vals) {
					t.Fatalf("rank %d got %.200q, want %.200q", r, got[r], vals)
				}
			}
			chunks := len(chunkTable(packTable(vals), cs[0].chunkSize("test-ag")))
			total := int64(0)
			for r, c := range cs {
				want := int64(chunks)
				if r == 0 {
					want = int64(tc.n - 1)
				}
				if g := c.gets.Load(); g != want {
					t.Errorf("rank %d made %d gets, want %d", r, g, want)
				}
				total += c.gets.Load()
			}
			if d := pvGets.Value() - before; d != uint64(total) {
				t.Errorf("pmi_gets rose by %d, the clients made %d", d, total)
			}
			t.Logf("%d ranks, %d chunks: rank 0 %d gets, others %d each, %d in all (a get of each value: %d)",
				tc.n, chunks, tc.n-1, chunks, total, tc.n*(tc.n-1))
		})
	}
}

// TestAllgatherTwice: two Allgathers under different keys in a row (the
// bootstrap's hosts, then cards) keep their tables apart.
func TestAllgatherTwice(t *testing.T) {
	cs := serverClients(t, 4)
	a := []string{"a0", "a1", "a2", "a3"}
	b := []string{"b0", "", "b2", "b3"}
	for r, got := range allgatherAll(t, cs, "one", a) {
		if !slices.Equal(got, a) {
			t.Fatalf("rank %d: %q", r, got)
		}
	}
	for r, got := range allgatherAll(t, cs, "two", b) {
		if !slices.Equal(got, b) {
			t.Fatalf("rank %d: %q", r, got)
		}
	}
}

// TestAllgatherBadTable: a rank other than 0 that reads a table rank 0
// could not gather, or one that is malformed or gives it another value
// than its own, returns an error saying so, never a panic or a wrong
// value.
func TestAllgatherBadTable(t *testing.T) {
	for _, tc := range []struct {
		chunk0 string
		want   error
		says   string
	}{
		{"!", ErrRefused, "rank 0 could not gather"},
		{"abc", ErrProtocol, "chunk count"},
		{"0,", ErrProtocol, "chunk count"},
		{"99999999,x", ErrProtocol, "chunk count"},
		{"1,2:r02:vX2:v22:v3", ErrProtocol, "not the one it put"},
		{"1,2:r02:v12:v22:v32:v4", ErrProtocol, "more than 4 values"},
		{"1,2:r02:v12:v2", ErrProtocol, "3 values, want 4"},
		{"1,2:r02:v12:v29:v3", ErrProtocol, "a length of"},
		{"1,2:r02:v12:v2-1:v3", ErrProtocol, "a length of"},
		{"1,2:r02:v12:v2x:v3", ErrProtocol, "a length of"},
		{"1,2:r02:v12:v2:v3", ErrProtocol, "no length"},
		{"1,2:r02:v12:v2v3", ErrProtocol, "no length"},
	} {
		t.Run(tc.chunk0, func(t *testing.T) {
			c, _, wait := newTestClient(t,
				step{"cmd=put kvsname=kvs_42_0 key=k-1 value=v1", "cmd=put_result rc=0 msg=success", false},
				step{"cmd=barrier_in", "cmd=barrier_out", false},
				step{"cmd=barrier_in", "cmd=barrier_out", false},
				step{"cmd=get kvsname=kvs_42_0 key=k-all-0", "cmd=get_result rc=0 msg=success value=" + tc.chunk0, false},
			)
			got, err := c.Allgather("k", "v1")
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %q, %v; want an error matching %v that says %q", got, err, tc.want, tc.says)
			}
			if _, err := wait(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestAllgatherChunks: a table of several chunks is read chunk by chunk
// (the first says how many); a chunk missing is an error naming it.
func TestAllgatherChunks(t *testing.T) {
	c, _, wait := newTestClient(t,
		step{"cmd=put kvsname=kvs_42_0 key=k-1 value=v1", "cmd=put_result rc=0 msg=success", false},
		step{"cmd=barrier_in", "cmd=barrier_out", false},
		step{"cmd=barrier_in", "cmd=barrier_out", false},
		step{"cmd=get kvsname=kvs_42_0 key=k-all-0", "cmd=get_result rc=0 msg=success value=3,2:r02:v", false},
		step{"cmd=get kvsname=kvs_42_0 key=k-all-1", "cmd=get_result rc=0 msg=success value=12:v22", false},
		step{"cmd=get kvsname=kvs_42_0 key=k-all-2", "cmd=get_result rc=0 msg=success value=:v3", false},
	)
	got, err := c.Allgather("k", "v1")
	if err != nil || !slices.Equal(got, []string{"r0", "v1", "v2", "v3"}) {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := wait(); err != nil {
		t.Fatal(err)
	}
	c, _, wait = newTestClient(t,
		step{"cmd=put kvsname=kvs_42_0 key=k-1 value=v1", "cmd=put_result rc=0 msg=success", false},
		step{"cmd=barrier_in", "cmd=barrier_out", false},
		step{"cmd=barrier_in", "cmd=barrier_out", false},
		step{"cmd=get kvsname=kvs_42_0 key=k-all-0", "cmd=get_result rc=0 msg=success value=2,2:r02:v", false},
		step{"cmd=get kvsname=kvs_42_0 key=k-all-1", "cmd=get_result rc=-1 msg=key_not_found", false},
	)
	if _, err := c.Allgather("k", "v1"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "chunk 1 of 2") {
		t.Fatalf("a missing chunk: %v", err)
	}
	if _, err := wait(); err != nil {
		t.Fatal(err)
	}
}

// TestAllgatherKeyRoom: a key without room for the suffixes is refused
// before anything is sent.
func TestAllgatherKeyRoom(t *testing.T) {
	c, _, _ := newTestClient(t)
	if _, err := c.Allgather(strings.Repeat("k", 50), "v"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a 50-byte key under keylen_max 64: %v", err)
	}
}

// FuzzUnpackTable: any table unpacks to an error or to values that pack
// back to it; it never panics.
func FuzzUnpackTable(f *testing.F) {
	f.Add("2:ab0:3:xyz", 3)
	f.Add("1:a", 1)
	f.Add("99999999999:a", 1)
	f.Fuzz(func(t *testing.T, table string, n int) {
		if n < 0 || n > 1000 {
			return
		}
		vals, err := unpackTable(table, n)
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("an error that is not ErrProtocol: %v", err)
			}
			return
		}
		if len(vals) != n || packTable(vals) != table {
			t.Fatalf("%q unpacked to %q", table, vals)
		}
	})
}

// TestChunkTable: chunks are at most the size asked, the first carries
// their count, and together they are the table.
func TestChunkTable(t *testing.T) {
	for _, l := range []int{0, 1, 29, 30, 31, 32, 60, 61, 62, 1000} {
		table := strings.Repeat("t", l)
		chunks := chunkTable(table, 32)
		joined := strings.Join(chunks, "")
		head, rest, _ := strings.Cut(joined, ",")
		if head != fmt.Sprint(len(chunks)) || rest != table {
			t.Fatalf("%d bytes: %q", l, chunks)
		}
		for i, ch := range chunks {
			if len(ch) > 32 || len(ch) == 0 {
				t.Fatalf("%d bytes: chunk %d of %d bytes", l, i, len(ch))
			}
		}
	}
}
