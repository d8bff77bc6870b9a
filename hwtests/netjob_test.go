//go:build linux

package hwtests

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/nethost"
	"github.com/tachyon-hpc/tachyon/internal/testrole"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
	"github.com/tachyon-hpc/tachyon/mpi"
	"github.com/tachyon-hpc/tachyon/nic/nictest"
	"github.com/tachyon-hpc/tachyon/progress"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// Jobs across hosts: each rank a test host of its own (network namespace,
// host name, /dev/shm: nethost's shim), started by MPICH's mpiexec in
// MPMD form, one block a host. Nothing can pass through shared memory,
// so every message crosses the network transport.

// netSizes are the message sizes a job's stream cycles through: mostly
// small, some over a frame, an eager one of many frames and a rendezvous.
var netSizes = []int{0, 8, 8, 64, 100, 1400, 1500, 8, 5000, 8, 20000, 8}

// netJob is one rank of a job across hosts (role "netjob"): a ring that
// says where every rank runs, then a stream of TACHYON_HWTEST_MESSAGES
// messages (10000 if unset) of mixed sizes and tags between ranks 2k and
// 2k+1, every byte and the order on each tag checked; and the transport
// counters, which must show the network and no shared memory.
func netJob(w *mpi.Comm) error {
	me, n := w.Rank(), w.Size()
	host, _ := os.Hostname()
	buf := make([]byte, 256)
	for step := 1; step < n; step++ {
		st, err := w.Sendrecv([]byte(host), (me+step)%n, 1, buf, (me-step+n)%n, 1)
		if err != nil {
			return fmt.Errorf("ring step %d: %v", step, err)
		}
		if string(buf[:st.Count]) == host {
			return fmt.Errorf("rank %d runs on %q too: not a host of its own", (me-step+n)%n, host)
		}
	}
	count := 10000
	if v := os.Getenv("TACHYON_HWTEST_MESSAGES"); v != "" {
		count, _ = strconv.Atoi(v)
	}
	peer := me ^ 1
	start := time.Now()
	if peer < n {
		if err := netStream(w, peer, count); err != nil {
			return err
		}
	}
	el := time.Since(start)
	if err := w.Barrier(); err != nil {
		return err
	}
	netMsgs, _ := pvar.Lookup("engine_net_messages")
	shmMsgs, _ := pvar.Lookup("engine_shm_messages")
	if netMsgs.Read() == 0 || shmMsgs.Read() != 0 {
		return fmt.Errorf("%d messages over the network, %d over shared memory", netMsgs.Read(), shmMsgs.Read())
	}
	retx, _ := pvar.Lookup("engine_net_retransmits")
	fast, _ := pvar.Lookup("engine_net_fast_retransmits")
	fmt.Printf("netjob rank %d of %d on %s ok: %d messages in %v, %d frames sent again\n",
		me, n, host, count, el.Round(time.Millisecond), retx.Read()+fast.Read())
	return nil
}

// netStream sends count messages to peer and receives count from it,
// windows of 32 each way.
func netStream(w *mpi.Comm, peer, count int) error {
	const window = 32
	me := w.Rank()
	pattern := func(from, i, n int) []byte {
		b := make([]byte, n)
		for k := range b {
			b[k] = byte(from*7 + i*13 + k)
		}
		return b
	}
	reqs := make([]*mpi.Request, 0, 2*window)
	bufs := make([][]byte, window)
	for base := 0; base < count; base += window {
		reqs = reqs[:0]
		for i := base; i < min(base+window, count); i++ {
			size := netSizes[i%len(netSizes)]
			bufs[i-base] = make([]byte, size)
			r, err := w.Irecv(bufs[i-base], peer, i%5)
			if err != nil {
				return err
			}
			s, err := w.Isend(pattern(me, i, size), peer, i%5)
			if err != nil {
				return err
			}
			reqs = append(reqs, r, s)
		}
		sts, err := mpi.Waitall(reqs)
		if err != nil {
			return fmt.Errorf("messages %d on: %v", base, err)
		}
		for j := 0; j < len(reqs); j += 2 {
			i := base + j/2
			size := netSizes[i%len(netSizes)]
			if sts[j].Count != size || !bytes.Equal(bufs[j/2], pattern(peer, i, size)) {
				return fmt.Errorf("message %d from rank %d: %d bytes, want %d, equal %v", i, peer, sts[j].Count, size, bytes.Equal(bufs[j/2], pattern(peer, i, size)))
			}
		}
	}
	return nil
}

