package testskip

import (
	"fmt"
	"os"

	"strings"
	"testing"
)

// recorder is a testing.TB that records a skip or a failure instead of
// ending the test.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Skipf(format string, args ...any) {
	r.skipped = fmt.Sprintf(format, args...)
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
}

func TestSkip(t *testing.T) {
	for _, tc := range []struct {
		name, env    string
		unset        bool
		reason       Reason
		skip, fail   bool
		failMentions []string
	}{
		{name: "unset", unset: true, reason: NoMPICH, skip: true},
		{name: "listed", env: "race,no-mpich", reason: NoMPICH, skip: true},
		{name: "listed with spaces", env: " race , no-mpich ", reason: NoMPICH, skip: true},
		{name: "not listed", env: "race", reason: NoMPICH, fail: true, failMentions: []string{"no-mpich", Env, "mpiexec.mpich not found"}},
		{name: "empty list", env: "", reason: Short, fail: true, failMentions: []string{"short", Env}},
		{name: "typo in list", env: "race,no-mpcih", reason: RaceDetector, fail: true, failMentions: []string{"no-mpcih"}},
		{name: "unknown reason", unset: true, reason: "whatever", fail: true, failMentions: []string{"whatever"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(Env, tc.env) // restored at the end, as set or unset
			if tc.unset {
				os.Unsetenv(Env)
			}
			r := &recorder{TB: t}
			Skip(r, tc.reason, "mpiexec.mpich", "not found")
			if (r.skipped != "") != tc.skip || (r.failed != "") != tc.fail {
				t.Fatalf("skipped %q, failed %q; want skip %v, fail %v", r.skipped, r.failed, tc.skip, tc.fail)
			}
			if tc.skip && r.skipped != "skip ("+string(tc.reason)+"): mpiexec.mpich not found" {
				t.Errorf("skip message %q", r.skipped)
			}
			for _, s := range tc.failMentions {
				if !strings.Contains(r.failed, s) {
					t.Errorf("failure %q does not mention %q", r.failed, s)
				}
			}
		})
	}
}

func TestSkipf(t *testing.T) {
	t.Setenv(Env, "few-cpus")
	r := &recorder{TB: t}
	Skipf(r, FewCPUs, "needs %d CPUs", 2)
	if r.skipped != "skip (few-cpus): needs 2 CPUs" || r.failed != "" {
		t.Fatalf("skipped %q, failed %q", r.skipped, r.failed)
	}
}

// TestReasonsDistinct: every reason has its own name, without commas or
// spaces, so that Env can list it.
func TestReasonsDistinct(t *testing.T) {
	seen := map[Reason]bool{}
	for _, r := range Reasons {
		if seen[r] || r == "" || strings.ContainsAny(string(r), ", \t") {
			t.Errorf("reason %q repeated, empty or not listable", r)
		}
		seen[r] = true
	}
}
