package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tachyon-hpc/tachyon/mpi"
	"github.com/tachyon-hpc/tachyon/nic"
)

// Two machines, one rank each: the job benchmark between a process that
// waits on an address (-listen) and one started on another machine that
// dials it (-peer), each with its network link on the interface -iface
// names, in the mode -net names. They meet through Tachyon's sessions
// (mpi.Session.Listen and Dial, docs/services.md): the connection is an
// intercommunicator, which Merge makes the two-rank communicator the
// suite runs on, the dialling side rank 0. The dialling side's -max,
// -runs and -phases set the run; both sides print the table, under a
// header that says the path of the frames (AF_XDP zero-copy or copy, the
// XDP program's hook, the receive queues the link has sockets on, or UDP
// and why).
//
//	machine B: bench -net xdp -iface eth1 -listen :7700
//	machine A: bench -net xdp -iface eth1 -peer B:7700

// peerOptions are the two-machine mode's flags.
type peerOptions struct {
	iface  string // the interface of the link (nic_interface)
	listen string // the address to wait on for the other side
	peer   string // the address of the other side's -listen
	mtuSet bool   // -mtu was given (it makes simulated hosts only)
}

func (p *peerOptions) flags() {
	flag.StringVar(&p.iface, "iface", "", "with -net and -listen or -peer, the network interface the rank's link opens on (nic_interface), on this machine")
	flag.StringVar(&p.listen, "listen", "", "with -net and -iface, run one rank on this machine and wait on this TCP address (host:port, or :port for every address) for the other, started on another machine with -peer; it serves one run, whose -max, -runs and -phases the other side sets (docs/nic.md, On a real NIC)")
	flag.StringVar(&p.peer, "peer", "", "with -net and -iface, run one rank on this machine and dial the other at this address (host:port of its -listen), on another machine, retrying for a minute until it listens")
}

// visit notes which of the flags that matter to the mode were set.
func (p *peerOptions) visit() {
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "mtu" {
			p.mtuSet = true
		}
	})
}

// twoMachines reports whether the run is one side of a two-machine run.
func (p peerOptions) twoMachines() bool { return p.listen != "" || p.peer != "" || p.iface != "" }

// dialling reports whether this side dials: it is rank 0 and sets the
// run.
func (p peerOptions) dialling() bool { return p.peer != "" }

// Tags of the two sides' own messages (the suite uses 1 to 4).
const (
	peerParamsTag  = 100 // the dialling side's -max, -runs and -phases
	peerResultsTag = 101 // the figures, as anchor lines
)

// peerDialWait is how long the dialling side retries while nothing
// listens at -peer: the two sides may be started in either order.
const peerDialWait = time.Minute

// checkPeer checks the flags of a two-machine run (check's part for it).
func (o options) checkPeer() error {
	const usage = "a two-machine run is -net xdp|udp -iface NAME and either -listen [HOST]:PORT or -peer HOST:PORT"
	switch {
	case o.listen != "" && o.peer != "":
		return errors.New("-listen and -peer: one side waits (-listen), the other dials it (-peer); choose one")
	case o.listen == "" && o.peer == "":
		return fmt.Errorf("-iface %q without -listen or -peer: %s", o.iface, usage)
	case o.net != "xdp" && o.net != "udp":
		return fmt.Errorf("-net %q: %s", o.net, usage)
	case o.iface == "":
		return fmt.Errorf("-iface: name the interface the link opens on (ip -br addr lists them): %s", usage)
	case o.rpc != "" || o.coll:
		return errors.New("-listen and -peer run the point-to-point suite: -rpc and -coll are not for two machines")
	case o.compare || o.anchor != "" && o.anchor != defaultNetAnchor:
		return errors.New("-compare and -anchor run their anchors between simulated hosts on this machine: leave them out of a two-machine run")
	case o.loss != 0:
		return errors.New("-loss drops frames between simulated hosts: leave it out of a two-machine run (nic_drop_rate still applies to each side, TACHYON_NIC_DROP_RATE)")
	case o.mtuSet:
		return fmt.Errorf("-mtu sets the simulated hosts' interfaces: a two-machine run takes %s's own (ip link set %s mtu N)", o.iface, o.iface)
	case o.transport != "shm":
		return errors.New("-transport: a two-machine run is two process ranks, over the network")
	case o.thread != "" && o.thread != "serialized" && o.thread != "multiple":
		return fmt.Errorf("-thread %q: want serialized or multiple", o.thread)
	case o.format != "table" && o.format != "anchor":
		return fmt.Errorf("-format %q: want table or anchor", o.format)
	case mpi.Launched():
		return errors.New("-listen and -peer start one rank each: run them plainly, not under a launcher")
	}
	if o.dialling() {
		switch {
		case o.max < 1 || o.max > 1<<28:
			return fmt.Errorf("-max %d: want 1 to %d bytes", o.max, 1<<28)
		case o.runs < 1 || o.runs > maxRuns:
			return fmt.Errorf("-runs %d: want 1 to %d", o.runs, maxRuns)
		case o.runs > 1 && o.profile != "":
			return errors.New("-cpuprofile profiles one run: leave -runs at 1")
		}
		if err := checkHostPort("-peer", o.peer, false); err != nil {
			return err
		}
	} else {
		if o.max != defaultMax || o.runs != 1 || o.phases || o.plot != "" {
			return errors.New("-max, -runs, -phases and -plot are the dialling side's (-peer): the listening side runs what it asks")
		}
		if err := checkHostPort("-listen", o.listen, true); err != nil {
			return err
		}
	}
	if _, err := net.InterfaceByName(o.iface); err != nil {
		return fmt.Errorf("-iface %q: %v (ip -br addr lists the interfaces)", o.iface, err)
	}
	return nil
}

