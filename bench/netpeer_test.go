package main

import (
	"context"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/nethost"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
	"github.com/tachyon-hpc/tachyon/mpi"
	"github.com/tachyon-hpc/tachyon/nic"
)

// peerTestEnv marks the test binary started as one side of a
// two-machine run: it is bench then, its arguments bench's flags.
const peerTestEnv = "TACHYON_BENCH_PEER_TEST"

// peerTestWorker is TestMain's branch for the sides TestTwoMachines
// starts: bench's main, which exits.
func peerTestWorker() {
	if os.Getenv(peerTestEnv) == "" {
		return
	}
	main()
}

// TestTwoMachines runs bench -listen in one simulated host and bench
// -peer in another (network namespaces joined by a veth pair of two
// queues, as two machines with a NIC each), over AF_XDP and over UDP:
// both print the same table, under a header that names the path, the
// hook and the queues.
func TestTwoMachines(t *testing.T) {
	if err := nethost.Available(); err != nil {
		testskip.Skip(t, testskip.NoNamespaces, err)
	}
	for _, tc := range []struct {
		mode string
		want []string // in the header of both sides
	}{
		{"xdp", []string{
			"2 ranks over the network transport on AF_XDP (processes on two machines, bp",
			"path: AF_XDP, copy mode (the driver gave no zero-copy), the XDP program in the generic hook (engine_net_path xdp-copy)",
			", driver veth ",
			"queues: AF_XDP sockets on receive queues 0-1 of the interface's 2\n",
		}},
		{"udp", []string{
			"2 ranks over the network transport on UDP (processes on two machines, bp",
			"path: UDP, the kernel's sockets (engine_net_path udp)",
		}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			nw, err := nethost.New(nethost.Config{Hosts: 2, Prefix: "bp", Queues: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer nw.Close()
			a, b := nw.Hosts[0], nw.Hosts[1]
			addr := netip.AddrPortFrom(b.IP, 7700).String()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			var wg sync.WaitGroup
			outs := make([]string, 2)
			errs := make([]error, 2)
			side := func(i int, h *nethost.Host, args ...string) {
				defer wg.Done()
				outs[i], errs[i] = runSide(ctx, t, h, append([]string{"-net", tc.mode, "-iface", h.Iface}, args...)...)
			}
			wg.Add(2)
			go side(1, b, "-listen", addr)
			go side(0, a, "-peer", addr, "-max", "16")
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("side %d: %v\n%s", i, err, outs[i])
				}
			}
			for i, out := range outs {
				for _, w := range tc.want {
					if !strings.Contains(out, w) {
						t.Fatalf("side %d's output lacks %q:\n%s", i, w, out)
					}
				}
			}
			t.Logf("the dialling side:\n%s", outs[0])
			// The figures are the dialling side's on both, every size.
			_, table0, ok0 := strings.Cut(outs[0], "\none-way latency")
			_, table1, ok1 := strings.Cut(outs[1], "\none-way latency")
			if !ok0 || !ok1 || table0 != table1 {
				t.Fatalf("the two sides' tables differ:\n%s\n---\n%s", outs[0], outs[1])
			}
			for _, row := range []string{" 0 B ", "16 B ", "message rate", "bandwidth"} {
				if !strings.Contains(table0, row) {
					t.Fatalf("the table lacks %q:\n%s", row, table0)
				}
			}
		})
	}
}

// runSide runs the test binary as bench with args inside h and returns
// its standard output; its standard error goes to the test's log.
func runSide(ctx context.Context, t *testing.T, h *nethost.Host, args ...string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	cmd, err := h.Command(self, args...)
	if err != nil {
		return "", err
	}
	cmd.Env = append(cmd.Env, peerTestEnv+"=1", "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, logWriter{t}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		cmd.Process.Kill()
		err = <-done
		if err == nil {
			err = ctx.Err()
		}
	}
	return out.String(), err
}

