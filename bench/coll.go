package main

import (
	"bufio"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/tachyon-hpc/tachyon/internal/nethost"
	"github.com/tachyon-hpc/tachyon/launch"
	"github.com/tachyon-hpc/tachyon/mpi"
)

// -coll measures collectives the way OSU's collective benchmarks do: the
// mean time of one call, the maximum over the ranks, each rank's timed
// loop started by a barrier, for barrier and for bcast, reduce,
// allreduce, allgather and alltoall on 8 B to -max (1 MiB unless set) of
// float64s (Sum for the reductions). compare/coll.c is the same suite
// against the MPI API, which -compare runs under MPICH and Open MPI right
// after Tachyon's ranks. With -net each rank is a host of its own and
// the comparison MPICH over UCX's TCP (collnet.go).

// collEnv marks a rank bench started for -coll; its value is the largest
// size.
const collEnv = "TACHYON_BENCH_COLL"

// collDefaultMax is -coll's largest size when -max is left at its
// default (the point-to-point suite's 4 MiB).
const collDefaultMax = 1 << 20

// collMaxRanks bounds -n.
const collMaxRanks = 64

//go:embed compare/coll.c
var collC []byte

// collOps are the operations after barrier, in the order measured.
var collOps = [...]string{"bcast", "reduce", "allreduce", "allgather", "alltoall"}

// collOversubIters is -coll-iters when it is left at 0 and the ranks
// are more than the CPUs: MPICH's ranks spin while they wait and do not
// yield (MPIR_CVAR_POLLS_BEFORE_YIELD changes nothing in this MPICH,
// 4.0.2 on ch4:ucx: docs/bench.md), so that each of its calls takes
// scheduler time slices, milliseconds, and OSU's counts would take hours.
const collOversubIters = 100

// collIters is the number of timed calls at size, OSU's counts unless
// -coll-iters sets one for every size; a tenth more warm up.
func (o options) collIters(size int) int {
	if o.collItersSet > 0 {
		return o.collItersSet
	}
	switch {
	case size <= 8192:
		return 10000
	case size <= 262144:
		return 1000
	}
	return 100
}

// collMax is the largest size -coll measures.
func (o options) collMax() int {
	if o.max == defaultMax {
		return collDefaultMax
	}
	return o.max
}

// checkColl checks the flags -coll takes.
func (o options) checkColl() error {
	switch {
	case o.ranks < 1 || o.ranks > collMaxRanks:
		return fmt.Errorf("-n %d: want 1 to %d ranks", o.ranks, collMaxRanks)
	case o.max < 8 || o.max > 1<<28:
		return fmt.Errorf("-max %d: want 8 to %d bytes", o.max, 1<<28)
	case o.format != "table" && o.format != "anchor":
		return fmt.Errorf("-format %q: want table or anchor", o.format)
	case o.transport != "shm":
		return errors.New("-coll runs process ranks: leave -transport at shm")
	case o.net != "" && o.net != "xdp" && o.net != "udp":
		return fmt.Errorf("-net %q: want xdp or udp", o.net)
	case o.iface != "":
		return errors.New("-iface is for two machines (-listen, -peer): -coll -net runs simulated hosts")
	case o.net != "" && o.ranks < 2:
		return fmt.Errorf("-n %d: -net wants at least 2 ranks, one a host", o.ranks)
	case o.perHost < 0 || o.perHost > 1 && o.net == "":
		return fmt.Errorf("-per-host %d: want 1 or more, with -net", o.perHost)
	case o.perHost > 1 && o.net == "xdp":
		return errors.New("-per-host with -net xdp: a test host's veth has one receive queue, which AF_XDP gives one rank; use -net udp")
	case o.perHost > 1 && o.compare:
		return errors.New("-per-host with -compare: MPICH's ranks under one Hydra take every rank for local or none (MPIR_CVAR_NOLOCAL), so its figures would not be alike")
	case !(o.loss >= 0 && o.loss < 1) || o.loss > 0 && o.net == "":
		return fmt.Errorf("-loss %v: want a fraction in [0, 1), with -net", o.loss)
	case o.net != "" && (o.mtu < 576 || o.mtu > 65535):
		return fmt.Errorf("-mtu %d: want 576 to 65535", o.mtu)
	case o.runs < 1 || o.runs > maxRuns:
		return fmt.Errorf("-runs %d: want 1 to %d", o.runs, maxRuns)
	case o.thread != "" && o.thread != "serialized" && o.thread != "multiple":
		return fmt.Errorf("-thread %q: want serialized or multiple", o.thread)
	case o.collItersSet < 0 || o.collItersSet > 1e7:
		return fmt.Errorf("-coll-iters %d: want 0 (by size) to 10000000", o.collItersSet)
	case o.anchor != "" && o.anchor != defaultNetAnchor || o.plot != "" || o.phases || o.profile != "":
		return errors.New("-coll takes none of -anchor, -plot, -phases, -cpuprofile")
	}
	if o.net != "" {
		if err := nethost.Available(); err != nil {
			return fmt.Errorf("-coll -net %s needs root and network namespaces: %v", o.net, err)
		}
	}
	return nil
}

