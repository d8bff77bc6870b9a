package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/tachyon-hpc/tachyon/mpi"
)

// The job path beside -rpc -compare: the round trip the same bytes take
// between the two ranks of a job (go run ./bench's ping-pong, twice its
// one-way latency), in the same run, on the same CPUs, over the same
// transport (shared memory with -rpc host; AF_XDP or UDP between the
// same kind of hosts with -rpc xdp or udp). A connection between services
// started apart should cost no more than that.

// jobKind names the job path's column in -rpc's tables.
const jobKind = "job"

// latencyEnv, set for the ranks spawn starts, asks them for the latency
// test alone, at these sizes (comma-separated).
const latencyEnv = "TACHYON_BENCH_LATENCY_SIZES"

// jobRoundTrip runs the job benchmark's two ranks as -rpc would run its
// processes, and returns their round trips as rpc_p50 figures.
func jobRoundTrip(o options, sizes []int) ([]Result, error) {
	j := o
	j.max = 0
	for _, s := range sizes {
		j.max = max(j.max, s)
	}
	j.compare, j.runs, j.profile, j.phases = false, 1, "", false
	if o.rpc != "host" {
		j.net = o.rpc
	}
	list := make([]string, len(sizes))
	for i, s := range sizes {
		list[i] = strconv.Itoa(s)
	}
	res, _, err := spawnWith(j, latencyEnv+"="+strings.Join(list, ","))
	if err != nil {
		return nil, fmt.Errorf("the job path: %w", err)
	}
	var out []Result
	for _, r := range res {
		if r.Kind == "latency" {
			out = append(out, Result{"rpc_p50", r.Size, 2 * r.Value})
		}
	}
	if len(out) != len(sizes) {
		return nil, fmt.Errorf("the job path reported %d of %d sizes", len(out), len(sizes))
	}
	return out, nil
}

// latencySizes returns the sizes latencyEnv asks a rank for, nil if it
// is unset.
func latencySizes() ([]int, error) {
	v := os.Getenv(latencyEnv)
	if v == "" {
		return nil, nil
	}
	var sizes []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%s=%q", latencyEnv, v)
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}

// latencySuite is the latency test alone at sizes, on c's two ranks:
// rank 0's results (rank 1 returns nil).
func latencySuite(c *mpi.Comm, sizes []int) ([]Result, error) {
	n := 0
	for _, s := range sizes {
		n = max(n, s)
	}
	buf := make([]byte, n)
	if _, err := latency(c, buf[:0]); err != nil { // the untimed pass suite makes too
		return nil, err
	}
	var out []Result
	for _, s := range sizes {
		us, err := latency(c, buf[:s])
		if err != nil {
			return nil, err
		}
		out = append(out, Result{"latency", s, us})
	}
	if c.Rank() != 0 {
		return nil, nil
	}
	return out, nil
}
