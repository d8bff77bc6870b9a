package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/nethost"
	"github.com/tachyon-hpc/tachyon/launch"
	"github.com/tachyon-hpc/tachyon/mpi"
)

// The request/reply benchmark, -rpc: the round trip of a request and its
// reply between two services started separately, a server and a client
// that know each other only by an address, as Tachyon's sessions serve
// (Session.Listen, Session.Dial) and as gRPC and plain TCP serve a Go
// service team. For each kind it measures (rpc_kind.go):
//
//  1. bench starts a server process (itself, rpcEnv holding the job),
//     bound to the second of its two CPUs, and waits for its "ready";
//  2. it starts a client process bound to the first CPU, which dials the
//     address, makes -rpc-warmup untimed calls and -rpc-n timed ones of
//     each size, checks every reply, and prints p50, p99 and p999;
//  3. it stops the server (SIGTERM);
//  4. with -gc-load, it does 1 to 3 again with both processes allocating
//     at that rate in goroutines of their own (rpc_gcload.go).
//
// With -rpc host both processes run on this host; with -rpc xdp or udp
// the server runs in one host and the client in another, two network
// namespaces joined by a veth pair (nethost, as -net makes them), with
// Tachyon's network transport on AF_XDP or UDP. -compare measures the
// anchors (rpcAnchorKinds) after the kind under test in each run, in the
// same hosts.

// rpcOptions are -rpc's flags.
type rpcOptions struct {
	rpc     string  // host, xdp or udp; "" for the job benchmark
	rpcKind string  // the kind to measure ("" for defaultRPCKind)
	sizes   string  // comma-separated request sizes
	rpcN    int     // timed calls of each size
	warm    int     // untimed calls of each size before them
	gcLoad  float64 // GB/s each process allocates in the second pass; 0: no second pass
	perProc int     // CPUs each process is bound to (-rpc-cpus)
}

// defaultMax is -max's default, which -rpc leaves alone.
const defaultMax = 4 << 20

func (r *rpcOptions) flags() {
	flag.StringVar(&r.rpc, "rpc", "", "host, xdp or udp: measure the round trip of a request and its reply between two processes started separately, a server and a client connected by an address: on this host, or in two hosts (network namespaces joined by veth, as -net makes them; needs root) with Tachyon over AF_XDP or UDP (docs/bench.md)")
	flag.StringVar(&r.rpcKind, "rpc-kind", "", "with -rpc, the kind of transport measured: "+strings.Join(rpcKindNames(), ", ")+" (default "+defaultRPCKind()+")")
	flag.StringVar(&r.sizes, "rpc-sizes", "64,4096", "with -rpc, the request (and reply) sizes in bytes, comma-separated")
	flag.IntVar(&r.rpcN, "rpc-n", 20000, "with -rpc, the timed round trips of each size")
	flag.IntVar(&r.warm, "rpc-warmup", 2000, "with -rpc, the untimed round trips of each size before the timed ones")
	flag.IntVar(&r.perProc, "rpc-cpus", 1, "with -rpc, the CPUs each of the two processes is bound to (its GOMAXPROCS): the client the first of the allowed CPUs, the server the next; more than 1 leaves the -gc-load goroutines CPUs of their own beside the calls'")
	flag.Float64Var(&r.gcLoad, "gc-load", 1, "with -rpc, GB/s that goroutines of the client and of the server allocate in a second pass, whose figures are printed beside the quiet pass's; 0: no second pass")
}

// kind returns the kind -rpc measures.
func (r rpcOptions) kind() string {
	if r.rpcKind != "" {
		return r.rpcKind
	}
	return defaultRPCKind()
}

// sizeList parses -rpc-sizes.
func (r rpcOptions) sizeList() ([]int, error) {
	var out []int
	for _, f := range strings.Split(r.sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < rpcMinSize || n > rpcMaxSize {
			return nil, fmt.Errorf("-rpc-sizes %q: want sizes of %d to %d bytes, comma-separated", r.sizes, rpcMinSize, rpcMaxSize)
		}
		if slices.Contains(out, n) {
			return nil, fmt.Errorf("-rpc-sizes %q: %d twice", r.sizes, n)
		}
		out = append(out, n)
	}
	return out, nil
}