// TestNetnsHydra runs jobs of 2 and 4 ranks, each rank a host of its own,
// under mpiexec.mpich (the PMI socket inherited through the shim): over
// AF_XDP and over UDP, and with loss injected at 1%, 5% and 20% (the XDP
// program's drop rate, the UDP link's in software), a million messages
// each way with none lost, repeated or out of order; and between two
// subnets joined by a router (nethost.Config.Routed), over AF_XDP through
// the router's MAC address, and through the kernel's UDP stack where a
// rank gives ARP no time (nic_neigh_timeout 0).
func TestNetnsHydra(t *testing.T) {
	mpiexec := needHostJobs(t)
	million := "1000000"
	if raceEnabled || testing.Short() {
		million = "20000"
	}
	for _, c := range []struct {
		name   string
		ranks  int
		limit  time.Duration // the job is killed after this
		env    []string
		routed bool
	}{
		{"xdp-2", 2, 2 * time.Minute, []string{"TACHYON_NIC_MODE=xdp"}, false},
		{"udp-2", 2, 2 * time.Minute, []string{"TACHYON_NIC_MODE=udp"}, false},
		{"xdp-4", 4, 2 * time.Minute, []string{"TACHYON_NIC_MODE=xdp"}, false},
		{"xdp-auth-2", 2, 2 * time.Minute, []string{"TACHYON_NIC_MODE=xdp", "TACHYON_ENGINE_NET_AUTH=true"}, false},
		{"xdp-loss-1%", 2, 5 * time.Minute, []string{"TACHYON_NIC_MODE=xdp", "TACHYON_NIC_DROP_RATE=0.01", "TACHYON_HWTEST_MESSAGES=" + million}, false},
		{"xdp-loss-5%", 2, 5 * time.Minute, []string{"TACHYON_NIC_MODE=xdp", "TACHYON_NIC_DROP_RATE=0.05", "TACHYON_HWTEST_MESSAGES=" + million}, false},
		{"udp-loss-20%", 2, 8 * time.Minute, []string{"TACHYON_NIC_MODE=udp", "TACHYON_NIC_DROP_RATE=0.2", "TACHYON_HWTEST_MESSAGES=" + million,
			"TACHYON_ENGINE_NET_STALL_TIMEOUT=20s"}, false},
		{"xdp-routed-2", 2, 2 * time.Minute, []string{"TACHYON_NIC_MODE=xdp"}, true},
		{"xdp-routed-kernel-2", 2, 2 * time.Minute, []string{"TACHYON_NIC_MODE=xdp", "TACHYON_NIC_NEIGH_TIMEOUT=0s"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			nw := nictest.Network(t, nethost.Config{Hosts: c.ranks, Routed: c.routed})
			job := hostJob{role: "netjob", env: c.env}
			out, took := job.run(t, mpiexec, nw, c.limit, finished("netjob", c.ranks))
			t.Logf("%v:\n%s", took, out)
		})
	}
}

// TestNetnsAuthMismatch: a job whose ranks disagree on engine_net_auth
// fails at Init, on the rank that differs from rank 0, with an error that
// says to set it alike.
func TestNetnsAuthMismatch(t *testing.T) {
	mpiexec := needHostJobs(t)
	nw := nictest.Network(t, nethost.Config{Hosts: 2})
	job := hostJob{role: "netjob", hostEnv: func(i int) []string {
		return []string{"TACHYON_ENGINE_NET_AUTH=" + strconv.FormatBool(i == 0)}
	}}
	_, cmd := jobCommand(t, 2*time.Minute, mpiexec, job.args(t, nw)...)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "engine_net_auth is off here but the job authenticates its frames") {
		t.Fatalf("a job with engine_net_auth on rank 0 only: %v\n%s", err, out)
	}
}

