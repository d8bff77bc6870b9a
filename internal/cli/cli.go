// Package cli holds what Tachyon's commands do alike on their command
// lines: -h prints the usage line and the flags on standard output, and a
// misuse is one line on standard error, naming the command and its usage,
// with exit status 2.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// Usage is a command's name and its one-line usage.
type Usage struct {
	Name string // the command, as its errors begin ("tachyonrun")
	Line string // "usage: tachyonrun -n N ..."
}

// Parse parses args with fs, which must have been made with
// flag.ContinueOnError; it silences fs's own output. It returns done
// false when the command goes on, or done true and the exit status when
// it is over: 0 after -h or -help printed the usage and the flags on
// stdout, 2 after a bad flag was reported on stderr.
func (u Usage) Parse(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (status int, done bool) {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprintln(stdout, u.Line)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return 0, true
	}
	return u.Error(stderr, err.Error()), true
}

// Error reports msg on stderr as a misuse of the command and returns the
// exit status for it, 2.
func (u Usage) Error(stderr io.Writer, msg string) int {
	fmt.Fprintf(stderr, "%s: %s (%s)\n", u.Name, msg, u.Line)
	return 2
}