// checkRPC checks the flags of an -rpc run (check's part for it).
func (o options) checkRPC() error {
	switch {
	case o.rpc != "host" && o.rpc != "xdp" && o.rpc != "udp":
		return fmt.Errorf("-rpc %q: want host, xdp or udp", o.rpc)
	case o.format != "table" && o.format != "anchor":
		return fmt.Errorf("-format %q: want table or anchor", o.format)
	case o.max != defaultMax || o.transport != "shm" || o.phases || o.plot != "" || o.net != "" || o.loss != 0 || o.anchor != "":
		return errors.New("-rpc measures requests and replies between two services: -max, -transport, -phases, -plot, -net, -loss and -anchor are the job benchmark's")
	case o.runs < 1 || o.runs > maxRuns:
		return fmt.Errorf("-runs %d: want 1 to %d", o.runs, maxRuns)
	case o.runs > 1 && o.profile != "":
		return errors.New("-cpuprofile profiles one run: leave -runs at 1")
	case o.rpc != "host" && (o.mtu < 576 || o.mtu > 65535):
		return fmt.Errorf("-mtu %d: want 576 to 65535", o.mtu)
	case o.rpcN < 1 || o.rpcN > 10_000_000:
		return fmt.Errorf("-rpc-n %d: want 1 to 10000000", o.rpcN)
	case o.warm < 0 || o.warm > 10_000_000:
		return fmt.Errorf("-rpc-warmup %d: want 0 to 10000000", o.warm)
	case !(o.gcLoad >= 0 && o.gcLoad <= 100):
		return fmt.Errorf("-gc-load %v: want 0 to 100 GB/s", o.gcLoad)
	case mpi.Launched():
		return errors.New("-rpc starts its own server and client: run it plainly, not under a launcher")
	}
	if lookupRPC(o.kind()) == nil {
		why := ""
		if o.kind() == tachyonKind {
			why = " (tachyon is built in with -tags rpctachyon)"
		}
		return fmt.Errorf("-rpc-kind %q: want one of %s%s", o.kind(), strings.Join(rpcKindNames(), ", "), why)
	}
	if _, err := o.sizeList(); err != nil {
		return err
	}
	if o.rpc != "host" {
		if err := nethost.Available(); err != nil {
			return fmt.Errorf("-rpc %s: %v", o.rpc, err)
		}
	}
	return nil
}

// rpcKindsToRun returns the kinds an -rpc run measures: the kind under
// test, then with -compare the anchors.
func (o options) rpcKindsToRun() []string {
	kinds := []string{o.kind()}
	if o.compare {
		for _, a := range rpcAnchorKinds {
			if a != o.kind() {
				kinds = append(kinds, a)
			}
		}
	}
	return kinds
}

// rpcCPUs returns the CPUs of the client and of the server, n each, of
// those this process may use.
func rpcCPUs(n int) ([][]int, error) {
	cpus, err := launch.AllowedCPUs()
	if err != nil {
		return nil, err
	}
	if n < 1 || len(cpus) < 2*n {
		return nil, fmt.Errorf("-rpc-cpus %d: needs %d CPUs to bind the two processes apart, %d allowed", n, 2*n, len(cpus))
	}
	return [][]int{cpus[:n], cpus[n : 2*n]}, nil
}

