// Command tachyonstat shows the performance variables of running Tachyon
// processes from outside, without stopping or asking them, as AeronStat
// does for Aeron: every process that called mpi.Init publishes its
// variables in a file of shared memory (package metrics/statshm), one file
// per session (mpi.NewSession's, or Init's "default"), and tachyonstat
// reads those files with atomic loads alone, taking no lock the job
// takes.
//
//	tachyonstat [-dir D] [-job J] [-rank R] [-pid P] [-session S] [-stale] [-json] [-watch T [-count N]] [prefix...]
//	tachyonstat -remove-stale [-dir D]
//
// With no selection it lists the live files it finds, one line each:
// pid, rank, size, session, job, host, command, variables, age of the
// values. With a selection (-job, -rank, -pid, -session, or name
// prefixes) it shows the selected files' variables whose names start
// with one of the prefixes (all without prefixes); a state variable shows
// the name of its value (udp, not 2). -json writes one JSON document
// instead, for scripts: every selected process with its header and
// variables, a state variable with its value and its name ("state"). -watch shows the
// variables again every T (with each counter's rate per second between
// two refreshes) until interrupted, or -count times; with -json it writes
// one document a line each time.
//
// Files whose processes died without Finalize (killed, or exited early)
// are stale: they are left out (-stale shows them, marked) and counted on
// standard error; -remove-stale removes them. Each file is readable by its
// owner only: other users' files are skipped, counted in one line on
// standard error (root reads them all).
//
// Flags:
//
//	-dir D          directory of the files (default: metrics_stat_dir, /dev/shm)
//	-job J          processes whose job name starts with J
//	-rank R         the processes of world rank R
//	-pid P          the process P
//	-session S      the sessions named S
//	-stale          show stale files' last values too
//	-json           write JSON
//	-watch T        refresh every T (a duration: 1s, 500ms)
//	-count N        with -watch: stop after N refreshes
//	-remove-stale   remove the stale files and say which
//
// Exit status: 0 when it showed at least one process (or removed what was
// stale), 1 when none matched or the directory cannot be read, 2 for a
// usage error. Errors are one line on standard error.
//
// docs/tachyonstat.md describes its views and the file it reads.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/cli"

	"github.com/tachyon-hpc/tachyon/metrics/statshm"
)

// usage is the command line's one-line summary, printed by -h and with every misuse.
var usage = cli.Usage{Name: "tachyonstat", Line: "usage: tachyonstat [-dir D] [-job J] [-rank R] [-pid P] [-session S] [-stale] [-json] [-watch T [-count N]] [-remove-stale] [prefix...]"}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// options are the parsed command line.
type options struct {
	dir, job       string
	session        string
	rank, pid      int
	stale, json    bool
	watch          time.Duration
	count          int
	removeStale    bool
	prefixes       []string
	selected       bool            // a selection was given: show variables
	clear          bool            // stdout is a terminal: clear it between refreshes
	warnedBadFiles map[string]bool // files reported unreadable, other users' included
}

