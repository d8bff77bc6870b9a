package launch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/tachyon-hpc/tachyon/internal/nethost"
	"github.com/tachyon-hpc/tachyon/pmi"
)

// sysProcAttr puts each rank in its own process group (groupAttr), and
// kills the rank if the launcher dies.
func sysProcAttr() *syscall.SysProcAttr {
	a := groupAttr()
	a.Pdeathsig = syscall.SIGKILL
	return a
}

// AllowedCPUs returns, in increasing order, the CPUs the calling thread
// may run on (its sched_getaffinity mask): the set that tachyonrun -bind
// deals out to ranks.
func AllowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, os.NewSyscallError("sched_getaffinity", err)
	}
	var cpus []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// checkCPUs requires every CPU to be one the launcher may run on.
func checkCPUs(cpus []int) error {
	allowed, err := AllowedCPUs()
	if err != nil {
		return err
	}
	ok := map[int]bool{}
	for _, c := range allowed {
		ok[c] = true
	}
	for _, c := range cpus {
		if !ok[c] {
			s := make([]string, len(allowed))
			for i, a := range allowed {
				s[i] = fmt.Sprint(a)
			}
			return fmt.Errorf("%w: CPU %d is not one this process may run on (allowed: %s)", ErrConfig, c, strings.Join(s, ","))
		}
	}
	return nil
}

// bindThread restricts the calling thread, which the caller has locked,
// to cpu, and returns the function that restores its previous mask. A
// process started from the thread meanwhile inherits the restriction
// through fork and exec, before it runs any code of its own.
func bindThread(cpu int) (restore func() error, err error) {
	var orig, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &orig); err != nil {
		return nil, os.NewSyscallError("sched_getaffinity", err)
	}
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("binding to CPU %d: %w", cpu, os.NewSyscallError("sched_setaffinity", err))
	}
	return func() error { return unix.SchedSetaffinity(0, &orig) }, nil
}

// runNetNS is Run with NetNS: a test host for each rank, or each
// NetPerHost ranks (at least two: nethost's smallest network), and a
// PMI-1 process manager, in place of the segment. Everything is removed
// on every path.
func runNetNS(ctx context.Context, cfg Config, path string) (int, error) {
	if err := nethost.Available(); err != nil {
		return 1, fmt.Errorf("launch: a host for each rank: %w", err)
	}
	shim, err := os.Executable()
	if err != nil {
		return 1, fmt.Errorf("launch: finding this program, the shim into each host: %w", err)
	}
	per := max(1, cfg.NetPerHost)
	nw, err := nethost.New(nethost.Config{Hosts: max(2, (cfg.N+per-1)/per), Prefix: "tr", MTU: cfg.NetMTU})
	if err != nil {
		return 1, fmt.Errorf("launch: making a host for each rank: %w", err)
	}
	defer nw.Close()
	j := newJob(cfg, path, "")
	j.hosts, j.shim = nw.Hosts, shim
	if per > 1 {
		// Each host's ranks enter it apart, each with a /dev/shm of its
		// own: a directory of the host's for their segments makes them
		// one host (engine.HostID).
		dir, err := os.MkdirTemp("", "tachyon-hosts-")
		if err != nil {
			return 1, fmt.Errorf("launch: a directory for the hosts' segments: %w", err)
		}
		defer os.RemoveAll(dir)
		for i := range nw.Hosts {
			d := filepath.Join(dir, nw.Hosts[i].Name)
			if err := os.Mkdir(d, 0o700); err != nil {
				return 1, fmt.Errorf("launch: a directory for the hosts' segments: %w", err)
			}
			j.shmDirs = append(j.shmDirs, d)
		}
	}
	j.pm = pmi.NewServer(cfg.N, fmt.Sprintf("tachyon_%d_%d", os.Getpid(), jobSeq.Add(1)), func(rank, code int, msg string) {
		j.aborts <- abort{rank: rank, code: code, msg: msg}
	})
	defer j.pm.Close()
	return j.run(ctx)
}