// runRPC measures and reports an -rpc run, and returns the exit status.
func runRPC(o options) (int, error) {
	cpus, err := rpcCPUs(o.perProc)
	if err != nil {
		return 1, err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var h *host
	if o.compare {
		h = measureHost([]int{cpus[0][0], cpus[1][0]})
	}
	pl, err := newRPCPlace(o, cpus)
	if err != nil {
		return 1, err
	}
	defer pl.close()
	if !o.quiet {
		pl.progress = os.Stderr
	}
	res, anchors, err := pl.runs(ctx, o)
	if err != nil {
		return 1, err
	}
	if h != nil {
		h.finish()
	}
	return 0, reportRPC(os.Stdout, o, res, anchors, h.String())
}

// runs measures -runs times each kind o asks for, and returns the
// median of each figure of the kind under test and of each anchor's.
func (pl *rpcPlace) runs(ctx context.Context, o options) ([]Result, map[string][]Result, error) {
	sizes, err := o.sizeList()
	if err != nil {
		return nil, nil, err
	}
	kinds := o.rpcKindsToRun()
	var runs [][]Result
	var anchors []map[string][]Result
	for i := range o.runs {
		if o.runs > 1 && pl.progress != nil {
			fmt.Fprintf(pl.progress, "run %d of %d\n", i+1, o.runs)
		}
		got := map[string][]Result{}
		for _, k := range kinds {
			res, err := pl.measure(ctx, o, k, sizes)
			if err != nil {
				return nil, nil, err
			}
			got[k] = res
		}
		if o.compare && kinds[0] == tachyonKind {
			if pl.progress != nil {
				fmt.Fprintf(pl.progress, "rpc %s: the job path\n", o.rpc)
			}
			res, err := jobRoundTrip(o, sizes)
			if err != nil {
				return nil, nil, err
			}
			got[jobKind] = res
		}
		runs = append(runs, got[kinds[0]])
		delete(got, kinds[0])
		if len(got) > 0 {
			anchors = append(anchors, got)
		}
	}
	return median(runs), medianByName(anchors), nil
}

// rpcPlace is where an -rpc run's processes go: the CPUs, the hosts and
// the addresses.
type rpcPlace struct {
	self     string
	cpus     [][]int          // the client's, the server's
	nw       *nethost.Network // the two hosts, or nil for this one
	env      []string         // for both processes, beside their job
	starter  *pinnedStarter
	port     int       // the last port a server had in the hosts
	progress io.Writer // a line per pass, or nil
	stderr   io.Writer // where the processes' stderr goes besides the errors
	fault    string    // the servers' (tests only)
}

// newRPCPlace makes the hosts of -rpc xdp|udp, if asked for.
func newRPCPlace(o options, cpus [][]int) (*rpcPlace, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	pl := &rpcPlace{self: self, cpus: cpus, port: 7790, stderr: os.Stderr}
	if o.rpc != "host" {
		pl.nw, err = nethost.New(nethost.Config{Hosts: 2, Prefix: "rpc", MTU: o.mtu})
		if err != nil {
			return nil, fmt.Errorf("making the hosts of -rpc %s: %w", o.rpc, err)
		}
		pl.env = append(pl.env, "TACHYON_NIC_MODE="+o.rpc) // the links size their frames by the MTU
	}
	pl.starter = newPinnedStarter()
	return pl, nil
}

// close removes the hosts; every process has ended by then.
func (pl *rpcPlace) close() {
	pl.starter.close()
	if pl.nw != nil {
		pl.nw.Close()
	}
}

// measure runs kind's passes, quiet and with -gc-load under load, and
// returns their figures: rpc_p50, rpc_p99, rpc_p999 of each size, and
// under load rpcgc_ ones and the processes' allocation rates (gcload_).
func (pl *rpcPlace) measure(ctx context.Context, o options, kind string, sizes []int) ([]Result, error) {
	res, err := pl.pass(ctx, o, kind, sizes, 0)
	if err != nil || o.gcLoad == 0 {
		return res, err
	}
	loaded, err := pl.pass(ctx, o, kind, sizes, o.gcLoad*1e9)
	return append(res, loaded...), err
}

// pass starts a server and a client of kind, the client measures every
// size, and pass returns their figures. load is the bytes a second each
// allocates besides.
func (pl *rpcPlace) pass(ctx context.Context, o options, kind string, sizes []int, load float64) ([]Result, error) {
	what := kind
	if load > 0 {
		what += fmt.Sprintf(", each process allocating %.2f GB/s", load/1e9)
	}
	if pl.progress != nil {
		fmt.Fprintf(pl.progress, "rpc %s: %s\n", o.rpc, what)
	}
	addr, err := pl.addr()
	if err != nil {
		return nil, err
	}
	profile := func(role string) string {
		if o.profile == "" {
			return ""
		}
		if load > 0 {
			role = "gc." + role
		}
		return o.profile + "." + kind + "." + role
	}
	server, err := pl.start(rpcJob{Role: "server", Kind: kind, Addr: addr, GCLoad: load, Profile: profile("server"), Fault: pl.fault, Thread: o.thread}, 1)
	if err != nil {
		return nil, fmt.Errorf("%s: starting the server: %w", what, err)
	}
	defer server.kill()
	if err := server.waitReady(ctx, rpcReady); err != nil {
		return nil, fmt.Errorf("%s: the server: %w", what, err)
	}
	client, err := pl.start(rpcJob{Role: "client", Kind: kind, Addr: addr, Sizes: sizes, N: o.rpcN, Warm: o.warm, GCLoad: load, Profile: profile("client"), Thread: o.thread}, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: starting the client: %w", what, err)
	}
	defer client.kill()
	if err := client.wait(ctx, 0); err != nil {
		return nil, fmt.Errorf("%s: the client: %w", what, err)
	}
	server.cmd.Process.Signal(syscall.SIGTERM)
	if err := server.wait(ctx, 10*time.Second); err != nil {
		return nil, fmt.Errorf("%s: the server: %w", what, err)
	}
	res, err := parseRPCLines(append(client.output(), server.output()...))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if got := index(res)["rpc_p50"]; len(got) != len(sizes) {
		return nil, fmt.Errorf("%s: the client reported %d of %d sizes", what, len(got), len(sizes))
	}
	if load > 0 {
		for i := range res {
			res[i].Kind = strings.Replace(res[i].Kind, "rpc_", "rpcgc_", 1)
		}
	}
	return res, nil
}

// addr returns an address for the next server: a free port of this
// host's loopback, or a port of the server's host that no server of
// this run had.
func (pl *rpcPlace) addr() (string, error) {
	if pl.nw == nil {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		defer ln.Close()
		return ln.Addr().String(), nil
	}
	pl.port++
	return net.JoinHostPort(pl.nw.Hosts[1].IP.String(), strconv.Itoa(pl.port)), nil
}

// rpcProc is a server or a client bench started.
type rpcProc struct {
	cmd    *exec.Cmd
	ready  chan struct{} // closed at the line "ready"
	exited chan struct{} // closed once the process has ended
	err    error         // why it ended, once exited is closed
	mu     sync.Mutex
	lines  []string  // what it printed, but "ready"
	tail   *lastLine // its stderr's last line
}

// start starts job: the server (cpu 1) in the second host and on the
// second CPU, the client (cpu 0) in the first host and on the first CPU.
func (pl *rpcPlace) start(job rpcJob, cpu int) (*rpcProc, error) {
	spec, err := json.Marshal(job)
	if err != nil {
		return nil, err
	}
	var cmd *exec.Cmd
	if pl.nw != nil {
		// bench is the shim that puts the process in its host, then
		// execs itself (nethost.EnterMain).
		if cmd, err = pl.nw.Hosts[cpu].Command(pl.self); err != nil {
			return nil, err
		}
	} else {
		cmd = exec.Command(pl.self)
		cmd.Env = os.Environ()
	}
	cmd.Env = append(append(cmd.Env, pl.env...), rpcEnv+"="+string(spec))
	p := &rpcProc{cmd: cmd, ready: make(chan struct{}), exited: make(chan struct{}), tail: &lastLine{}}
	cmd.Stderr = io.MultiWriter(pl.stderr, p.tail)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := pl.starter.start(cmd, pl.cpus[cpu]); err != nil {
		out.Close()
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(out)
		ready := false
		for sc.Scan() {
			if line := sc.Text(); line == "ready" && !ready {
				ready = true
				close(p.ready)
			} else {
				p.mu.Lock()
				p.lines = append(p.lines, line)
				p.mu.Unlock()
			}
		}
		io.Copy(io.Discard, out)
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// waitReady waits for the server's "ready".
func (p *rpcProc) waitReady(ctx context.Context, limit time.Duration) error {
	select {
	case <-p.ready:
		return nil
	case <-p.exited:
		return p.failure("ended before it was ready")
	case <-time.After(limit):
		return fmt.Errorf("not ready after %v", limit)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// wait waits for the process to end, for at most limit (0: no limit),
// and returns an error unless it ended with status 0.
func (p *rpcProc) wait(ctx context.Context, limit time.Duration) error {
	var timeout <-chan time.Time
	if limit > 0 {
		timeout = time.After(limit)
	}
	select {
	case <-p.exited:
		if p.err != nil {
			return p.failure(p.err.Error())
		}
		return nil
	case <-timeout:
		return fmt.Errorf("still running after %v", limit)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// failure describes how the process ended, with its last line on stderr.
func (p *rpcProc) failure(what string) error {
	if l := p.tail.String(); l != "" {
		return fmt.Errorf("%s: %s", what, l)
	}
	return errors.New(what)
}

// kill ends the process if it is still running, and waits for it.
func (p *rpcProc) kill() {
	select {
	case <-p.exited:
	default:
		p.cmd.Process.Kill()
		<-p.exited
	}
}

// output returns what the process printed on stdout, but "ready".
func (p *rpcProc) output() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.lines)
}

// lastLine keeps the last non-empty line written to it.
type lastLine struct {
	mu        sync.Mutex
	last, cur []byte
}

func (l *lastLine) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range b {
		if c != '\n' {
			l.cur = append(l.cur, c)
		} else if len(l.cur) > 0 {
			l.last, l.cur = l.cur, l.last[:0]
		}
	}
	return len(b), nil
}

func (l *lastLine) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.cur) > 0 {
		return string(l.cur)
	}
	return string(l.last)
}