// tachyonrunNetns skips t without network namespaces, and returns a
// tachyonrun built for it and this test binary, which its ranks run.
func tachyonrunNetns(t *testing.T) (bin, exe string) {
	t.Helper()
	if err := nethost.Available(); err != nil {
		testskip.Skip(t, testskip.NoNamespaces, err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return buildProgram(t, "github.com/tachyon-hpc/tachyon/cmd/tachyonrun"), exe
}

// TestTachyonrunNetns: tachyonrun -netns makes each rank a host of its
// own, serves their PMI connections, and removes everything afterwards:
// jobs of 2 and 4 ranks over AF_XDP across the bridge, a job whose clocks
// start apart (clock_test.go), and an Abort that stops the job with its
// code.
func TestTachyonrunNetns(t *testing.T) {
	bin, exe := tachyonrunNetns(t)
	before, _ := exec.Command("ip", "-o", "link").Output()
	run := func(role string, n int, env ...string) (string, int) {
		cmd := exec.Command(bin, "-netns", "-n", strconv.Itoa(n), exe, testrole.NoTests)
		cmd.Env = append(os.Environ(), testrole.Setting(role), "TACHYON_NIC_MODE=xdp", "TACHYON_HWTEST_MESSAGES=20000")
		cmd.Env = append(cmd.Env, env...)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	for _, n := range []int{2, 4} {
		out, code := run("netjob", n)
		if code != 0 {
			t.Fatalf("%d ranks: exit %d:\n%s", n, code, out)
		}
		for r := range n {
			if !strings.Contains(out, fmt.Sprintf("netjob rank %d of %d", r, n)) {
				t.Fatalf("%d ranks: rank %d did not finish:\n%s", n, r, out)
			}
		}
	}
	base, hz, ok := progress.SharedClock()
	if ok {
		out, code := run("clock", 3, fmt.Sprintf("%s=%d,%v", clockEnv, base, hz), "TACHYON_ENGINE_NET_CLOCK_INTERVAL=100ms")
		if code != 0 {
			t.Fatalf("clock: exit %d:\n%s", code, out)
		}
		checkClocks(t, out, 3)
	} else {
		t.Log("no time-stamp counter: the clock job needs one that every host reads alike")
	}
	out, code := run("abort", 3)
	if code != 7 || !strings.Contains(out, "rank 1 aborted the job with code 7") {
		t.Fatalf("abort: exit %d:\n%s", code, out)
	}
	if after, _ := exec.Command("ip", "-o", "link").Output(); string(after) != string(before) {
		t.Fatalf("links left behind:\nbefore %s\nafter %s", before, after)
	}
}

// TestTachyonrunPerHost: tachyonrun -netns -per-host 2 puts two ranks on
// each of three hosts (the last has one): the collective job finds them
// sharing memory within a host and the network across, and its
// collectives run hierarchically (collJob checks the counter).
func TestTachyonrunPerHost(t *testing.T) {
	bin, exe := tachyonrunNetns(t)
	const n = 5
	cmd := exec.Command(bin, "-netns", "-per-host", "2", "-n", strconv.Itoa(n), exe, testrole.NoTests)
	cmd.Env = append(os.Environ(), testrole.Setting("colls"), "TACHYON_NIC_MODE=udp")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	for r := range n {
		host := fmt.Sprintf("-host%d", r/2) // nethost's names: nX-hostI
		if !regexp.MustCompile(fmt.Sprintf(`colls rank %d of %d on n\d+%s ok`, r, n, host)).Match(out) {
			t.Errorf("rank %d did not finish on host %s:\n%s", r, host, out)
		}
	}
}
