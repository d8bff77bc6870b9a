package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/nethost"
	"github.com/tachyon-hpc/tachyon/launch"
)

// -coll -net: the collectives with each rank a host of its own (network
// namespaces on a bridge, as tachyonrun -netns makes them; needs root),
// Tachyon's ranks on the network transport over AF_XDP or UDP and, with
// -compare, compare/coll.c under MPICH over UCX's TCP transport in hosts
// made the same way (same number, MTU and CPUs), in the same run.

// mpichCollNet runs compare/coll.c on -n ranks under mpiexec.mpich over
// UCX's TCP transport, rank i in host i, each entering its host through
// this program (nethost's shim) and pinned with taskset to the CPU
// Tachyon's rank i had, and returns its figures.
func mpichCollNet(o options) ([]Result, error) {
	if _, err := exec.LookPath("taskset"); err != nil {
		return nil, fmt.Errorf("-coll -net -compare needs taskset (Debian: util-linux): %w", err)
	}
	cpus, err := collCPUs(o.ranks)
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "tachyon-bench-collnet-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin, err := buildProgram(mpiImpls[0], dir, "coll", collC)
	if err != nil {
		return nil, err
	}
	nw, err := nethost.New(nethost.Config{Hosts: max(2, o.ranks), Prefix: "anch", MTU: o.mtu})
	if err != nil {
		return nil, fmt.Errorf("making the comparison's hosts: %w", err)
	}
	defer nw.Close()
	args := mpichNetArgs(nw.Hosts[:o.ranks], self, func(i int) []string {
		return []string{"taskset", "-c", strconv.Itoa(cpus[i%len(cpus)]), bin, strconv.Itoa(o.collMax()), strconv.Itoa(o.collItersSet)}
	})
	fmt.Fprintf(os.Stderr, "running coll under MPICH over UCX's TCP on %d hosts like the benchmark's\n", o.ranks)
	cmd := exec.Command("mpiexec.mpich", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its ranks with it, to stop them all
	var out bytes.Buffer
	last := &lastFigure{prefix: fmt.Sprintf("coll alltoall %d ", lastCollSize(o.collMax())), seen: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = io.MultiWriter(&out, last), os.Stderr
	if !o.quiet {
		// its figures as they come, for a run that takes minutes
		cmd.Stdout = io.MultiWriter(&out, last, os.Stderr)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("MPICH over UCX's TCP: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-last.seen:
		select {
		case err = <-done:
		case <-time.After(mpichExitGrace):
			// Every figure is out, but its ranks hang in MPI_Finalize, as
			// MPICH over UCX's TCP sometimes does on oversubscribed hosts.
			fmt.Fprintf(os.Stderr, "MPICH printed every figure but had not exited %v later (its ranks hang in MPI_Finalize): stopped\n", mpichExitGrace)
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
			err = nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("MPICH over UCX's TCP: %w", err)
	}
	res, err := parseColl(&out)
	if err == nil && len(res) == 0 {
		err = errors.New("it printed no figures")
	}
	if err != nil {
		return nil, fmt.Errorf("MPICH over UCX's TCP: %w", err)
	}
	return res, nil
}

// mpichExitGrace is how long MPICH may take to exit once it has printed
// its last figure.
const mpichExitGrace = 20 * time.Second

// lastCollSize is the largest size compare/coll.c measures up to max:
// 8 bytes doubled while within it.
func lastCollSize(max int) int {
	s := 8
	for 2*s <= max {
		s *= 2
	}
	return s
}

// lastFigure closes seen once a line written to it starts with prefix.
type lastFigure struct {
	prefix string
	seen   chan struct{}
	once   sync.Once
	line   []byte // the line being written
}

func (w *lastFigure) Write(p []byte) (int, error) {
	for _, b := range p {
		if b != '\n' {
			w.line = append(w.line, b)
			continue
		}
		if strings.HasPrefix(string(w.line), w.prefix) {
			w.once.Do(func() { close(w.seen) })
		}
		w.line = w.line[:0]
	}
	return len(p), nil
}

// mpichNetArgs returns mpiexec.mpich's arguments for one rank in each of
// hosts over UCX's TCP transport (MPIR_CVAR_NOLOCAL: never its shared
// memory, which hosts of one machine could otherwise find), in MPMD form:
// rank i runs shim (this program) with host i's entry in its environment
// and cmd(i) as its arguments.
func mpichNetArgs(hosts []*nethost.Host, shim string, cmd func(i int) []string) []string {
	ifaces := make([]string, len(hosts))
	for i, h := range hosts {
		ifaces[i] = h.Iface
	}
	args := []string{
		"-genv", "UCX_TLS", "tcp,self",
		"-genv", "UCX_NET_DEVICES", strings.Join(ifaces, ","),
		"-genv", "MPIR_CVAR_NOLOCAL", "1",
	}
	for i, h := range hosts {
		if i > 0 {
			args = append(args, ":")
		}
		k, v, _ := strings.Cut(h.EnterEnv(), "=")
		args = append(append(args, "-n", "1", "-env", k, v, shim), cmd(i)...)
	}
	return args
}

// collCPUs returns the CPUs -coll pins its n ranks to, rank i to
// cpus[i%len(cpus)]: the first n this process may use.
func collCPUs(n int) ([]int, error) {
	cpus, err := launch.AllowedCPUs()
	if err != nil {
		return nil, err
	}
	if len(cpus) > n {
		cpus = cpus[:n]
	}
	return cpus, nil
}
