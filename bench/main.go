// Command bench measures Tachyon's point-to-point latency, message rate
// and bandwidth the way OSU's benchmarks and its comparison program
// (compare/pingpong.c, which -compare runs under MPICH and Open MPI) do: a
// blocking ping-pong from 0 bytes to -max, and windows of 64 nonblocking
// sends, each window acknowledged.
//
// Started plainly it runs its own two ranks, pinned to different CPUs,
// over shared memory (or, with -transport inproc, as two goroutines of one
// process). Started by tachyonrun, MPICH's mpiexec or srun --mpi=pmi2 it
// is one rank of a two-rank job. Process ranks run at ThreadSerialized, as
// the anchor's ranks run at MPI_THREAD_SINGLE, unless -thread multiple.
//
// With -coll it measures collectives on -n ranks instead (coll.go), and
// with -rpc it measures instead the round trip of a request and its reply
// between two services started separately, a server and a client that
// know each other by an address, beside gRPC-Go and a plain TCP
// connection with -compare (rpc.go).
//
//	go run ./bench                       # the table
//	go run ./bench -format anchor        # the anchor's line format
//	go run ./bench -compare              # beside MPICH and Open MPI, same run
//	go run ./bench -compare -runs 5      # medians of 5 runs, the anchors' interleaved
//	go run ./bench -plot docs/bench.svg  # latency and message rate plots
//	go run ./bench -thread multiple      # at the level mpi.Init gives
//	go run ./bench -cpuprofile cpu.pprof # a CPU profile per rank
//	go run ./bench -net xdp              # the two ranks on two hosts (root): AF_XDP
//	go run ./bench -net udp -loss 0.01   # over the UDP fallback, 1% of frames lost
//	go run ./bench -net xdp -compare     # beside MPICH over UCX's TCP and kernel UDP ping-pongs
//	go run ./bench -net xdp -iface eth1 -listen :7700    # machine B: one rank, on a real NIC
//	go run ./bench -net xdp -iface eth1 -peer B:7700     # machine A: the other, which prints the table
//	go run ./bench -coll -compare        # collectives on 2 ranks, beside MPICH and Open MPI
//	go run ./bench -coll -n 4            # on 4 ranks (oversubscribed on 2 CPUs)
//	go run ./bench -coll -net xdp -compare # 4 ranks on 4 hosts (root), beside MPICH over UCX's TCP
//	go run ./bench -rpc host -compare    # request/reply between two services, beside gRPC and TCP
//	go run ./bench -rpc xdp -compare     # the same between two hosts (root)
//
// The build uses default.pgo, a CPU profile of this suite, for
// profile-guided optimization (docs/bench.md says how to remake it).
//
// docs/bench.md has the figures, how to read them, and every flag.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"

	"github.com/tachyon-hpc/tachyon/internal/nethost"
	"github.com/tachyon-hpc/tachyon/launch"
	"github.com/tachyon-hpc/tachyon/mpi"
)

// workerEnv marks a process that bench started as one of its ranks.
const workerEnv = "TACHYON_BENCH_WORKER"

type options struct {
	max          int
	format       string
	transport    string
	compare      bool
	anchor       string
	plot         string
	quiet        bool
	thread       string
	profile      string
	runs         int
	phases       bool
	net          string
	loss         float64
	mtu          int
	coll         bool
	ranks        int
	perHost      int
	collItersSet int
	rpcOptions
	peerOptions
}

