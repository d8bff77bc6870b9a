// Package metrics holds the bridges from Tachyon's performance variables
// (package pvar) to the metrics systems of Go services: expvars publishes
// them on expvar (/debug/vars), prom collects them for Prometheus. Each is
// a package of its own, so that a program imports only the system it uses
// and the core packages depend on neither. A third, statshm, publishes them
// in a file of shared memory that cmd/tachyonstat reads from outside the
// process; the facade's Init starts it.
//
// docs/mpit.md (Service metrics) shows both in a service.
package metrics
