// Package testcvar sets a control variable (package cvar) for the length
// of a test: the one helper every package's tests use to try a tunable.
package testcvar

import (
	"testing"

	"github.com/tachyon-hpc/tachyon/cvar"
)

// Set sets the control variable name to value until t and its subtests
// end, then gives it back the value it had before, which may be the
// environment's (a TACHYON_* variable, as CI sets some), not the
// default. An unknown name or a value the variable refuses fails t.
func Set(t testing.TB, name, value string) {
	t.Helper()
	v, ok := cvar.Lookup(name)
	if !ok {
		t.Fatalf("no control variable %s", name)
	}
	old := v.String()
	if err := v.Set(value); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Set(old) })
}