// runColl measures -runs times, with the comparison after each run if
// -compare, and reports the medians.
func runColl(o options) (int, error) {
	cpus, err := collCPUs(o.ranks)
	if err != nil {
		return 1, err
	}
	if o.collItersSet == 0 && o.ranks > len(cpus) {
		o.collItersSet = collOversubIters
	}
	var runs [][]Result
	var anchors []map[string][]Result
	for i := range o.runs {
		if o.runs > 1 && !o.quiet {
			fmt.Fprintf(os.Stderr, "run %d of %d\n", i+1, o.runs)
		}
		res, code, err := spawnColl(o)
		if err != nil {
			return code, err
		}
		runs = append(runs, res)
		if o.compare {
			a, err := runCollComparison(o)
			if err != nil {
				return 1, err
			}
			anchors = append(anchors, a)
		}
	}
	reportColl(os.Stdout, o, median(runs), medianByName(anchors))
	return 0, nil
}

// spawnColl runs -n ranks of this program over shared memory (with
// -net, each a host of its own), pinned to the CPUs this process may use
// in turn, and returns rank 0's figures.
func spawnColl(o options) ([]Result, int, error) {
	cpus, err := collCPUs(o.ranks)
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
	code, err := launch.Run(ctx, launch.Config{
		N: o.ranks, Program: self, Args: []string{"-quiet=" + strconv.FormatBool(o.quiet), "-thread=" + o.thread, "-coll-iters=" + strconv.Itoa(o.collItersSet)},
		Env:        append([]string{collEnv + "=" + strconv.Itoa(o.collMax())}, o.netEnv()...),
		CPUs:       cpus,
		NetNS:      o.net != "",
		NetMTU:     o.mtu,
		NetPerHost: o.perHost,
		Stdout:     &out,
	})
	if err != nil || code != 0 {
		if err == nil {
			err = fmt.Errorf("a rank exited with status %d", code)
		}
		return nil, code, err
	}
	res, err := parseColl(strings.NewReader(out.String()))
	if err == nil && len(res) == 0 {
		err = errors.New("the ranks reported no results")
	}
	if err != nil {
		return nil, 1, err
	}
	return res, 0, nil
}

// collAsRank runs the suite as one rank of a job someone else launched
// (tachyonrun, mpiexec, srun); rank 0 reports, with the comparison on as
// many ranks after the job's if -compare.
func collAsRank(o options, progress io.Writer) (int, error) {
	if _, err := mpi.InitThread(o.level()); err != nil {
		return 1, err
	}
	world := mpi.World()
	res, err := collSuite(world, o, o.collMax(), progress)
	o.ranks = world.Size()
	rank := world.Rank()
	if err = errors.Join(err, mpi.Finalize()); err != nil || rank != 0 {
		return 0, err
	}
	var anchors map[string][]Result
	if o.compare {
		if anchors, err = runCollComparison(o); err != nil {
			return 1, err
		}
	}
	reportColl(os.Stdout, o, res, anchors)
	return 0, nil
}

