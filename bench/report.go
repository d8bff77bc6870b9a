package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

// writeAnchor prints results in the anchor's line format:
// "latency SIZE US", "msgrate SIZE MMSG_PER_S", "bw SIZE MB_PER_S".
func writeAnchor(w io.Writer, res []Result) {
	for _, r := range res {
		switch {
		case r.Kind == "latency" || r.Kind == "msgrate":
			fmt.Fprintf(w, "%s %d %.3f\n", r.Kind, r.Size, r.Value)
		case r.Kind == "bw" || isPhase(r.Kind):
			fmt.Fprintf(w, "%s %d %.1f\n", r.Kind, r.Size, r.Value)
		case r.Kind == "kick":
			fmt.Fprintf(w, "%s %d %.3f\n", r.Kind, r.Size, r.Value)
		}
	}
}

// parseAnchor reads anchor lines, skipping anything else.
func parseAnchor(r io.Reader) ([]Result, error) {
	var res []Result
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || (f[0] != "latency" && f[0] != "msgrate" && f[0] != "bw" && f[0] != "kick" && !isPhase(f[0])) {
			continue
		}
		size, err1 := strconv.Atoi(f[1])
		v, err2 := strconv.ParseFloat(f[2], 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("malformed result line %q", sc.Text())
		}
		res = append(res, Result{f[0], size, v})
	}
	return res, sc.Err()
}

// series indexes results by kind and size.
type series map[string]map[int]float64

func index(res []Result) series {
	s := series{}
	for _, r := range res {
		if s[r.Kind] == nil {
			s[r.Kind] = map[int]float64{}
		}
		s[r.Kind][r.Size] = r.Value
	}
	return s
}

func (s series) sizes(kind string) []int {
	var out []int
	for n := range s[kind] {
		out = append(out, n)
	}
	sort.Ints(out)
	return out
}

// runAnchor runs the MPICH and Open MPI anchor script and returns each
// implementation's results by name.
func runAnchor(script string, max int) (map[string][]Result, error) {
	if _, err := os.Stat(script); err != nil {
		return nil, fmt.Errorf("-compare needs the anchor script: %w", err)
	}
	fmt.Fprintln(os.Stderr, "running the MPICH and Open MPI anchor:", script)
	cmd := exec.Command("bash", script, "all", strconv.Itoa(max))
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("anchor: %w", err)
	}
	got := map[string][]Result{}
	name := ""
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "# ") {
			name = strings.TrimSpace(line[2:])
			continue
		}
		if name == "" {
			continue
		}
		r, err := parseAnchor(strings.NewReader(line))
		if err != nil {
			return nil, err
		}
		got[name] = append(got[name], r...)
	}
	return got, nil
}

// median returns, for each figure the runs measured, its median over
// them (the mean of the middle two for an even number), in the first
// run's order.
func median(runs [][]Result) []Result {
	if len(runs) == 0 {
		return nil
	}
	type key struct {
		kind string
		size int
	}
	vals := map[key][]float64{}
	for _, run := range runs {
		for _, r := range run {
			k := key{r.Kind, r.Size}
			vals[k] = append(vals[k], r.Value)
		}
	}
	var out []Result
	for _, r := range runs[0] {
		v := vals[key{r.Kind, r.Size}]
		sort.Float64s(v)
		m := v[len(v)/2]
		if len(v)%2 == 0 {
			m = (v[len(v)/2-1] + m) / 2
		}
		out = append(out, Result{r.Kind, r.Size, m})
	}
	return out
}

// medianByName returns the median of each implementation's runs (nil if
// there were none).
func medianByName(runs []map[string][]Result) map[string][]Result {
	if len(runs) == 0 {
		return nil
	}
	byName := map[string][][]Result{}
	for _, run := range runs {
		for name, res := range run {
			byName[name] = append(byName[name], res)
		}
	}
	out := map[string][]Result{}
	for name, r := range byName {
		out[name] = median(r)
	}
	return out
}

// report prints the results as o asks, beside the anchors' if -compare,
// with host, lines on the host's state, if not empty.
func report(o options, res []Result, anchors map[string][]Result, host string) error {
	if o.plot != "" {
		if err := writePlot(o.plot, res, anchors); err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "wrote", o.plot)
	}
	if o.format == "anchor" {
		if host != "" {
			fmt.Fprintln(os.Stderr, host)
		}
		writeAnchor(os.Stdout, res)
		for _, name := range sortedNames(anchors) {
			fmt.Printf("# %s\n", name)
			writeAnchor(os.Stdout, anchors[name])
		}
		return nil
	}
	writeTable(os.Stdout, o, res, anchors, host)
	return nil
}

