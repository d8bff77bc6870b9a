// Command tachyontrace merges the per-rank files of a trace written by
// package tools/trace into one trace that Perfetto (ui.perfetto.dev) and
// chrome://tracing open.
//
//	tachyontrace -o job.json job.0.json job.1.json ...
//	tachyontrace -o job.json job.*.json
//
// A job whose ranks all reached Finalize needs no merging: its rank 0
// merged the files already. This is for the rest: a job that stopped
// early, whose files end after their last whole event, or files gathered
// from several runs. Events go in the order of the files named. Without
// -o the trace goes to standard output. It exits with status 1, and
// writes no -o file, if a file is missing or is not a rank's trace; with
// status 2 on a usage error.
//
// docs/tools.md describes the tracer and the trace it writes.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/tachyon-hpc/tachyon/tools/trace"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command with args, writing the trace to stdout when no -o
// names a file; it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tachyontrace", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "write the merged trace to `file` (default: standard output)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: tachyontrace [-o file] rankfile...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	if err := merge(*out, fs.Args(), stdout); err != nil {
		fmt.Fprintln(stderr, "tachyontrace:", err)
		return 1
	}
	return 0
}

// merge merges files into out, or to stdout if out is "". A file out is
// replaced only by a whole trace.
func merge(out string, files []string, stdout io.Writer) error {
	if out == "" {
		return trace.Merge(stdout, files...)
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), ".tachyontrace-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename, nothing
	err = trace.Merge(tmp, files...)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), out)
}
