package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tachyon-hpc/tachyon/internal/nethost"
)

// The anchors of -compare with -net, measured in the same run as the
// benchmark: MPICH over UCX's TCP transport, its two ranks in two hosts
// made as the benchmark's are (nethost: network namespaces joined by a
// veth pair of the same MTU, pinned to the same CPUs), and the kernel
// UDP ping-pongs of the network anchor script (sockperf, libfabric's
// fi_pingpong, qperf). MPICH runs here rather than in the script because
// the script starts it before the kernel has finished bringing up its
// veth pair, and UCX then finds no device in the second namespace.

// mpichNetName is MPICH's column in the tables.
const mpichNetName = "mpich-ucx-tcp"

// runNetAnchor measures the network anchors once and returns each one's
// results by name. script is the network anchor script; the MPI
// ping-pong it builds, mpi_pingpong.c, lies beside it.
func runNetAnchor(o options, script string) (map[string][]Result, error) {
	if _, err := os.Stat(script); err != nil {
		return nil, fmt.Errorf("-compare needs the network anchor script: %w", err)
	}
	got := map[string][]Result{}
	fmt.Fprintln(os.Stderr, "running the kernel UDP anchors:", script, "kernel")
	cmd := exec.Command("bash", script, "kernel", strconv.Itoa(o.max))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("network anchor script: %w", err)
	}
	for name, res := range parseKernelAnchors(out.String()) {
		got[name] = res
	}
	res, err := runMPICHNet(o, filepath.Join(filepath.Dir(script), "mpi_pingpong.c"))
	if err != nil {
		return nil, err
	}
	got[mpichNetName] = res
	return got, nil
}

// parseKernelAnchors reads the script's "anchor NAME SIZE VALUE us"
// lines (one-way latencies), skipping anything else and figures the
// script could not get.
func parseKernelAnchors(out string) map[string][]Result {
	got := map[string][]Result{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) != 5 || f[0] != "anchor" || f[4] != "us" {
			continue
		}
		size, err1 := strconv.Atoi(f[2])
		v, err2 := strconv.ParseFloat(f[3], 64)
		if err1 != nil || err2 != nil || v <= 0 {
			fmt.Fprintf(os.Stderr, "bench: anchor line without a figure: %q\n", line)
			continue
		}
		got[f[1]] = append(got[f[1]], Result{"latency", size, v})
	}
	return got
}

// runMPICHNet builds the MPI ping-pong with mpicc.mpich and runs it under
// mpiexec.mpich over UCX's TCP transport, one rank in each of two hosts,
// each entering its host through this program (nethost's shim) and
// pinned with taskset to the CPU the benchmark's rank had.
func runMPICHNet(o options, source string) ([]Result, error) {
	for _, tool := range []string{"mpicc.mpich", "mpiexec.mpich", "taskset"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("-compare -net needs %s (Debian: mpich, util-linux): %w", tool, err)
		}
	}
	if _, err := os.Stat(source); err != nil {
		return nil, fmt.Errorf("-compare -net needs the MPI ping-pong beside the script: %w", err)
	}
	cpus, err := twoCPUs()
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "tachyon-bench-anchor-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "pp_mpich")
	if out, err := exec.Command("mpicc.mpich", "-O2", "-w", "-o", bin, source).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building %s: %v\n%s", source, err, out)
	}

	nw, err := nethost.New(nethost.Config{Hosts: 2, Prefix: "anch", MTU: o.mtu})
	if err != nil {
		return nil, fmt.Errorf("making the anchor's hosts: %w", err)
	}
	defer nw.Close()
	args := []string{
		"-genv", "UCX_TLS", "tcp,self",
		"-genv", "UCX_NET_DEVICES", nw.Hosts[0].Iface + "," + nw.Hosts[1].Iface,
		"-genv", "MPIR_CVAR_NOLOCAL", "1",
	}
	for i, h := range nw.Hosts {
		if i > 0 {
			args = append(args, ":")
		}
		k, v, _ := strings.Cut(h.EnterEnv(), "=")
		args = append(args, "-n", "1", "-env", k, v, self, "taskset", "-c", strconv.Itoa(cpus[i]), bin, strconv.Itoa(o.max))
	}
	fmt.Fprintln(os.Stderr, "running MPICH over UCX's TCP between two hosts like the benchmark's")
	cmd := exec.Command("mpiexec.mpich", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("MPICH anchor: %w", err)
	}
	res, err := parseAnchor(&out)
	if err == nil && len(res) == 0 {
		err = errors.New("it printed no figures")
	}
	if err != nil {
		return nil, fmt.Errorf("MPICH anchor: %w", err)
	}
	return res, nil
}