func sortedNames(m map[string][]Result) []string {
	var names []string
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// writeTable prints one table per measure, Tachyon beside each anchor
// with the ratio (for latency, below 1 is better; for rates, above 1).
func writeTable(w io.Writer, o options, res []Result, anchors map[string][]Result, host string) {
	t := index(res)
	names := sortedNames(anchors)
	others := make([]series, len(names))
	for i, n := range names {
		others[i] = index(anchors[n])
	}
	level := "ThreadSerialized"
	if o.transport == "inproc" || o.thread == "multiple" {
		level = "ThreadMultiple"
	}
	over := map[string]string{"shm": "shared memory (processes)", "inproc": "in-process rings (goroutines)"}[o.transport]
	if o.net != "" {
		over = map[string]string{"xdp": "the network transport on AF_XDP", "udp": "the network transport on UDP"}[o.net]
		if o.twoMachines() {
			over += " (processes on two machines, " + o.iface + " here)"
		} else {
			over += " (processes, two hosts of network namespaces joined by veth)"
		}
		if o.loss > 0 {
			over += fmt.Sprintf(", %g%% of frames lost", 100*o.loss)
		}
	}
	fmt.Fprintf(w, "Tachyon point-to-point, 2 ranks over %s, %s\n", over, level)
	if o.runs > 1 {
		fmt.Fprintf(w, "each figure the median of %d runs of each implementation\n", o.runs)
	}
	if host != "" {
		fmt.Fprintln(w, host)
	}
	for _, m := range []struct{ kind, title, unit string }{
		{"latency", "one-way latency", "us"},
		{"msgrate", "message rate, window of 64", "M msg/s"},
		{"bw", "bandwidth, window of 64", "MB/s"},
	} {
		fmt.Fprintf(w, "\n%s (%s)\n", m.title, m.unit)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		hdr := "size\ttachyon\t"
		// A column for each anchor with figures of this measure at sizes
		// of the table; a line below it for one with figures at others
		// only (sockperf's 14 B).
		var cols []series
		var apart []string
		for i, n := range names {
			switch figs := others[i][m.kind]; {
			case len(figs) == 0:
			case !sharesSize(figs, t[m.kind]):
				for _, size := range others[i].sizes(m.kind) {
					apart = append(apart, fmt.Sprintf("%s: %s %s %s", n, sizeLabel(size), num(figs[size]), m.unit))
				}
			default:
				hdr += n + "\tratio\t"
				cols = append(cols, others[i])
			}
		}
		fmt.Fprintln(tw, hdr)
		for _, size := range t.sizes(m.kind) {
			v := t[m.kind][size]
			line := fmt.Sprintf("%s\t%s\t", sizeLabel(size), num(v))
			for _, s := range cols {
				a, ok := s[m.kind][size]
				if !ok || a == 0 {
					line += "-\t-\t"
					continue
				}
				line += fmt.Sprintf("%s\t%.2f\t", num(a), v/a)
			}
			fmt.Fprintln(tw, line)
		}
		tw.Flush()
		for _, l := range apart {
			fmt.Fprintln(w, l)
		}
	}
	writePhases(w, t)
	writeKicks(w, t)
}

// writeKicks prints the frames rank 0's network link sent per kick in the
// message-rate test, if t has them.
func writeKicks(w io.Writer, t series) {
	sizes := t.sizes("kick")
	if len(sizes) == 0 {
		return
	}
	fmt.Fprintf(w, "\nframes a kick, the sender's, message rate (nic_tx_frames over nic_tx_kicks)\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "size\tframes/kick\t")
	for _, size := range sizes {
		fmt.Fprintf(tw, "%s\t%.2f\t\n", sizeLabel(size), t["kick"][size])
	}
	tw.Flush()
}

// sharesSize reports whether a and b have a figure at one size.
func sharesSize(a, b map[int]float64) bool {
	for size := range a {
		if _, ok := b[size]; ok {
			return true
		}
	}
	return false
}

// writePhases prints the phases of the message-rate windows (-phases),
// if t has them.
func writePhases(w io.Writer, t series) {
	sizes := t.sizes(phaseKinds[0])
	if len(sizes) == 0 {
		return
	}
	fmt.Fprintf(w, "\nwhere a window's time goes (ns a message)\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "size\tsend post\tcollect\tack wait\trecv post\tcollect\tack send\t")
	for _, size := range sizes {
		line := sizeLabel(size) + "\t"
		for _, k := range phaseKinds {
			line += strconv.FormatFloat(t[k][size], 'f', 1, 64) + "\t"
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
}

func num(v float64) string {
	switch {
	case v >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case v > 0 && v < 0.01:
		return strconv.FormatFloat(v, 'g', 3, 64) // a 4 MiB message rate
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

func sizeLabel(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + " KiB"
	}
	return strconv.Itoa(n) + " B"
}
