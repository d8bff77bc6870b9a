//go:build linux

package hwtests

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/tachyon-hpc/tachyon/internal/nethost"
	"github.com/tachyon-hpc/tachyon/internal/testrole"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
	"github.com/tachyon-hpc/tachyon/mpi"
	"github.com/tachyon-hpc/tachyon/nic/nictest"
	"github.com/tachyon-hpc/tachyon/pmi"
)

// A peer lost in a job across hosts: rank 1 of two, each a test host of
// its own, is killed or has its host's link cut while rank 0 waits on a
// receive from it and a rendezvous send to it. Rank 0's operations must
// fail with ErrProcFailed within the peer timeout (engine_net_peer_timeout,
// 1 s here), and its Finalize must return (with that error or none).

// netFailTimeout is the peer timeout the ranks run with.
const netFailTimeout = time.Second

// netFail is one rank of that job (role "netfail"). Both ranks exchange a
// message first, so that the connection is up, then say "armed". Rank 0
// finalizes itself when all went as it should.
func netFail(w *mpi.Comm) error {
	me := w.Rank()
	buf := make([]byte, 8)
	if _, err := w.Sendrecv([]byte("hello"), 1-me, 1, buf, 1-me, 1); err != nil {
		return fmt.Errorf("first exchange: %v", err)
	}
	if me == 1 {
		fmt.Println("netfail rank 1 armed")
		_, err := w.Recv(buf, 0, 99) // never sent: rank 1 dies or loses its link here
		return err
	}
	r, err := w.Irecv(buf, 1, 99)
	if err != nil {
		return err
	}
	s, err := w.Isend(make([]byte, 1<<20), 1, 98) // a rendezvous rank 1 never receives
	if err != nil {
		return err
	}
	fmt.Println("netfail rank 0 armed")
	start := time.Now()
	_, err = mpi.Waitall([]*mpi.Request{r, s})
	el := time.Since(start)
	if !errors.Is(err, mpi.ErrProcFailed) {
		return fmt.Errorf("Waitall after %v: %v, want ErrProcFailed", el, err)
	}
	fmt.Printf("netfail rank 0 got ErrProcFailed after %v: %v\n", el.Round(time.Millisecond), err)
	// Finalize synchronizes with every rank: it returns, with the
	// failure or without.
	if err := mpi.Finalize(); err != nil && !errors.Is(err, mpi.ErrProcFailed) {
		return fmt.Errorf("Finalize: %v", err)
	}
	return nil
}

// TestNetPeerFailure runs the job under the PMI-1 server tachyonrun uses,
// over AF_XDP and over UDP: rank 1 killed with SIGKILL, and rank 1's
// host's link set down.
func TestNetPeerFailure(t *testing.T) {
	if err := nethost.Available(); err != nil {
		testskip.Skip(t, testskip.NoNamespaces, err)
	}
	for _, mode := range []string{"xdp", "udp"} {
		for _, how := range []string{"kill", "cut"} {
			t.Run(mode+"-"+how, func(t *testing.T) { netPeerFailure(t, mode, how) })
		}
	}
}

func netPeerFailure(t *testing.T, mode, how string) {
	nw := nictest.Network(t, nethost.Config{Hosts: 2})
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pm := pmi.NewServer(2, "netfail_"+strconv.Itoa(os.Getpid()), func(rank, code int, msg string) {
		t.Errorf("rank %d aborted (%d): %s", rank, code, msg)
	})
	defer pm.Close()

	var cmds [2]*exec.Cmd
	var lines [2]chan string
	for i, h := range nw.Hosts {
		cmd := exec.Command(exe, exe, testrole.NoTests)
		cmd.Env = append(os.Environ(), h.EnterEnv(), testrole.Setting("netfail"),
			"PMI_FD=3", "PMI_RANK="+strconv.Itoa(i), "PMI_SIZE=2",
			"TACHYON_NIC_MODE="+mode, "TACHYON_ENGINE_NET_PEER_TIMEOUT="+netFailTimeout.String(),
			"TACHYON_ENGINE_NET_PROBE_INTERVAL=200ms", "TACHYON_ENGINE_NET_LINGER=500ms")
		f, err := pm.Attach(i)
		if err != nil {
			t.Fatal(err)
		}
		cmd.ExtraFiles = []*os.File{f}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = &prefixWriter{t: t, prefix: fmt.Sprintf("rank %d: ", i)}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		cmds[i], lines[i] = cmd, readLines(out)
		defer func() {
			cmd.Process.Kill()
			cmd.Wait()
		}()
	}
	for i := range cmds {
		select {
		case l := <-lines[i]:
			if l != fmt.Sprintf("netfail rank %d armed", i) {
				t.Fatalf("rank %d said %q", i, l)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("rank %d did not get ready", i)
		}
	}

	start := time.Now()
	switch how {
	case "kill":
		if err := cmds[1].Process.Kill(); err != nil {
			t.Fatal(err)
		}
	case "cut":
		h, err := netlink.NewHandleAt(nw.Hosts[1].NS, unix.NETLINK_ROUTE)
		if err != nil {
			t.Fatal(err)
		}
		link, err := h.LinkByName(nw.Hosts[1].Iface)
		if err == nil {
			err = h.LinkSetDown(link)
		}
		h.Close()
		if err != nil {
			t.Fatalf("cutting rank 1's link: %v", err)
		}
	}
	select {
	case l, ok := <-lines[0]:
		if !ok || !strings.HasPrefix(l, "netfail rank 0 got ErrProcFailed") {
			t.Fatalf("rank 0 said %q (open %v)", l, ok)
		}
		t.Logf("%v after the %s: %s", time.Since(start).Round(time.Millisecond), how, l)
	case <-time.After(netFailTimeout + 10*time.Second):
		t.Fatalf("rank 0 still waiting %v after rank 1's %s", time.Since(start).Round(time.Millisecond), how)
	}
	if el := time.Since(start); el > 3*netFailTimeout+2*time.Second {
		t.Errorf("rank 0 took %v to give up on rank 1 (peer timeout %v)", el, netFailTimeout)
	}
	done := make(chan error, 1)
	go func() { done <- cmds[0].Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("rank 0 (its Finalize after the failure): %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("rank 0 did not exit: Finalize hangs on a dead peer")
	}
}

// readLines returns a channel of r's lines, closed at its end.
func readLines(r io.Reader) chan string {
	c := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			c <- sc.Text()
		}
		close(c)
	}()
	return c
}

// prefixWriter logs what a rank writes on stderr.
type prefixWriter struct {
	t      *testing.T
	prefix string
}

func (w *prefixWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s%s", w.prefix, strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
