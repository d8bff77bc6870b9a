// Package expvars publishes Tachyon's performance variables on expvar, so
// that a service's /debug/vars (net/http's DefaultServeMux, once expvar is
// imported) shows them beside the runtime's.
//
// The values are the process's, every session and connection together:
// expvar has no labels. metrics/prom shows the variables kept per rank
// by session and peer.
//
// docs/mpit.md (Service metrics) shows it in a service.
package expvars

import (
	"expvar"

	"github.com/tachyon-hpc/tachyon/pvar"
)

// Publish publishes, under name, a map from every performance variable's
// name to its current value, read anew each time /debug/vars is served (so
// variables registered later appear too). Like expvar.Publish, it panics
// if name is already in use.
func Publish(name string) {
	expvar.Publish(name, expvar.Func(func() any { return pvar.Snapshot() }))
}