// checkHostPort checks that addr is host:port with a port number; the
// host may be left out where optional.
func checkHostPort(name, addr string, optional bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s %q: want host:port (%v)", name, addr, err)
	}
	if host == "" && !optional {
		return fmt.Errorf("%s %q: name the host (host:port)", name, addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 || n == 0 && !optional {
		return fmt.Errorf("%s %q: the port must be a number from 1 to 65535", name, addr)
	}
	return nil
}

// runPeer runs this machine's side of a two-machine run and returns the
// exit status.
func runPeer(o options) (int, error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	progress := io.Writer(os.Stderr)
	if o.quiet {
		progress = nil
	}
	say := func(format string, args ...any) {
		if progress != nil {
			fmt.Fprintf(progress, "bench: "+format+"\n", args...)
		}
	}
	mode := map[string]mpi.NetMode{"xdp": mpi.NetXDP, "udp": mpi.NetUDP}[o.net]
	name := "bench-listen"
	if o.dialling() {
		name = "bench-peer"
	}
	s, err := mpi.NewSession(mpi.WithStandalone(), mpi.WithName(name), mpi.WithThreadLevel(o.level()), mpi.WithNetwork(o.iface, mode))
	if err != nil {
		return 1, err
	}
	defer closeSession(s)
	var inter *mpi.Comm
	if o.dialling() {
		say("dialling %s (link on %s, %s)", o.peer, o.iface, o.net)
		inter, err = dialPeer(ctx, s, o.peer)
	} else {
		var ln *mpi.Listener
		if ln, err = s.Listen(o.listen); err != nil {
			return 1, err
		}
		say("listening on %s (link on %s, %s): start the other side with -net %s -iface IFACE -peer %s", ln.Addr(), o.iface, o.net, o.net, peerHint(ln.Addr().String()))
		inter, err = ln.Accept(ctx)
		ln.Close()
	}
	if err != nil {
		return 1, err
	}
	defer inter.Disconnect()
	c, err := inter.Merge(!o.dialling()) // the dialling side first: rank 0
	if err != nil {
		return 1, err
	}
	if o, err = agreeRun(c, o); err != nil {
		return 1, err
	}
	p, err := c.NetPath(1 - c.Rank())
	if err != nil {
		return 1, err
	}
	if p.Path == "none" {
		return 1, errors.New("the other side is on this host (its messages go by shared memory, not the network): run it on another machine, or set TACHYON_ENGINE_NET_FORCE=true")
	}
	header := describePath(p, o.iface)
	say("%s", strings.ReplaceAll(header, "\n", "; "))
	var runs [][]Result
	for i := range o.runs {
		if o.runs > 1 {
			say("run %d of %d", i+1, o.runs)
		}
		res, err := profiledSuite(c, o.profile, o.max, o.phases, progress)
		if err != nil {
			return 1, err
		}
		runs = append(runs, res)
	}
	res, err := shareResults(c, median(runs))
	if err != nil {
		return 1, err
	}
	return 0, report(o, res, nil, header)
}

// peerHint returns the address the other side dials for a listener on
// addr: the host left as HOST where it listens on every address.
func peerHint(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified() {
		return "HOST:" + port
	}
	return addr
}

// dialPeer dials addr, again while nothing listens there (for up to
// peerDialWait), and returns the connection.
func dialPeer(ctx context.Context, s *mpi.Session, addr string) (*mpi.Comm, error) {
	deadline := time.Now().Add(peerDialWait)
	for {
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		c, err := s.Dial(dctx, addr)
		cancel()
		if err == nil || !errors.Is(err, mpi.ErrPort) || time.Now().After(deadline) || ctx.Err() != nil {
			if err != nil && errors.Is(err, mpi.ErrPort) {
				err = fmt.Errorf("-peer %s: nothing answered for %v (is bench -listen running there?): %w", addr, peerDialWait, err)
			}
			return c, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// agreeRun sends the dialling side's -max, -runs and -phases to the
// listening side, which takes them, and returns o as both run it.
func agreeRun(c *mpi.Comm, o options) (options, error) {
	var b [24]byte
	if c.Rank() == 0 {
		binary.LittleEndian.PutUint64(b[0:], uint64(o.max))
		binary.LittleEndian.PutUint64(b[8:], uint64(o.runs))
		if o.phases {
			b[16] = 1
		}
		return o, c.Send(b[:], 1, peerParamsTag)
	}
	st, err := c.Recv(b[:], 0, peerParamsTag)
	if err != nil {
		return o, err
	}
	max, runs := int64(binary.LittleEndian.Uint64(b[0:])), int64(binary.LittleEndian.Uint64(b[8:]))
	if st.Count != len(b) || max < 1 || max > 1<<28 || runs < 1 || runs > maxRuns {
		return o, fmt.Errorf("the dialling side asked for -max %d and -runs %d in %d bytes: not a bench of this version?", max, runs, st.Count)
	}
	o.max, o.runs, o.phases = int(max), int(runs), b[16] == 1
	return o, nil
}

// shareResults sends rank 0's figures to rank 1, and returns them on
// both.
func shareResults(c *mpi.Comm, res []Result) ([]Result, error) {
	if c.Rank() == 0 {
		var b strings.Builder
		for _, r := range res { // parseAnchor's lines, every digit
			fmt.Fprintf(&b, "%s %d %s\n", r.Kind, r.Size, strconv.FormatFloat(r.Value, 'g', -1, 64))
		}
		return res, c.Send([]byte(b.String()), 1, peerResultsTag)
	}
	st, err := c.Probe(0, peerResultsTag)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, st.Count)
	if _, err := c.Recv(buf, 0, peerResultsTag); err != nil {
		return nil, err
	}
	return parseAnchor(strings.NewReader(string(buf)))
}

// describePath says, in a few lines for the table's header, how this
// side's frames reach the other: the path, the link's mode, hook and
// driver, and its receive queues.
func describePath(p mpi.NetPath, iface string) string {
	st := p.Link
	var b strings.Builder
	switch p.Path {
	case "xdp-zerocopy":
		fmt.Fprintf(&b, "path: AF_XDP, zero-copy, the XDP program in the %s hook", st.Attach)
	case "xdp-copy":
		fmt.Fprintf(&b, "path: AF_XDP, copy mode (the driver gave no zero-copy), the XDP program in the %s hook", st.Attach)
	case "udp":
		b.WriteString("path: UDP, the kernel's sockets")
		switch {
		case st.Fallback != "":
			fmt.Fprintf(&b, " (this side could not have AF_XDP: %s)", st.Fallback)
		case st.Mode == nic.ModeXDP:
			b.WriteString(" (this side is on AF_XDP, the other side's link is UDP)")
		}
	default:
		fmt.Fprintf(&b, "path: %s", p.Path)
	}
	fmt.Fprintf(&b, " (engine_net_path %s)\n", p.Path)
	ifc := st.Interface
	if ifc == "" {
		ifc = iface
	}
	fmt.Fprintf(&b, "link: %s, driver %s, this side %v, frames of up to %d B", ifc, orNone(st.Driver), p.Card.AddrPort(), p.Card.MTU)
	if len(st.Queues) > 0 {
		fmt.Fprintf(&b, "\nqueues: AF_XDP sockets on receive queue%s %s of the interface's %d", plural(len(st.Queues)), queueList(st.Queues), st.InterfaceQueues)
		switch {
		case st.Steered:
			b.WriteString(", a flow rule steers the link's port to the first")
		case len(st.Queues) < st.InterfaceQueues:
			b.WriteString(", no flow rule: frames on other queues come through the link's UDP socket")
		}
	}
	return b.String()
}

// queueList writes queues as ranges: "0-3", "0,2".
func queueList(qs []int) string {
	var parts []string
	for i := 0; i < len(qs); {
		j := i
		for j+1 < len(qs) && qs[j+1] == qs[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", qs[i], qs[j]))
		} else {
			parts = append(parts, strconv.Itoa(qs[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func orNone(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
