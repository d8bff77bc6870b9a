package cli

import (
	"bytes"
	"flag"
	"testing"
)

// TestParse: flags parse and the command goes on; -h prints the usage and
// the flags and ends with 0; a bad flag is one line on stderr and 2.
func TestParse(t *testing.T) {
	u := Usage{Name: "cmd", Line: "usage: cmd [-n N]"}
	for _, tc := range []struct {
		args           []string
		status         int
		done           bool
		stdout, stderr string
	}{
		{args: []string{"-n", "3"}},
		{args: []string{"-h"}, done: true, stdout: "usage: cmd [-n N]\n  -n int\n    \tranks\n"},
		{args: []string{"-x"}, status: 2, done: true, stderr: "cmd: flag provided but not defined: -x (usage: cmd [-n N])\n"},
	} {
		var stdout, stderr bytes.Buffer
		fs := flag.NewFlagSet("cmd", flag.ContinueOnError)
		n := fs.Int("n", 0, "ranks")
		status, done := u.Parse(fs, tc.args, &stdout, &stderr)
		if status != tc.status || done != tc.done || stdout.String() != tc.stdout || stderr.String() != tc.stderr {
			t.Errorf("%v: status %d done %v stdout %q stderr %q", tc.args, status, done, stdout.String(), stderr.String())
		}
		if tc.args[0] == "-n" && *n != 3 {
			t.Errorf("-n 3 parsed as %d", *n)
		}
	}
}
