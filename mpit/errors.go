package mpit

import "strconv"

// Error is an error class of the MPI tool information interface. Every
// error a function of this package returns matches exactly one class with
// errors.Is (most wrap the class with a detail: "mpit: invalid index: cvar
// 412 of 97"). The values are MPI_T's classes, numbered from 1 in the order
// of MPI-3.1's Table 14.5; 0 is success and is never an Error.
type Error int

// The error classes of MPI-3.1's Table 14.5. Which function returns which
// is said on the function; the classes no function of this package returns
// say why.
const (
	// ErrInvalid (MPI_T_ERR_INVALID): invalid use of the interface or a bad
	// argument (a value of the wrong type or out of range for a control
	// variable, a nil or wrongly typed bound object).
	ErrInvalid Error = iota + 1
	// ErrMemory (MPI_T_ERR_MEMORY): out of memory. Never returned: Go
	// reports exhausted memory by ending the program.
	ErrMemory
	// ErrNotInitialized (MPI_T_ERR_NOT_INITIALIZED): the interface is not
	// initialized (no Init outstanding), or Finalize was called once more
	// than Init.
	ErrNotInitialized
	// ErrCannotInit (MPI_T_ERR_CANNOT_INIT): the interface is not in a state
	// to be initialized. Never returned: Init succeeds at any time, before,
	// during and after the MPI environment's lifetime.
	ErrCannotInit
	// ErrInvalidIndex (MPI_T_ERR_INVALID_INDEX): a variable, category or
	// enumeration index out of range.
	ErrInvalidIndex
	// ErrInvalidItem (MPI_T_ERR_INVALID_ITEM): an enumeration item index out
	// of range (Enum.Item).
	ErrInvalidItem
	// ErrInvalidName (MPI_T_ERR_INVALID_NAME): no variable or category of
	// that name (and, for performance variables, class).
	ErrInvalidName
	// ErrInvalidHandle (MPI_T_ERR_INVALID_HANDLE): a handle that was freed,
	// belongs to another session, is AllHandles where that is not allowed,
	// or was allocated before the interface was last finalized.
	ErrInvalidHandle
	// ErrOutOfHandles (MPI_T_ERR_OUT_OF_HANDLES): no more handles:
	// Session.HandleAlloc on a high or low watermark that has pvar.Windows live
	// handles already, in all sessions together (each holds one of the
	// watermark's window slots).
	ErrOutOfHandles
	// ErrOutOfSessions (MPI_T_ERR_OUT_OF_SESSIONS): no more sessions. Never
	// returned, for the same reason.
	ErrOutOfSessions
	// ErrInvalidSession (MPI_T_ERR_INVALID_SESSION): a session that was
	// freed, or was created before the interface was last finalized.
	ErrInvalidSession
	// ErrCvarSetNotNow (MPI_T_ERR_CVAR_SET_NOT_NOW): the control variable
	// cannot be written now but may be later (see CvarHandle.Write).
	ErrCvarSetNotNow
	// ErrCvarSetNever (MPI_T_ERR_CVAR_SET_NEVER): the control variable
	// cannot be written for the rest of the run (ScopeConstant,
	// ScopeReadonly).
	ErrCvarSetNever
	// ErrPvarNoStartStop (MPI_T_ERR_PVAR_NO_STARTSTOP): the performance
	// variable is continuous and cannot be started or stopped.
	ErrPvarNoStartStop
	// ErrPvarNoWrite (MPI_T_ERR_PVAR_NO_WRITE): the performance variable is
	// read-only and cannot be written or reset.
	ErrPvarNoWrite
	// ErrPvarNoAtomic (MPI_T_ERR_PVAR_NO_ATOMIC): the performance variable
	// cannot be read and reset atomically (Session.ReadReset).
	ErrPvarNoAtomic
)

var errorNames = [...]string{
	ErrInvalid:         "invalid use or argument",
	ErrMemory:          "out of memory",
	ErrNotInitialized:  "interface not initialized",
	ErrCannotInit:      "interface cannot be initialized",
	ErrInvalidIndex:    "invalid index",
	ErrInvalidItem:     "invalid enumeration item",
	ErrInvalidName:     "invalid name",
	ErrInvalidHandle:   "invalid handle",
	ErrOutOfHandles:    "out of handles",
	ErrOutOfSessions:   "out of sessions",
	ErrInvalidSession:  "invalid session",
	ErrCvarSetNotNow:   "control variable cannot be set now",
	ErrCvarSetNever:    "control variable cannot be set",
	ErrPvarNoStartStop: "performance variable cannot be started or stopped",
	ErrPvarNoWrite:     "performance variable cannot be written or reset",
	ErrPvarNoAtomic:    "performance variable cannot be read and reset atomically",
}

// Error returns the class's description, prefixed "mpit: ".
func (e Error) Error() string {
	if e < ErrInvalid || int(e) >= len(errorNames) {
		return "mpit: Error(" + strconv.Itoa(int(e)) + ")"
	}
	return "mpit: " + errorNames[e]
}

// detailed is an Error with a detail that names the argument at fault.
type detailed struct {
	class  Error
	detail string
}

func (d *detailed) Error() string { return d.class.Error() + ": " + d.detail }

// Unwrap returns the class, so that errors.Is matches it.
func (d *detailed) Unwrap() error { return d.class }

// errorf returns class with a detail.
func errorf(class Error, detail string) error { return &detailed{class, detail} }
