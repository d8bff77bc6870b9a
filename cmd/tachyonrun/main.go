// Command tachyonrun runs a Tachyon job of N processes on this host.
//
//	tachyonrun -n N [-bind] [-cpus 0,1,...] [-prefix] [-netns [-per-host K]] [--] prog [args...]
//
// It creates the job's shared-memory segment, starts N processes of prog
// with their rank, the size and the segment in TACHYON_RANK, TACHYON_SIZE
// and TACHYON_SEGMENT (which mpi.Init reads), forwards their output line
// by line, and exits with the job's status: 0 when every rank exited with
// 0, else the status of the first rank that did not (128+signo for a rank
// killed by a signal), after stopping the others. SIGINT or SIGTERM to
// tachyonrun stops the job the same way, and tachyonrun then exits with
// 128+signo. The segment is removed on every path; one left by a
// tachyonrun killed with SIGKILL is removed by the next run.
//
// Flags:
//
//	-n N       number of ranks (required)
//	-bind      bind rank i to the i-th CPU this process may run on (cyclically)
//	-cpus L    bind rank i to the i-th CPU of the list L (cyclically), e.g. 0,2,4-7
//	-prefix    prefix each output line with "[rank] "
//	-netns     make each rank a host of its own (root): a network namespace
//	           joined to the others by veth pairs and a bridge, its own host
//	           name and /dev/shm; the ranks meet through a PMI-1 process
//	           manager tachyonrun serves and talk over the network
//	           transport, as a job across machines would. Everything made is
//	           removed when the job ends.
//	-per-host K  with -netns, K ranks a host: ranks 0 to K-1 share the first
//	           (its memory, as the ranks of one machine do), and so on.
//
// Usage errors exit with status 2; a job that cannot start (program not
// found, a rank that cannot be started) with status 1.
//
// docs/launching.md covers tachyonrun and the other launchers.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/cli"

	"github.com/tachyon-hpc/tachyon/internal/nethost"
	"github.com/tachyon-hpc/tachyon/launch"
)

// usage is the command line's one-line summary, printed by -h and with every misuse.
var usage = cli.Usage{Name: "tachyonrun", Line: "usage: tachyonrun -n N [-bind] [-cpus 0,1,...] [-prefix] [-netns [-per-host K]] [--] prog [args...]"}

func main() {
	nethost.EnterMain() // with -netns, tachyonrun is also the shim that puts each rank in its host
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is tachyonrun with its arguments and output; it returns the exit
// status.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tachyonrun", flag.ContinueOnError)
	n := fs.Int("n", 0, "number of ranks (required)")
	bind := fs.Bool("bind", false, "bind rank i to the i-th CPU this process may run on")
	cpuList := fs.String("cpus", "", "bind rank i to the i-th CPU of this list, e.g. 0,2,4-7")
	prefix := fs.Bool("prefix", false, "prefix each output line with \"[rank] \"")
	netns := fs.Bool("netns", false, "make each rank a host of its own: network namespace, host name, /dev/shm (root)")
	perHost := fs.Int("per-host", 1, "with -netns, ranks a host: ranks 0 to K-1 share the first, and so on")
	if status, done := usage.Parse(fs, args, stdout, stderr); done {
		return status
	}
	nSet := false
	fs.Visit(func(f *flag.Flag) { nSet = nSet || f.Name == "n" })
	switch {
	case !nSet:
		return usage.Error(stderr, "-n N is required")
	case *n < 1:
		return usage.Error(stderr, fmt.Sprintf("-n must be at least 1 (got %d)", *n))
	case *n > launch.MaxRanks:
		return usage.Error(stderr, fmt.Sprintf("-n %d: at most %d ranks", *n, launch.MaxRanks))
	case fs.NArg() == 0:
		return usage.Error(stderr, "no program to run")
	case *bind && *cpuList != "":
		return usage.Error(stderr, "use -bind or -cpus, not both")
	case *perHost < 1:
		return usage.Error(stderr, fmt.Sprintf("-per-host must be at least 1 (got %d)", *perHost))
	case *perHost > 1 && !*netns:
		return usage.Error(stderr, "-per-host wants -netns")
	}
	cfg := launch.Config{N: *n, Program: fs.Arg(0), Args: fs.Args()[1:], Prefix: *prefix, NetNS: *netns, NetPerHost: *perHost, Stdout: stdout, Stderr: stderr}
	if *cpuList != "" {
		cpus, err := parseCPUs(*cpuList)
		if err != nil {
			return usage.Error(stderr, err.Error())
		}
		cfg.CPUs = cpus
	}
	if *bind {
		cpus, err := launch.AllowedCPUs()
		if err != nil {
			fmt.Fprintf(stderr, "tachyonrun: -bind: %v\n", err)
			return 1
		}
		cfg.CPUs = cpus
	}

	// NotifyContext stops the job; the channel says which signal did.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	code, err := launch.Run(ctx, cfg)
	if ctx.Err() != nil {
		select {
		case s := <-sigs:
			fmt.Fprintf(stderr, "tachyonrun: %v: job stopped\n", s)
			return 128 + int(s.(syscall.Signal))
		case <-time.After(time.Second): // cannot happen: the context ends only by a signal
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "tachyonrun: %v\n", err)
	}
	return code
}

// parseCPUs reads a list such as "0,2,4-7".
func parseCPUs(s string) ([]int, error) {
	var cpus []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		b, err2 := a, error(nil)
		if isRange {
			b, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || a < 0 || b < a || b-a >= 1<<16 {
			return nil, fmt.Errorf("-cpus %q: %q is not a CPU number or a range A-B", s, part)
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}
