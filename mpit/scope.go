package mpit

import (
	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/mpi"
)

// Scope says whether and how a control variable may be written
// (MPI-3.1's Table 14.4).
type Scope int

// Scopes of control variables.
const (
	// ScopeConstant (MPI_T_SCOPE_CONSTANT): read-only, the value never
	// changes.
	ScopeConstant Scope = iota
	// ScopeReadonly (MPI_T_SCOPE_READONLY): read-only; the value is fixed
	// when the process starts (from the environment) and may differ between
	// runs.
	ScopeReadonly
	// ScopeLocal (MPI_T_SCOPE_LOCAL): writable at any time, in this process
	// alone.
	ScopeLocal
	// ScopeGroup (MPI_T_SCOPE_GROUP): writable, by every process of a group,
	// to consistent (possibly different) values.
	ScopeGroup
	// ScopeGroupEq (MPI_T_SCOPE_GROUP_EQ): writable, by every process of a
	// group, to the same value.
	ScopeGroupEq
	// ScopeAll (MPI_T_SCOPE_ALL): writable, by every connected process, to
	// consistent (possibly different) values.
	ScopeAll
	// ScopeAllEq (MPI_T_SCOPE_ALL_EQ): writable, by every connected process,
	// to the same value.
	ScopeAllEq
)

var scopeNames = [...]string{"constant", "readonly", "local", "group", "group_eq", "all", "all_eq"}

func (s Scope) String() string { return enumString("Scope", scopeNames[:], s) }

// cvarScope maps a control variable's scope. The registry's group and all
// scopes require the value to be "set alike" in the processes concerned,
// which is MPI_T's _EQ form; the registry has no scope for consistent but
// different values, so ScopeGroup and ScopeAll describe no variable of it.
func cvarScope(s cvar.Scope) Scope {
	switch s {
	case cvar.ScopeConstant:
		return ScopeConstant
	case cvar.ScopeReadonly:
		return ScopeReadonly
	case cvar.ScopeGroup:
		return ScopeGroupEq
	case cvar.ScopeAll:
		return ScopeAllEq
	}
	return ScopeLocal
}

// writableNow returns nil if a variable of scope s may be written now:
// ErrCvarSetNever for the read-only scopes, ErrCvarSetNotNow for the
// collective scopes while the MPI environment runs (between mpi.Init and
// mpi.Finalize), since processes that are already communicating cannot
// change a value they must agree on one at a time. Before mpi.Init, and
// after mpi.Finalize, a collective variable is written like a local one.
func writableNow(name string, s Scope) error {
	switch s {
	case ScopeConstant, ScopeReadonly:
		return errorf(ErrCvarSetNever, name+" is "+s.String())
	case ScopeGroup, ScopeGroupEq, ScopeAll, ScopeAllEq:
		if mpi.Initialized() && !mpi.Finalized() {
			return errorf(ErrCvarSetNotNow, name+" is "+s.String()+
				" and the MPI environment is running: set it before mpi.Init")
		}
	}
	return nil
}
