package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// -rpc's figures, as Results (so that -runs takes their medians as the
// job benchmark's): for each size, rpc_p50, rpc_p99 and rpc_p999 in µs
// of the quiet pass and rpcgc_ the same under load; and, of size 0,
// gcload_client_gbps, gcload_client_gcps and the server's, each
// process's allocation rate (GB/s) and collections a second under load.
//
// The lines they are printed as and read from (-format anchor, and the
// worker's output):
//
//	rpc SIZE P50 P99 P999         the quiet pass, µs
//	rpc_gc SIZE P50 P99 P999      under load
//	gcload client|server GBPS GCPS

// rpcLineKinds maps a line's first word to its figures' prefix.
var rpcLineKinds = map[string]string{"rpc": "rpc_", "rpc_gc": "rpcgc_"}

// parseRPCLines reads lines as above, skipping anything else.
func parseRPCLines(lines []string) ([]Result, error) {
	var res []Result
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		bad := fmt.Errorf("malformed result line %q", line)
		if prefix, ok := rpcLineKinds[f[0]]; ok {
			if len(f) != 5 {
				return nil, bad
			}
			size, err := strconv.Atoi(f[1])
			if err != nil {
				return nil, bad
			}
			for i, q := range []string{"p50", "p99", "p999"} {
				v, err := strconv.ParseFloat(f[2+i], 64)
				if err != nil {
					return nil, bad
				}
				res = append(res, Result{prefix + q, size, v})
			}
		} else if f[0] == "gcload" {
			if len(f) != 4 || (f[1] != "client" && f[1] != "server") {
				return nil, bad
			}
			gbps, err1 := strconv.ParseFloat(f[2], 64)
			gcps, err2 := strconv.ParseFloat(f[3], 64)
			if err1 != nil || err2 != nil {
				return nil, bad
			}
			res = append(res, Result{"gcload_" + f[1] + "_gbps", 0, gbps}, Result{"gcload_" + f[1] + "_gcps", 0, gcps})
		}
	}
	return res, nil
}

// parseRPCAnchor reads -rpc -format anchor's output: the figures of the
// kind under test, then after each "# NAME" line an anchor's.
func parseRPCAnchor(r io.Reader) (res []Result, anchors map[string][]Result, err error) {
	anchors = map[string][]Result{}
	name := ""
	var lines []string
	flush := func() error {
		got, err := parseRPCLines(lines)
		if name == "" {
			res = got
		} else {
			anchors[name] = got
		}
		lines = nil
		return err
	}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if n, ok := strings.CutPrefix(sc.Text(), "# "); ok {
			if err := flush(); err != nil {
				return nil, nil, err
			}
			name = strings.TrimSpace(n)
			continue
		}
		lines = append(lines, sc.Text())
	}
	if err := flush(); err != nil {
		return nil, nil, err
	}
	return res, anchors, sc.Err()
}

// writeRPCAnchor prints res as lines.
func writeRPCAnchor(w io.Writer, res []Result) {
	s := index(res)
	for _, l := range []struct{ line, prefix string }{{"rpc", "rpc_"}, {"rpc_gc", "rpcgc_"}} {
		for _, size := range s.sizes(l.prefix + "p50") {
			fmt.Fprintf(w, "%s %d %.3f %.3f %.3f\n", l.line, size,
				s[l.prefix+"p50"][size], s[l.prefix+"p99"][size], s[l.prefix+"p999"][size])
		}
	}
	for _, who := range []string{"client", "server"} {
		if gbps, ok := s["gcload_"+who+"_gbps"][0]; ok {
			fmt.Fprintf(w, "gcload %s %.3f %.1f\n", who, gbps, s["gcload_"+who+"_gcps"][0])
		}
	}
}

// reportRPC prints an -rpc run's figures as o asks: the kind under
// test's, beside the anchors' with -compare, and host, lines on the
// host's state, if not empty (on stderr with -format anchor, as the job
// benchmark's).
func reportRPC(w io.Writer, o options, res []Result, anchors map[string][]Result, host string) error {
	if o.format == "anchor" {
		if host != "" {
			fmt.Fprintln(os.Stderr, host)
		}
		writeRPCAnchor(w, res)
		for _, name := range orderedAnchors(anchors) {
			fmt.Fprintf(w, "# %s\n", name)
			writeRPCAnchor(w, anchors[name])
		}
		return nil
	}
	writeRPCTable(w, o, res, anchors, host)
	return nil
}

// orderedAnchors returns the anchors' names in rpcAnchorKinds' order,
// then any others sorted.
func orderedAnchors(anchors map[string][]Result) []string {
	var names []string
	for _, k := range rpcAnchorKinds {
		if _, ok := anchors[k]; ok {
			names = append(names, k)
		}
	}
	for _, n := range sortedNames(anchors) {
		if !slices.Contains(rpcAnchorKinds, n) {
			names = append(names, n)
		}
	}
	return names
}

