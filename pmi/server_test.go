//go:build unix

package pmi

import (
	"fmt"
	"github.com/tachyon-hpc/tachyon/internal/testrole"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// startRanks starts n processes of this test binary in role, each
// connected to s.
func startRanks(t *testing.T, s *Server, n int, role string) []*exec.Cmd {
	t.Helper()
	cmds := make([]*exec.Cmd, n)
	for r := range n {
		f, err := s.Attach(r)
		if err != nil {
			t.Fatal(err)
		}
		cmd := testrole.Command(role, []string{"PMI_FD=3", fmt.Sprintf("PMI_RANK=%d", r), fmt.Sprintf("PMI_SIZE=%d", n)})

		cmd.ExtraFiles = []*os.File{f}
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		cmds[r] = cmd
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
		})
	}
	return cmds
}

// TestServerJob: a job of processes joins the server's key-value space:
// every rank's Put is every rank's Get after a barrier, a missing key is
// ErrNotFound, Finalize is acknowledged.
func TestServerJob(t *testing.T) {
	for _, n := range []int{1, 3, 8} {
		s := NewServer(n, "kvs_test_0", nil)
		cmds := startRanks(t, s, n, "kvs")
		for r, cmd := range cmds {
			if err := cmd.Wait(); err != nil {
				t.Fatalf("%d ranks: rank %d: %v: %s", n, r, err, cmd.Stdout)
			}
			want := fmt.Sprintf("ok rank %d of %d kvs kvs_test_0", r, n)
			if got := fmt.Sprint(cmd.Stdout); !strings.Contains(got, want) {
				t.Fatalf("rank %d said %q, want %q", r, got, want)
			}
		}
		s.Close()
	}
}

// TestServerAbort: a rank's abort reaches the launcher with its rank,
// code and message.
func TestServerAbort(t *testing.T) {
	var mu sync.Mutex
	var got []string
	s := NewServer(3, "kvs_abort", func(rank, code int, msg string) {
		mu.Lock()
		got = append(got, fmt.Sprintf("%d %d %s", rank, code, msg))
		mu.Unlock()
	})
	defer s.Close()
	startRanks(t, s, 3, "abort")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no abort reached the server")
		}
	}
	if got[0] != "1 7 rank_1_gives_up" { // the wire has no spaces: the client sends them as _
		t.Fatalf("abort %q, want rank 1, code 7 and its message", got[0])
	}
}
