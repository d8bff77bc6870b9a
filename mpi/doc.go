// Package mpi is Tachyon's MPI-style facade: environment management,
// communicators and groups, point-to-point communication in every mode,
// requests and timer requests, noncontiguous messages, error classes,
// and the profiling interface (Intercept, Pcontrol) for tools.
//
// A program is either one rank of a job (Init, then World; started by
// tachyonrun, or alone as a singleton world of one rank), or runs a whole
// world in-process with Run, each rank a goroutine handed its own World.
// Semantics follow the MPI standard; where it calls something erroneous,
// the routine returns an error instead, which errors.Is matches to exactly
// one error class (ErrRank, ErrTag, ErrTruncate, ...).
//
// The facade checks arguments and translates communicator ranks to world
// ranks, then calls the engine package, which does the matching and the
// protocols (and checks ranks and tags again for its other callers).
package mpi
