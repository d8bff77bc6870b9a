package mpi

import (
	"errors"
	"fmt"
)

// class is an MPI error class. Every error a routine returns matches
// exactly one class with errors.Is.
type class struct {
	code int
	name string
}

func (c *class) Error() string { return "mpi: " + c.name }

// Error classes (MPI_ERR_*). The codes are the MPI standard's where it has
// one.
var (
	ErrBuffer         error = &class{1, "invalid buffer"}
	ErrCount          error = &class{2, "invalid count"}
	ErrTag            error = &class{4, "invalid tag"}
	ErrComm           error = &class{5, "invalid communicator"}
	ErrRank           error = &class{6, "invalid rank"}
	ErrRequest        error = &class{7, "invalid request"}
	ErrGroup          error = &class{9, "invalid group"}
	ErrArg            error = &class{13, "invalid argument"}
	ErrTruncate       error = &class{15, "message truncated"}
	ErrKeyval         error = &class{48, "invalid keyval"}
	ErrOther          error = &class{16, "other error"}
	ErrIntern         error = &class{17, "internal error"}
	ErrProcFailed     error = &class{75, "process failed"}
	ErrNotInitialized error = &class{1001, "MPI is not initialized, or already finalized"}
)

var classes = []error{ErrBuffer, ErrCount, ErrTag, ErrComm, ErrRank, ErrRequest, ErrGroup,
	ErrArg, ErrTruncate, ErrKeyval, ErrOther, ErrIntern, ErrProcFailed, ErrNotInitialized}

// Error is what MPI routines return: the class, the routine, and what went
// wrong. errors.Is matches its class (and whatever caused it); errors.As
// gives access to the fields.
type Error struct {
	Class  error  // one of the Err* classes
	Op     string // the routine, e.g. "Send"
	Detail string
	Err    error // the underlying cause, if any
}

func (e *Error) Error() string {
	s := "mpi: " + e.Op + ": " + e.Detail
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is reports whether target is e's class.
func (e *Error) Is(target error) bool { return target == e.Class }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// errorf builds an Error of class cls for routine op.
func errorf(cls error, op, format string, args ...any) *Error {
	return &Error{Class: cls, Op: op, Detail: fmt.Sprintf(format, args...)}
}

// ErrorClass returns the class of err (MPI_ERROR_CLASS): one of the Err*
// values, ErrOther for an error from outside this package, nil for nil.
func ErrorClass(err error) error {
	if err == nil {
		return nil
	}
	for _, c := range classes {
		if errors.Is(err, c) {
			return c
		}
	}
	return ErrOther
}

// ErrorCode returns the MPI error code of err's class (MPI_SUCCESS, 0, for
// nil).
func ErrorCode(err error) int {
	if err == nil {
		return 0
	}
	return ErrorClass(err).(*class).code
}

// ErrorString returns the text of err (MPI_ERROR_STRING), "" for nil.
func ErrorString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