// collWorker is one rank spawnColl started: it runs the suite and rank 0
// prints the figures as coll lines.
func collWorker(o options, progress io.Writer) error {
	max, err := strconv.Atoi(os.Getenv(collEnv))
	if err != nil || max < 8 {
		return fmt.Errorf("%s=%q", collEnv, os.Getenv(collEnv))
	}
	if _, err := mpi.InitThread(o.level()); err != nil {
		return err
	}
	res, err := collSuite(mpi.World(), o, max, progress)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: rank %d: %v\n", mpi.World().Rank(), err)
		mpi.Abort(mpi.World(), 1)
	}
	writeColl(os.Stdout, res)
	return mpi.Finalize()
}

// collSuite measures every operation at every size on c and returns
// rank 0's figures (the other ranks get nil). progress, if not nil, gets
// a line per operation as it starts.
func collSuite(c *mpi.Comm, o options, max int, progress io.Writer) ([]Result, error) {
	n := c.Size()
	// allgather's receive vector holds n blocks of max bytes.
	a := make([]float64, (max/8+1)*n)
	b := make([]float64, (max/8+1)*n)
	var res []Result
	measure := func(op string, size int) error {
		t, err := collTime(c, op, size, o.collIters(size), a, b)
		if err != nil {
			return fmt.Errorf("%s of %d B: %w", op, size, err)
		}
		if c.Rank() == 0 {
			res = append(res, Result{op, size, t})
		}
		return nil
	}
	if progress != nil && c.Rank() == 0 {
		fmt.Fprintf(progress, "barrier on %d ranks\n", n)
	}
	if err := measure("barrier", 0); err != nil {
		return nil, err
	}
	for _, op := range collOps {
		if progress != nil && c.Rank() == 0 {
			fmt.Fprintf(progress, "%s on %d ranks, 8 B to %s\n", op, n, sizeLabel(max))
		}
		for size := 8; size <= max; size *= 2 {
			if err := measure(op, size); err != nil {
				return nil, err
			}
		}
	}
	return res, nil
}

// collTime returns the mean µs of one call of op on size bytes a rank,
// the maximum over c's ranks (at rank 0; the others get 0).
func collTime(c *mpi.Comm, op string, size, iters int, a, b []float64) (float64, error) {
	n := c.Size()
	cnt := size / 8
	blk := max(cnt/n, 1)
	call := func() error {
		switch op {
		case "bcast":
			return mpi.Bcast(c, a[:cnt], 0)
		case "reduce":
			return mpi.Reduce(c, a[:cnt], b[:cnt], mpi.Sum, 0)
		case "allreduce":
			return mpi.Allreduce(c, a[:cnt], b[:cnt], mpi.Sum)
		case "allgather":
			return mpi.Allgather(c, a[:cnt], b[:cnt*n])
		case "alltoall":
			return mpi.Alltoall(c, a[:blk*n], b[:blk*n])
		}
		return c.Barrier()
	}
	warm := iters / 10
	var t0 float64
	for i := range warm + iters {
		if i == warm {
			if err := c.Barrier(); err != nil {
				return 0, err
			}
			t0 = mpi.Wtime()
		}
		if err := call(); err != nil {
			return 0, err
		}
	}
	t := []float64{(mpi.Wtime() - t0) / float64(iters) * 1e6}
	tmax := []float64{0}
	if err := mpi.Reduce(c, t, tmax, mpi.Max, 0); err != nil {
		return 0, err
	}
	return tmax[0], nil
}

