// Package mpit is Tachyon's MPI tool information interface (MPI_T): what a
// tool or a library uses to list, read and write Tachyon's control
// variables (package cvar), to measure its performance variables (package
// pvar) in sessions of its own, and to browse both by category.
//
// # Lifetime
//
// Init and Finalize count references (MPI_T_INIT_THREAD, MPI_T_FINALIZE):
// the interface is usable while more Inits than Finalizes have been made,
// and that is independent of the MPI environment, so a tool may use it
// before mpi.Init, while MPI runs and after mpi.Finalize. Every other
// function returns ErrNotInitialized while the interface is not
// initialized. The Finalize that brings the count to zero invalidates every
// session and handle made before it. Every function is safe for concurrent
// use.
//
// # Errors
//
// Every error matches one Error class (errors.Is), one per MPI_T error
// class MPI names; the constants say which functions return which.
//
// # Variables and indexes
//
// A control variable's index (CvarIndex, CvarInfo) and a performance
// variable's index (PvarIndex, PvarInfo) are positions in tables that only
// grow: a variable registered after the interface first looked gets the
// next index, and no variable is ever re-indexed or removed. The order of
// the first look is the registries' (cvar: category then name; pvar:
// name); what any run sees after that is append-only. Indexes are not the
// same across runs or processes; names are.
//
// Control variables map from cvar: a cvar int is TypeCount, uint
// TypeUnsignedLongLong, float TypeDouble, bool TypeInt (0 or 1), string
// TypeChar, duration TypeCount in nanoseconds, and an enumeration TypeInt
// with an Enum naming its choices. The registry's group and all scopes,
// "set alike" in the processes concerned, are ScopeGroupEq and ScopeAllEq.
// A write to a constant or readonly variable is ErrCvarSetNever; a write to
// a group or all variable while the MPI environment runs is
// ErrCvarSetNotNow (it can be written before mpi.Init and after
// mpi.Finalize).
//
// Performance variables map from pvar with the same classes. Counter,
// aggregate and timer variables are measured per session: a handle reads
// the change of the value while the handle was started, from zero at
// allocation or reset; they are not continuous, not read-only and atomic.
// High and low watermarks are measured per session too: a handle reads the
// largest (smallest) value observed while it was started since allocation
// or reset, from the level at its start or reset (a pvar.Window of its
// own); they are not continuous, not read-only and not atomic. State, level, size,
// percentage and generic variables report the current value, which no
// session can stop or reset: they are continuous and read-only. Every read
// carries an int64; a percentage's is in millionths of the resource (1e6
// is all of it).
//
// # Binding
//
// A performance variable that an endpoint or its progress engine writes
// is bound to communicators (BindComm): HandleAlloc takes a communicator
// (*mpi.Comm, an Object) and the handle reads the value of the
// communicator's calling rank, which in a world of goroutine ranks is that
// rank's own rather than the process's sum; the queue lengths
// (engine_unexpected_queue, engine_posted_queue) read that communicator's
// entries alone. Every other variable, control variables included, is
// BindNoObject: the object is ignored and the value is the process's.
// Every handle has a count of one. A nil object, one of another type, or
// a freed communicator or one whose rank finalized is ErrInvalid.
//
// # Categories
//
// A control variable is in the category cvar files it under, a
// performance variable in the first word of its name (pvar's category).
// Categories nest by name ("a.b" is in "a") and, like variables and the
// lists of their members, are only ever added to. CategoryChanged's stamp
// grows with every addition of a variable, so an equal stamp means nothing
// was added.
//
// # Choices where MPI is inconsistent
//
// Example 14.4 tests err!=MPI_SUCCESS || err!=MPI_T_ERR_INVALID_INDEX,
// which is true for every err and ends the loop at once; the intent, to
// skip an index that is invalid and stop at any other error, is what a
// CvarInfo loop does here: CvarInfo never returns ErrInvalidIndex for an
// index below CvarNum, since variables are never deleted.
//
// Example 14.6 asserts that a level variable has datatype MPI_INT, which
// MPI's class list forbids (levels are MPI_UNSIGNED, _LONG, _LONG_LONG
// or MPI_DOUBLE); the class list wins: every level is
// TypeUnsignedLongLong.
//
// docs/mpit.md describes the interface and the choices made where the
// standard is inconsistent.
package mpit