func main() {
	nethost.EnterMain() // with -net, bench is also the shim that puts each rank in its host
	rpcWorkerMain()     // a server or a client that -rpc started: its job, then exit
	var o options
	flag.IntVar(&o.max, "max", defaultMax, "largest message size in bytes")
	flag.StringVar(&o.format, "format", "table", "output: table, or anchor (the lines the comparison program, compare/pingpong.c, prints)")
	flag.StringVar(&o.transport, "transport", "shm", "shm (two processes over shared memory) or inproc (two goroutines)")
	flag.BoolVar(&o.compare, "compare", false, "also run the MPICH and Open MPI anchor and print ratios")
	flag.StringVar(&o.anchor, "anchor", "", "with -compare, a script to run in place of the built-in comparison (bench/compare/pingpong.c under mpiexec.mpich and mpiexec.openmpi); with -net, the kernel UDP anchors' script (default ../shared/anchors/run-net-anchor.sh, skipped if absent)")
	flag.StringVar(&o.plot, "plot", "", "write an SVG plot of latency and message rate to this file")
	flag.BoolVar(&o.quiet, "quiet", false, "no progress lines on stderr")
	flag.StringVar(&o.thread, "thread", "", "thread level process ranks ask of InitThread: serialized (the default: one goroutine at a time inside MPI, as the anchor's MPI_THREAD_SINGLE) or multiple (what mpi.Init gives); in-process ranks are always multiple")
	flag.IntVar(&o.runs, "runs", 1, "measure this many times (with -compare, each run followed by one of the anchor) and report each figure's median: a figure of a single run can be hit by a pause of the host (see docs/bench.md)")
	flag.BoolVar(&o.phases, "phases", false, "also time each rank's phases of every message-rate window (posting, collecting, the acknowledgement) and print them in ns a message; the three clock reads this adds to a window slow the rates a little (docs/bench.md)")
	flag.StringVar(&o.net, "net", "", "xdp or udp: run the two ranks (with -coll, the -n ranks) as hosts of their own (network namespaces joined by veth, as tachyonrun -netns does; needs root: bench refuses without) talking over the network transport, on AF_XDP or the UDP fallback; with -iface and -listen or -peer, one rank on each of two machines (netpeer.go)")
	flag.Float64Var(&o.loss, "loss", 0, "with -net, the fraction of frames each rank's link drops on purpose (nic_drop_rate)")
	flag.IntVar(&o.mtu, "mtu", 9000, "with -net, the MTU of the two hosts' interfaces, which the ranks' links take their frames' size from (up to nic_max_mtu)")
	flag.BoolVar(&o.coll, "coll", false, "measure collectives instead (barrier, bcast, reduce, allreduce, allgather, alltoall; 8 B to -max, 1 MiB unless set) on -n process ranks over shared memory, OSU-style; with -compare beside MPICH and Open MPI (compare/coll.c); with -net each rank a host of its own (root), with -compare beside MPICH over UCX's TCP on as many hosts")
	flag.IntVar(&o.collItersSet, "coll-iters", 0, "with -coll, timed calls at every size (0: OSU's counts, 10000 up to 8 KiB, 1000 up to 256 KiB, 100 above; 100 at every size when the ranks are more than the CPUs, where MPICH's spin)")
	flag.IntVar(&o.ranks, "n", 0, "with -coll, the number of ranks: 2, or 4 with -net (more than the CPUs oversubscribe them)")
	flag.IntVar(&o.perHost, "per-host", 1, "with -coll -net udp, ranks a host (tachyonrun -per-host): the collectives run hierarchically, a leader per host (docs/collectives.md)")
	o.rpcOptions.flags()
	o.peerOptions.flags()
	flag.StringVar(&o.profile, "cpuprofile", "", "write a CPU profile of each process rank's suite to this path with .rank0 and .rank1 added (of the whole run with -transport inproc); merge them with go tool pprof -proto; with -rpc, of each server and client with .KIND.server and .KIND.client added (.KIND.gc.server, .KIND.gc.client under -gc-load)")
	flag.Parse()
	o.peerOptions.visit()
	if o.ranks == 0 {
		o.ranks = 2
		if o.coll && o.net != "" {
			o.ranks = 4
		}
	}
	if o.anchor == "" && o.net != "" {
		o.anchor = defaultNetAnchor
	}
	if err := o.check(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	code, err := run(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func (o options) check() error {
	if o.twoMachines() {
		return o.checkPeer()
	}
	if o.rpc != "" {
		if o.coll {
			return errors.New("-coll and -rpc: choose one")
		}
		return o.checkRPC()
	}
	if o.coll {
		return o.checkColl()
	}
	switch {
	case o.max < 1 || o.max > 1<<28:
		return fmt.Errorf("-max %d: want 1 to %d bytes", o.max, 1<<28)
	case o.format != "table" && o.format != "anchor":
		return fmt.Errorf("-format %q: want table or anchor", o.format)
	case o.transport != "shm" && o.transport != "inproc":
		return fmt.Errorf("-transport %q: want shm or inproc", o.transport)
	case o.thread != "" && o.thread != "serialized" && o.thread != "multiple":
		return fmt.Errorf("-thread %q: want serialized or multiple", o.thread)
	case o.transport == "inproc" && o.thread == "serialized":
		return errors.New("-thread serialized: in-process ranks (mpi.Run) are always at ThreadMultiple")
	case o.runs < 1 || o.runs > maxRuns:
		return fmt.Errorf("-runs %d: want 1 to %d", o.runs, maxRuns)
	case o.runs > 1 && o.profile != "":
		return errors.New("-cpuprofile profiles one run: leave -runs at 1")
	case o.net != "" && o.net != "xdp" && o.net != "udp":
		return fmt.Errorf("-net %q: want xdp or udp", o.net)
	case o.net != "" && o.transport != "shm":
		return errors.New("-net runs process ranks: leave -transport at shm")
	case !(o.loss >= 0 && o.loss < 1) || o.loss > 0 && o.net == "":
		return fmt.Errorf("-loss %v: want a fraction in [0, 1), with -net", o.loss)
	case o.net != "" && (o.mtu < 576 || o.mtu > 65535):
		return fmt.Errorf("-mtu %d: want 576 to 65535", o.mtu)
	}
	if o.compare && o.anchor != "" && o.anchor != defaultNetAnchor {
		if _, err := os.Stat(o.anchor); err != nil {
			return fmt.Errorf("-compare needs the anchor script (-anchor): %w", err)
		}
	}
	if o.net != "" {
		if err := nethost.Available(); err != nil {
			return fmt.Errorf("-net %s: %v", o.net, err)
		}
	}
	return nil
}

// level returns the thread level process ranks ask for.
func (o options) level() mpi.ThreadLevel {
	if o.thread == "multiple" {
		return mpi.ThreadMultiple
	}
	return mpi.ThreadSerialized
}

// run measures and reports, and returns the exit status.
func run(o options) (int, error) {
	if o.twoMachines() {
		return runPeer(o)
	}
	if o.rpc != "" {
		return runRPC(o)
	}
	progress := io.Writer(os.Stderr)
	if o.quiet {
		progress = nil
	}
	switch {
	case os.Getenv(collEnv) != "":
		// A rank -coll started: measure, rank 0 prints coll lines.
		return 0, collWorker(o, progress)
	case o.coll && mpi.Launched():
		return collAsRank(o, progress)
	case o.coll:
		return runColl(o)
	case os.Getenv(workerEnv) != "":
		// A rank bench started: measure, rank 0 prints anchor lines.
		return 0, worker(o, progress)
	case mpi.Launched():
		// One rank of a job someone else launched: measure and report.
		// The anchor, if asked for, runs after the last run: the other
		// ranks are gone by then.
		runs, err := asRank(o, progress)
		if err != nil || runs == nil {
			return 0, err
		}
		var anchors []map[string][]Result
		for range o.runs {
			if a, err := anchorRun(o); err != nil {
				return 1, err
			} else if a != nil {
				anchors = append(anchors, a)
			}
		}
		return 0, report(o, median(runs), medianByName(anchors), "")
	}
	// With -compare, the host's state before the runs and after them.
	var h *host
	if o.compare {
		cpus, err := twoCPUs()
		if err != nil {
			return 1, err
		}
		h = measureHost(cpus)
	}
	measure := func() ([]Result, int, error) { return spawn(o) }
	if o.transport == "inproc" {
		measure = func() ([]Result, int, error) {
			stop, err := startProfile(o.profile)
			if err != nil {
				return nil, 1, err
			}
			res, err := inproc(o.max, o.phases, progress)
			if err = errors.Join(err, stop()); err != nil {
				return nil, 1, err
			}
			return res, 0, nil
		}
	}
	var runs [][]Result
	var anchors []map[string][]Result
	for i := range o.runs {
		if o.runs > 1 && progress != nil {
			fmt.Fprintf(progress, "run %d of %d\n", i+1, o.runs)
		}
		res, code, err := measure()
		if err != nil {
			return code, err
		}
		runs = append(runs, res)
		if a, err := anchorRun(o); err != nil {
			return 1, err
		} else if a != nil {
			anchors = append(anchors, a)
		}
	}
	if h != nil {
		h.finish()
	}
	return 0, report(o, median(runs), medianByName(anchors), h.String())
}

// maxRuns bounds -runs: a whole run with the anchor takes about ten
// seconds here.
const maxRuns = 100

// anchorRun runs the anchors once if -compare asks for it (nil
// otherwise): MPICH and Open MPI over shared memory, or with -net the
// network anchors.
func anchorRun(o options) (map[string][]Result, error) {
	switch {
	case !o.compare:
		return nil, nil
	case o.net != "":
		return runNetAnchor(o, o.anchor)
	case o.anchor == "":
		return runComparison(o.max)
	}
	return runAnchor(o.anchor, o.max)
}

// worker is one rank started by spawn.
func worker(o options, progress io.Writer) error {
	max, err := strconv.Atoi(os.Getenv(workerEnv))
	if err != nil {
		return fmt.Errorf("%s=%q", workerEnv, os.Getenv(workerEnv))
	}
	if _, err := mpi.InitThread(o.level()); err != nil {
		return err
	}
	if sizes, err := latencySizes(); err != nil || sizes != nil {
		if err == nil {
			var res []Result
			if res, err = latencySuite(mpi.World(), sizes); err == nil {
				writeAnchor(os.Stdout, res)
			}
		}
		return errors.Join(err, mpi.Finalize())
	}
	writeAnchor(os.Stdout, rankSuite(o, max, progress))
	return mpi.Finalize()
}

// rankSuite runs the suite as one process rank of the world; a failure
// is printed and aborts the job.
func rankSuite(o options, max int, progress io.Writer) []Result {
	res, err := profiledSuite(mpi.World(), o.profile, max, o.phases, progress)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: rank %d: %v\n", mpi.World().Rank(), err)
		mpi.Abort(mpi.World(), 1)
	}
	return res
}

// profiledSuite runs the suite on c, with a CPU profile of this rank
// written to path plus .rank and the rank unless path is empty.
func profiledSuite(c *mpi.Comm, path string, max int, phases bool, progress io.Writer) ([]Result, error) {
	if path != "" {
		path = rankProfile(path, c.Rank())
	}
	stop, err := startProfile(path)
	if err != nil {
		return nil, err
	}
	res, err := suite(c, max, phases, progress)
	return res, errors.Join(err, stop())
}

// rankProfile returns the profile path of rank.
func rankProfile(path string, rank int) string { return path + ".rank" + strconv.Itoa(rank) }

// startProfile starts a CPU profile written to path (none if path is
// empty) and returns what ends it.
func startProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}

// asRank runs the suite -runs times as one rank of a launched job; rank
// 0 gets the results of each run.
func asRank(o options, progress io.Writer) ([][]Result, error) {
	if _, err := mpi.InitThread(o.level()); err != nil {
		return nil, err
	}
	var runs [][]Result
	for range o.runs {
		if res := rankSuite(o, o.max, progress); res != nil {
			runs = append(runs, res)
		}
	}
	return runs, mpi.Finalize()
}

// spawn runs two ranks of this program, pinned to two CPUs, and parses
// rank 0's anchor lines.
func spawn(o options) ([]Result, int, error) { return spawnWith(o) }

// spawnWith is spawn with extra KEY=VALUE entries in the ranks'
// environment.
func spawnWith(o options, extra ...string) ([]Result, int, error) {
	cpus, err := twoCPUs()
	if err != nil {
		return nil, 1, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, 1, err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var out strings.Builder
	env := append(append([]string{workerEnv + "=" + strconv.Itoa(o.max)}, extra...), o.netEnv()...)
	code, err := launch.Run(ctx, launch.Config{
		N: 2, Program: self, Args: []string{"-quiet=" + strconv.FormatBool(o.quiet), "-thread=" + o.thread, "-cpuprofile=" + o.profile, "-phases=" + strconv.FormatBool(o.phases)},
		Env:    env,
		CPUs:   cpus,
		NetNS:  o.net != "",
		NetMTU: o.mtu,
		Stdout: &out,
	})
	if err != nil || code != 0 {
		if err == nil {
			err = fmt.Errorf("a rank exited with status %d", code)
		}
		return nil, code, err
	}
	res, err := parseAnchor(strings.NewReader(out.String()))
	if err != nil {
		return nil, 1, err
	}
	if len(res) == 0 {
		return nil, 1, errors.New("the ranks reported no results")
	}
	return res, 0, nil
}

// netEnv returns the ranks' KEY=VALUE entries for -net: the link's mode
// and its loss (none without -net). The links size their frames by the
// hosts' MTU themselves.
func (o options) netEnv() []string {
	if o.net == "" {
		return nil
	}
	return []string{"TACHYON_NIC_MODE=" + o.net, "TACHYON_NIC_DROP_RATE=" + strconv.FormatFloat(o.loss, 'g', -1, 64)}
}

// inproc runs the suite on two goroutine ranks, each on its own CPU.
func inproc(max int, phases bool, progress io.Writer) ([]Result, error) {
	cpus, err := twoCPUs()
	if err != nil {
		return nil, err
	}
	var res []Result
	err = mpi.Run(2, func(c *mpi.Comm) error {
		runtime.LockOSThread()
		pinThread(cpus[c.Rank()])
		r, err := suite(c, max, phases, progress)
		if c.Rank() == 0 {
			res = r
		}
		return err
	})
	return res, err
}

// twoCPUs returns two CPUs this process may run on, for the two ranks.
func twoCPUs() ([]int, error) {
	cpus, err := launch.AllowedCPUs()
	if err != nil {
		return nil, err
	}
	if len(cpus) < 2 {
		return nil, errors.New("needs two CPUs to pin the two ranks apart")
	}
	return cpus[:2], nil
}