// rpcWhere says where -rpc's two processes run, and over what.
func rpcWhere(o options) string {
	if o.rpc == "host" {
		return "on one host (tachyon: shared memory; tcp and grpc: loopback TCP)"
	}
	over := map[string]string{"xdp": "AF_XDP", "udp": "UDP"}[o.rpc]
	return fmt.Sprintf("in two hosts, network namespaces joined by a veth pair of MTU %d (tachyon: its network transport on %s; tcp and grpc: kernel TCP)", o.mtu, over)
}

// writeRPCTable prints a table per percentile, the kind under test beside
// each anchor with the ratio (below 1: the kind under test is faster),
// and, with a loaded pass, its p99 beside the quiet one.
func writeRPCTable(w io.Writer, o options, res []Result, anchors map[string][]Result, host string) {
	main := o.kind()
	names := orderedAnchors(anchors)
	all := append([]string{main}, names...)
	figs := map[string]series{main: index(res)}
	for _, n := range names {
		figs[n] = index(anchors[n])
	}
	fmt.Fprintf(w, "Request/reply round trip between two processes started separately, a server (CPU %s) and a client (CPU %s) %s\n",
		cpuLabel(o, 1), cpuLabel(o, 0), rpcWhere(o))
	for _, n := range all {
		about := "(not built in)"
		if k := lookupRPC(n); k != nil {
			about = k.about
		} else if n == jobKind {
			about = "the job path: two ranks of go run ./bench's job on the same CPUs and transport, twice its ping-pong's one-way latency (p50 alone)"
		}
		fmt.Fprintf(w, "%s: %s\n", n, about)
	}
	fmt.Fprintf(w, "%d timed round trips of each size after %d untimed, each reply checked\n", o.rpcN, o.warm)
	if o.runs > 1 {
		fmt.Fprintf(w, "each figure the median of %d runs of each kind\n", o.runs)
	}
	if host != "" {
		fmt.Fprintln(w, host)
	}
	t := figs[main]
	column := func(title, kind string, gc bool) {
		names := names
		if gc || kind != "rpc_p50" {
			// The job path is measured quiet, at the median alone.
			names = slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == jobKind })
		}
		fmt.Fprintf(w, "\n%s (us)\n", title)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		hdr := "size\t" + main + "\t"
		quiet := strings.Replace(kind, "rpcgc_", "rpc_", 1)
		if gc {
			hdr += "x quiet\t"
		}
		for _, n := range names {
			hdr += n + "\tratio\t"
			if gc {
				hdr += "x quiet\t"
			}
		}
		fmt.Fprintln(tw, hdr)
		for _, size := range t.sizes(kind) {
			v := t[kind][size]
			line := sizeLabel(size) + "\t" + num(v) + "\t"
			if gc {
				line += ratio(v, t[quiet][size]) + "\t"
			}
			for _, n := range names {
				a, ok := figs[n][kind][size]
				if !ok {
					line += "-\t-\t"
				} else {
					line += num(a) + "\t" + ratio(v, a) + "\t"
				}
				if gc {
					line += ratio(a, figs[n][quiet][size]) + "\t"
				}
			}
			fmt.Fprintln(tw, line)
		}
		tw.Flush()
	}
	column("p50 round trip", "rpc_p50", false)
	column("p99 round trip", "rpc_p99", false)
	column("p999 round trip", "rpc_p999", false)
	if len(t.sizes("rpcgc_p99")) == 0 {
		return
	}
	fmt.Fprintf(w, "\nunder GC load: goroutines of the client and of the server allocating %.2f GB/s each; measured, whole process:\n", o.gcLoad)
	for _, n := range all {
		s := figs[n]
		if n == jobKind {
			continue // measured quiet alone
		}
		fmt.Fprintf(w, "  %s: client %.2f GB/s, %.0f collections/s; server %.2f GB/s, %.0f collections/s\n", n,
			s["gcload_client_gbps"][0], s["gcload_client_gcps"][0], s["gcload_server_gbps"][0], s["gcload_server_gcps"][0])
	}
	column("p99 round trip under GC load", "rpcgc_p99", true)
}

// cpuLabel names the CPUs of the client (0) or the server (1).
func cpuLabel(o options, i int) string {
	cpus, err := rpcCPUs(o.perProc)
	if err != nil {
		return "?"
	}
	s := make([]string, len(cpus[i]))
	for j, c := range cpus[i] {
		s[j] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}

// ratio prints a/b, or "-" without b: two decimals, three below 0.1.
func ratio(a, b float64) string {
	if b == 0 || a == 0 {
		return "-"
	}
	if r := a / b; r < 0.1 {
		return strconv.FormatFloat(r, 'f', 3, 64)
	}
	return strconv.FormatFloat(a/b, 'f', 2, 64)
}