// TestPeerOptions: a two-machine run's flags are checked with errors
// that say what to do.
func TestPeerOptions(t *testing.T) {
	dial := options{max: 64, format: "table", transport: "shm", runs: 1, net: "xdp", peerOptions: peerOptions{iface: "lo", peer: "10.0.0.2:7700"}}
	listen := options{max: defaultMax, format: "table", transport: "shm", runs: 1, net: "udp", peerOptions: peerOptions{iface: "lo", listen: ":7700"}}
	for _, tc := range []struct {
		name string
		o    options
		set  func(*options)
		want string // in the error; "" for none
	}{
		{"dial", dial, func(*options) {}, ""},
		{"listen", listen, func(*options) {}, ""},
		{"listen on a host", listen, func(o *options) { o.listen = "127.0.0.1:0" }, ""},
		{"both", dial, func(o *options) { o.listen = ":1" }, "choose one"},
		{"iface alone", dial, func(o *options) { o.peer = "" }, "without -listen or -peer"},
		{"no iface", dial, func(o *options) { o.iface = "" }, "-iface: name the interface"},
		{"no such iface", dial, func(o *options) { o.iface = "nosuch0" }, `-iface "nosuch0"`},
		{"no net", dial, func(o *options) { o.net = "" }, `-net ""`},
		{"net", dial, func(o *options) { o.net = "tcp" }, `-net "tcp"`},
		{"peer without host", dial, func(o *options) { o.peer = ":7700" }, "name the host"},
		{"peer without port", dial, func(o *options) { o.peer = "10.0.0.2" }, "want host:port"},
		{"peer port", dial, func(o *options) { o.peer = "10.0.0.2:x" }, "the port must be"},
		{"listen port", listen, func(o *options) { o.listen = ":70000" }, "the port must be"},
		{"compare", dial, func(o *options) { o.compare = true }, "-compare"},
		{"loss", dial, func(o *options) { o.loss = 0.1 }, "-loss"},
		{"mtu", dial, func(o *options) { o.mtuSet = true }, "-mtu"},
		{"coll", dial, func(o *options) { o.coll = true }, "-coll"},
		{"rpc", dial, func(o *options) { o.rpc = "xdp" }, "-rpc"},
		{"inproc", dial, func(o *options) { o.transport = "inproc" }, "-transport"},
		{"max", dial, func(o *options) { o.max = 0 }, "-max 0"},
		{"runs", dial, func(o *options) { o.runs = 0 }, "-runs 0"},
		{"listener max", listen, func(o *options) { o.max = 64 }, "the dialling side's"},
		{"listener runs", listen, func(o *options) { o.runs = 3 }, "the dialling side's"},
		{"listener phases", listen, func(o *options) { o.phases = true }, "the dialling side's"},
		{"thread", dial, func(o *options) { o.thread = "single" }, "-thread"},
	} {
		o := tc.o
		tc.set(&o)
		err := o.check()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

// TestDescribePath: the header names the path, the hook, the driver,
// the queues and a flow rule, or why the link is UDP.
func TestDescribePath(t *testing.T) {
	card, err := nic.ParseCard("xdp/10.0.0.1:7000/02:00:00:00:00:01/0/3818")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		p    mpi.NetPath
		want []string
	}{
		{"zerocopy", mpi.NetPath{Path: "xdp-zerocopy", Card: card, HasLink: true, Link: nic.Status{
			Mode: nic.ModeXDP, Interface: "eth1", Driver: "mlx5_core 6.8", Attach: "driver", ZeroCopy: true,
			Queues: []int{4, 5, 6, 7, 9}, InterfaceQueues: 16, Steered: true}},
			[]string{"path: AF_XDP, zero-copy, the XDP program in the driver hook (engine_net_path xdp-zerocopy)",
				"link: eth1, driver mlx5_core 6.8, this side 10.0.0.1:7000, frames of up to 3818 B",
				"queues: AF_XDP sockets on receive queues 4-7,9 of the interface's 16, a flow rule steers"}},
		{"unsteered", mpi.NetPath{Path: "xdp-copy", Card: card, HasLink: true, Link: nic.Status{
			Mode: nic.ModeXDP, Interface: "eth1", Attach: "generic", Queues: []int{1}, InterfaceQueues: 2}},
			[]string{"copy mode", "generic hook", "driver unknown", "receive queue 1 of the interface's 2, no flow rule"}},
		{"fallback", mpi.NetPath{Path: "udp", Card: card, HasLink: true, Link: nic.Status{
			Mode: nic.ModeUDP, Interface: "eth1", Fallback: "attaching the XDP program to eth1 (another program may hold it)"}},
			[]string{"path: UDP, the kernel's sockets (this side could not have AF_XDP: attaching the XDP program to eth1 (another program may hold it))"}},
		{"peer on udp", mpi.NetPath{Path: "udp", Card: card, HasLink: true, Link: nic.Status{Mode: nic.ModeXDP, Interface: "eth1", Queues: []int{0}, InterfaceQueues: 1}},
			[]string{"the other side's link is UDP", "receive queue 0 of the interface's 1"}},
	} {
		got := describePath(tc.p, "eth1")
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q lacks %q", tc.name, got, w)
			}
		}
	}
}