// writeColl prints figures as compare/coll.c does: "coll OP SIZE US".
func writeColl(w io.Writer, res []Result) {
	for _, r := range res {
		fmt.Fprintf(w, "coll %s %d %.3f\n", r.Kind, r.Size, r.Value)
	}
}

// parseColl reads coll lines, skipping anything else.
func parseColl(r io.Reader) ([]Result, error) {
	var res []Result
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 || f[0] != "coll" {
			continue
		}
		size, err1 := strconv.Atoi(f[2])
		v, err2 := strconv.ParseFloat(f[3], 64)
		if err1 != nil || err2 != nil || size < 0 {
			return nil, fmt.Errorf("malformed result line %q", sc.Text())
		}
		res = append(res, Result{f[1], size, v})
	}
	return res, sc.Err()
}

// runCollComparison runs compare/coll.c on -n ranks with -coll-iters
// under each MPI implementation installed (underEach), or with -net
// under MPICH over UCX's TCP on as many hosts.
func runCollComparison(o options) (map[string][]Result, error) {
	if o.net != "" {
		res, err := mpichCollNet(o)
		if err != nil {
			return nil, err
		}
		return map[string][]Result{mpichNetName: res}, nil
	}
	return underEach("coll", collC, o.ranks, parseColl, strconv.Itoa(o.collMax()), strconv.Itoa(o.collItersSet))
}

// reportColl prints the figures as -format asks: coll lines (the
// comparison's after a "# NAME" line each), or one table per operation
// with each implementation's time and Tachyon's ratio to it (below 1,
// Tachyon is faster).
func reportColl(w io.Writer, o options, res []Result, anchors map[string][]Result) {
	names := sortedNames(anchors)
	if o.format == "anchor" {
		writeColl(w, res)
		for _, name := range names {
			fmt.Fprintf(w, "# %s\n", name)
			writeColl(w, anchors[name])
		}
		return
	}
	level := "ThreadSerialized"
	if o.thread == "multiple" {
		level = "ThreadMultiple"
	}
	over := "over shared memory (processes"
	if o.net != "" {
		hosts, who := o.ranks, "each a host"
		if o.perHost > 1 {
			hosts, who = (o.ranks+o.perHost-1)/o.perHost, fmt.Sprintf("%d a host", o.perHost)
		}
		over = map[string]string{"xdp": "over the network transport on AF_XDP", "udp": "over the network transport on UDP"}[o.net] +
			" (processes, " + who + " of network namespaces, joined by veth"
		if hosts > 2 {
			over += " and a bridge"
		}
		if o.loss > 0 {
			over += fmt.Sprintf(", %g%% of frames lost", 100*o.loss)
		}
	}
	fmt.Fprintf(w, "Collectives on %d ranks %s, %s), float64 Sum: mean µs a call, the slowest rank's\n", o.ranks, over, level)
	if cpus, err := collCPUs(o.ranks); err == nil && o.ranks > len(cpus) {
		fmt.Fprintf(w, "%d ranks on %d CPUs: oversubscribed, %d timed calls a figure\n", o.ranks, len(cpus), o.collIters(8))
	}
	t := index(res)
	others := make([]series, len(names))
	for i, name := range names {
		others[i] = index(anchors[name])
	}
	for _, op := range append([]string{"barrier"}, collOps[:]...) {
		fmt.Fprintf(w, "\n%s\n", op)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		head := "size\ttachyon\t"
		for _, name := range names {
			head += name + "\tratio\t"
		}
		fmt.Fprintln(tw, head)
		for _, size := range t.sizes(op) {
			line := sizeLabel(size) + "\t" + num(t[op][size]) + "\t"
			for _, s := range others {
				if v, ok := s[op][size]; ok && v > 0 {
					line += num(v) + "\t" + fmt.Sprintf("%.2f", t[op][size]/v) + "\t"
				} else {
					line += "-\t-\t"
				}
			}
			fmt.Fprintln(tw, line)
		}
		tw.Flush()
	}
}
