//go:build linux

package hwtests

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/engine"
	"github.com/tachyon-hpc/tachyon/internal/nethost"
	"github.com/tachyon-hpc/tachyon/mpi"
	"github.com/tachyon-hpc/tachyon/nic"
	"github.com/tachyon-hpc/tachyon/nic/nictest"
)

// netShare is one rank of a job of two ranks on each of two hosts (role
// "netshare"): every pair of ranks streams messages both ways, in rounds
// of pairs (rank r with r^1, r^2, r^3), and each rank reports the path
// of its frames to the network peers (engine_net_path), which must be
// AF_XDP for all of them: the two ranks of a host share its interface.
func netShare(w *mpi.Comm) error {
	me, n := w.Rank(), w.Size()
	if n != 4 {
		return fmt.Errorf("netshare wants 4 ranks, has %d", n)
	}
	for round := 1; round < n; round++ {
		if err := netStream(w, me^round, 2000); err != nil {
			return fmt.Errorf("round %d, with rank %d: %v", round, me^round, err)
		}
	}
	if err := w.Barrier(); err != nil {
		return err
	}
	host, _ := os.Hostname()
	fmt.Printf("netshare rank %d on %s: path %s, shm messages %d, net messages %d, fallback frames %d, misqueued %d\n",
		me, host, engine.PathName(pvarRead("engine_net_path")), pvarRead("engine_shm_messages"), pvarRead("engine_net_messages"),
		pvarRead("nic_rx_fallback_frames"), pvarRead("nic_xdp_prog_misqueued"))
	if pvarRead("engine_shm_messages") == 0 || pvarRead("engine_net_messages") == 0 {
		return fmt.Errorf("rank %d: %d messages over shared memory, %d over the network; want both", me, pvarRead("engine_shm_messages"), pvarRead("engine_net_messages"))
	}
	return nil
}

// TestNetnsSharedHost runs a job of two hosts with two ranks each, the
// hosts' veths of four queues, under mpiexec.mpich: the ranks of a host
// share one XDP program and take two receive queues each, and all four
// pairs across the hosts go over AF_XDP (engine_net_path xdp-copy: a
// veth has no zero-copy), the pairs within a host over shared memory.
func TestNetnsSharedHost(t *testing.T) {
	mpiexec := needHostJobs(t)
	nw := nictest.Network(t, nethost.Config{Hosts: 2, Queues: 4})
	job := hostJob{role: "netshare", perHost: 2, shareHost: true, env: []string{"TACHYON_NIC_MODE=xdp"}}
	out, took := job.run(t, mpiexec, nw, 3*time.Minute, func(r int, host string) string {
		return fmt.Sprintf("netshare rank %d on %s: path xdp-copy,", r, host)
	})
	t.Logf("%v:\n%s", took, out)
}

// TestNICSharedProgram: processes on one host share its interface's XDP
// program, each on its half of the queues: the second gets the program
// from the first (it could not attach its own) and keeps it attached
// when the first is killed; a third gets it from the second and takes
// the dead one's queue, and so does a link opened after the third was
// killed too; the last link's close detaches the program.
func TestNICSharedProgram(t *testing.T) {
	nw := nictest.Network(t, nethost.Config{Queues: 2})
	h := nw.Hosts[1]
	child, _ := startRole(t, h, "nichold", "TACHYON_NIC_SHARE=0/2")
	open := func(share nic.Share) nic.Link {
		var l nic.Link
		if err := h.Do(func() (err error) {
			l, err = nic.Open(nic.Config{Interface: h.Iface, Mode: nic.ModeXDP, Cookie: nicCookie, Share: share})
			return err
		}); err != nil {
			t.Fatalf("opening share %v beside the child's: %v", share, err)
		}
		return l
	}
	l1 := open(nic.Share{Index: 1, Count: 2})
	defer l1.Close()
	if s := l1.Status(); !slices.Equal(s.Queues, []int{1}) {
		t.Fatalf("share 1 of 2: %+v", s)
	}
	child.Process.Kill()
	child.Wait()
	if on, err := h.XDPAttached(); err != nil || !on {
		t.Fatalf("the program went with the process that loaded it (%v): the other's link holds it", err)
	}
	// A third process gets the program from the second, the one that
	// loaded it gone, and takes the dead one's queue.
	third, cue := startRole(t, h, "nichold", "TACHYON_NIC_SHARE=0/2")
	t.Log(cue)
	third.Process.Kill()
	third.Wait()
	l0 := open(nic.Share{Index: 0, Count: 2})
	if s := l0.Status(); !slices.Equal(s.Queues, []int{0}) {
		t.Fatalf("share 0 of 2 after its holders died: %+v", s)
	}
	// Frames to both links from the other host arrive, whichever queue.
	a := nictest.OpenOn(t, nw.Hosts[0], nic.ModeXDP, nicCookie)
	for _, b := range []nic.Link{l0, l1} {
		if err := nictest.Exchange(a, b, nicCookie, 2000, 32, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	l0.Close()
	l1.Close()
	if on, err := h.XDPAttached(); err != nil || on {
		t.Fatalf("a program stays attached after the last link closed (%v)", err)
	}
}