// run is tachyonstat with its arguments and output; it returns the exit
// status. Cancelling ctx ends -watch.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tachyonstat", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.dir, "dir", statshm.Dir(), "directory of the files (metrics_stat_dir)")
	fs.StringVar(&o.job, "job", "", "processes whose job name starts with `J`")
	fs.IntVar(&o.rank, "rank", -1, "the processes of world rank `R`")
	fs.IntVar(&o.pid, "pid", 0, "the process `P`")
	fs.StringVar(&o.session, "session", "", "the sessions named `S`")
	fs.BoolVar(&o.stale, "stale", false, "show stale files' last values too")
	fs.BoolVar(&o.json, "json", false, "write JSON")
	fs.DurationVar(&o.watch, "watch", 0, "refresh every `T`")
	fs.IntVar(&o.count, "count", 0, "with -watch: stop after `N` refreshes")
	fs.BoolVar(&o.removeStale, "remove-stale", false, "remove the stale files")
	if status, done := usage.Parse(fs, args, stdout, stderr); done {
		return status
	}
	o.prefixes = fs.Args()
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case set["rank"] && o.rank < 0:
		return usage.Error(stderr, fmt.Sprintf("-rank %d: a rank is at least 0", o.rank))
	case set["pid"] && o.pid <= 0:
		return usage.Error(stderr, fmt.Sprintf("-pid %d: a pid is positive", o.pid))
	case set["watch"] && o.watch <= 0:
		return usage.Error(stderr, fmt.Sprintf("-watch %v: the interval must be positive", o.watch))
	case set["count"] && !set["watch"]:
		return usage.Error(stderr, "-count goes with -watch")
	case o.count < 0:
		return usage.Error(stderr, fmt.Sprintf("-count %d: must be positive", o.count))
	case o.removeStale && len(set) > 1+btoi(set["dir"]) || o.removeStale && len(o.prefixes) > 0:
		return usage.Error(stderr, "-remove-stale takes no other flag than -dir")
	}
	o.selected = set["job"] || set["rank"] || set["pid"] || set["session"] || len(o.prefixes) > 0
	if f, ok := stdout.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			o.clear = true
		}
	}
	o.warnedBadFiles = map[string]bool{}

	if o.removeStale {
		removed, err := statshm.RemoveStale(o.dir)
		for _, p := range removed {
			fmt.Fprintln(stdout, "removed", p)
		}
		if err != nil {
			fmt.Fprintf(stderr, "tachyonstat: %v\n", oneLine(err))
			return 1
		}
		if len(removed) == 0 {
			fmt.Fprintf(stdout, "no stale files in %s\n", o.dir)
		}
		return 0
	}

	readers := map[string]*statshm.Reader{}
	defer func() {
		for _, r := range readers {
			r.Close()
		}
	}()
	if o.watch == 0 {
		stats, stale, err := collect(&o, readers, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "tachyonstat: %v\n", err)
			return 1
		}
		return show(&o, stats, stale, nil, stdout, stderr)
	}

	var prev map[string]*statshm.Stat
	t := time.NewTicker(o.watch)
	defer t.Stop()
	for n := 1; ; n++ {
		stats, stale, err := collect(&o, readers, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "tachyonstat: %v\n", err)
			return 1
		}
		if o.clear && !o.json {
			io.WriteString(stdout, "\x1b[H\x1b[2J")
		} else if n > 1 && !o.json {
			io.WriteString(stdout, "\n")
		}
		show(&o, stats, stale, prev, stdout, stderr)
		prev = make(map[string]*statshm.Stat, len(stats))
		for _, st := range stats {
			prev[st.Path] = st
		}
		if o.count > 0 && n >= o.count {
			return 0
		}
		select {
		case <-ctx.Done():
			return 0
		case <-t.C:
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// oneLine joins the lines of err's message.
func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }

// collect reads every file of o.dir, through the readers it keeps open
// between refreshes (opening new files, closing those gone), and returns
// the selected files sorted by job, rank, pid and session, and the paths
// of stale files. A file it cannot read is reported once on stderr and
// left out; other users' files, which it may not read, are counted in
// one line.
func collect(o *options, readers map[string]*statshm.Reader, stderr io.Writer) ([]*statshm.Stat, []string, error) {
	paths, err := statshm.List(o.dir)
	if err != nil {
		return nil, nil, err
	}
	for p, r := range readers {
		if !slices.Contains(paths, p) {
			r.Close()
			delete(readers, p)
		}
	}
	var stats []*statshm.Stat
	var stale []string
	denied := 0
	for _, p := range paths {
		r := readers[p]
		if r == nil {
			if r, err = statshm.Open(p); err != nil {
				if errors.Is(err, fs.ErrPermission) {
					if !o.warnedBadFiles[p] {
						o.warnedBadFiles[p] = true
						denied++
					}
					continue
				}
				warnBad(o, p, err, stderr)
				continue
			}
			readers[p] = r
		}
		st, err := r.Read()
		if err != nil {
			warnBad(o, p, err, stderr)
			r.Close()
			delete(readers, p)
			continue
		}
		if st.Stale {
			stale = append(stale, p)
			if !o.stale {
				continue
			}
		}
		if o.job != "" && !strings.HasPrefix(st.Job, o.job) || o.rank >= 0 && st.Rank != o.rank || o.pid > 0 && st.PID != o.pid ||
			o.session != "" && st.Session != o.session {
			continue
		}
		if len(o.prefixes) > 0 {
			st.Vars = slices.DeleteFunc(st.Vars, func(v statshm.Var) bool {
				return !slices.ContainsFunc(o.prefixes, func(p string) bool { return strings.HasPrefix(v.Name, p) })
			})
		}
		stats = append(stats, st)
	}
	slices.SortFunc(stats, func(a, b *statshm.Stat) int {
		if c := strings.Compare(a.Job, b.Job); c != 0 {
			return c
		}
		if a.Rank != b.Rank {
			return a.Rank - b.Rank
		}
		if a.PID != b.PID {
			return a.PID - b.PID
		}
		return strings.Compare(a.Session, b.Session)
	})
	if denied > 0 {
		fmt.Fprintf(stderr, "tachyonstat: skipping %d file(s) of other users in %s: each is readable by its owner only (root reads them all)\n", denied, o.dir)
	}
	return stats, stale, nil
}

// warnBad reports a file that cannot be read, once per path: files that
// vanish between the listing and the read (a job that ended) are not
// reported.
func warnBad(o *options, path string, err error, stderr io.Writer) {
	if errors.Is(err, os.ErrNotExist) || o.warnedBadFiles[path] {
		return
	}
	o.warnedBadFiles[path] = true
	fmt.Fprintf(stderr, "tachyonstat: skipping %s: %v\n", path, oneLine(err))
}

// document is what -json writes.
type document struct {
	Time      time.Time       `json:"time"`
	Dir       string          `json:"dir"`
	Processes []*statshm.Stat `json:"processes"`
	Stale     []string        `json:"stale,omitempty"` // paths of the stale files in Dir
}

// show writes one view of stats, with rates against prev when it has
// them, and returns the exit status: 1 when no process was shown.
func show(o *options, stats []*statshm.Stat, stale []string, prev map[string]*statshm.Stat, stdout, stderr io.Writer) int {
	if o.json {
		doc := document{Time: time.Now(), Dir: o.dir, Processes: stats, Stale: stale}
		if doc.Processes == nil {
			doc.Processes = []*statshm.Stat{}
		}
		enc := json.NewEncoder(stdout)
		if o.watch == 0 {
			enc.SetIndent("", "  ")
		}
		if err := enc.Encode(doc); err != nil {
			fmt.Fprintf(stderr, "tachyonstat: %v\n", err)
			return 1
		}
	} else if o.selected || o.watch > 0 {
		showVars(stats, prev, stdout)
	} else {
		showList(stats, stdout)
	}
	if len(stale) > 0 && !o.stale && o.watch == 0 {
		fmt.Fprintf(stderr, "tachyonstat: %d stale files of processes gone without Finalize in %s (-stale shows them, -remove-stale removes them)\n", len(stale), o.dir)
	}
	if len(stats) == 0 {
		what := "no running Tachyon process"
		if o.selected {
			what = "no running Tachyon process matches"
		}
		if o.watch == 0 || !o.json {
			fmt.Fprintf(stderr, "tachyonstat: %s in %s\n", what, o.dir)
		}
		return 1
	}
	return 0
}

