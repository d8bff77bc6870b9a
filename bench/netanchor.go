package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
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

// defaultNetAnchor is the kernel UDP anchors' script beside a clone (the
// project's shared folder); -compare -net skips them when it is absent.
const defaultNetAnchor = "../shared/anchors/run-net-anchor.sh"

// runNetAnchor measures the network anchors once and returns each one's
// results by name: the kernel UDP ping-pongs of script, if there is one,
// and MPICH running the comparison program (compare.go).
func runNetAnchor(o options, script string) (map[string][]Result, error) {
	got := map[string][]Result{}
	if _, err := os.Stat(script); err != nil {
		if script != defaultNetAnchor {
			return nil, fmt.Errorf("-compare -net: the kernel anchors' script: %w", err)
		}
		fmt.Fprintln(os.Stderr, "bench: no", script, "here: the kernel UDP anchors are left out")
	} else {
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
	}
	res, err := runMPICHNet(o)
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

// runMPICHNet builds the comparison program with mpicc.mpich and runs it
// under mpiexec.mpich over UCX's TCP transport, one rank in each of two
// hosts, each entering its host through this program (nethost's shim)
// and pinned with taskset to the CPU the benchmark's rank had.
func runMPICHNet(o options) ([]Result, error) {
	if _, err := exec.LookPath("taskset"); err != nil {
		return nil, fmt.Errorf("-compare -net needs taskset (Debian: util-linux): %w", err)
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
	bin, err := buildProgram(mpiImpls[0], dir, "pingpong", pingpongC)
	if err != nil {
		return nil, err
	}

	nw, err := nethost.New(nethost.Config{Hosts: 2, Prefix: "anch", MTU: o.mtu})
	if err != nil {
		return nil, fmt.Errorf("making the anchor's hosts: %w", err)
	}
	defer nw.Close()
	args := mpichNetArgs(nw.Hosts, self, func(i int) []string {
		return []string{"taskset", "-c", strconv.Itoa(cpus[i]), bin, strconv.Itoa(o.max)}
	})
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