// showList writes one line per process, nothing when there are none.
func showList(stats []*statshm.Stat, w io.Writer) {
	if len(stats) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "PID\tRANK\tSIZE\tSESSION\tJOB\tHOST\tCOMMAND\tVARS\tAGE")
	for _, st := range stats {
		stale := ""
		if st.Stale {
			stale = "\tSTALE (process gone)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s%s\n", st.PID, rankString(st.Rank), sizeString(st.Size),
			orDash(st.Session), orDash(st.Job), orDash(st.Host), orDash(st.Command), len(st.Vars), age(st), stale)
	}
	tw.Flush()
}

// showVars writes each process's header line and its variables, with the
// rate per second of counters, aggregates and timers since prev: names
// and classes aligned left, numbers right. A timer shows seconds (its
// unit, and its rate: seconds per second, the mean number of goroutines
// at it), a state
// the name of its value ("-" for -1, nothing in any state; the number
// where the file names none).
func showVars(stats []*statshm.Stat, prev map[string]*statshm.Stat, w io.Writer) {
	for i, st := range stats {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "pid %d  rank %s of %s  session %s  job %s  host %s  command %s  updated %s ago", st.PID, rankString(st.Rank),
			sizeString(st.Size), orDash(st.Session), orDash(st.Job), orDash(st.Host), orDash(st.Command), age(st))
		if st.Stale {
			fmt.Fprint(w, "  STALE (process gone)")
		}
		if st.Dropped > 0 {
			fmt.Fprintf(w, "  (%d variables did not fit)", st.Dropped)
		}
		fmt.Fprintln(w)
		rows := [][5]string{{"NAME", "CLASS", "VALUE", "RATE/S", "UNIT"}}
		p := prev[st.Path]
		var old map[string]int64
		if p != nil {
			old = make(map[string]int64, len(p.Vars))
			for _, v := range p.Vars {
				old[v.Name] = v.Value
			}
		}
		for _, v := range st.Vars {
			value, rate, unit := strconv.FormatInt(v.Value, 10), "", v.Unit
			switch {
			case v.Class == "timer":
				value = strconv.FormatFloat(float64(v.Value)*st.SecondsPerCount, 'f', 6, 64) + "s"
				unit = "seconds" // the file's counts, converted
			case v.Class == "state" && v.State != "":
				value = v.State
			case v.Class == "state" && v.Value == -1:
				value = "-" // nothing is in any state
			}
			if was, ok := old[v.Name]; ok && (v.Class == "counter" || v.Class == "aggregate" || v.Class == "timer") {
				rate = "-"
				if dt := st.Updated.Sub(p.Updated).Seconds(); dt > 0 {
					d := float64(v.Value - was)
					if v.Class == "timer" {
						d *= st.SecondsPerCount
					}
					rate = rateString(d / dt)
				}
			}
			rows = append(rows, [5]string{v.Name, v.Class, value, rate, unit})
		}
		var width [5]int
		for _, r := range rows {
			for c, s := range r {
				width[c] = max(width[c], len(s))
			}
		}
		for _, r := range rows {
			line := fmt.Sprintf("  %-*s  %-*s  %*s  %*s  %s", width[0], r[0], width[1], r[1], width[2], r[2], width[3], r[3], r[4])
			fmt.Fprintln(w, strings.TrimRight(line, " "))
		}
	}
}

// rateString formats a rate per second: one decimal below 1000, none above.
func rateString(r float64) string {
	if r > -1000 && r < 1000 {
		return strconv.FormatFloat(r, 'f', 1, 64)
	}
	return strconv.FormatFloat(r, 'f', 0, 64)
}

func rankString(r int) string {
	if r < 0 {
		return "-"
	}
	return fmt.Sprint(r)
}

func sizeString(n int) string {
	if n <= 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// age is how long ago st's values were published, rounded for reading.
func age(st *statshm.Stat) string {
	d := time.Since(st.Updated)
	switch {
	case d < 0:
		return "0s"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	default:
		return d.Round(100 * time.Millisecond).String()
	}
}
