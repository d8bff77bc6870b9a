package mpi

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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
	ErrRoot           error = &class{8, "invalid root"}       // a collective's root that is no rank of the communicator
	ErrOp             error = &class{10, "invalid operation"} // a ReduceOp that does not apply to the type it is given
	ErrRequest        error = &class{7, "invalid request"}
	ErrGroup          error = &class{9, "invalid group"}
	ErrArg            error = &class{13, "invalid argument"}
	ErrTruncate       error = &class{15, "message truncated"}
	ErrKeyval         error = &class{48, "invalid keyval"}
	ErrOther          error = &class{16, "other error"}
	ErrIntern         error = &class{17, "internal error"}
	ErrProcFailed     error = &class{75, "process failed"}
	ErrNotInitialized error = &class{1001, "MPI is not initialized, or already finalized"}
	ErrName           error = &class{33, "invalid service name"} // LookupName: nothing published under it
	ErrPort           error = &class{38, "invalid port"}         // a port name or address no one accepts on
	ErrService        error = &class{41, "invalid service name"} // UnpublishName: not published by this process
	ErrSession        error = &class{74, "invalid session"}      // a closed session, or one that cannot be made
	// ErrCanceled is the class of a call that its context.Context ended
	// before the operation did (the Context forms: RecvContext,
	// Request.WaitContext, Dial, Listener.Accept, Session.Close...). Its
	// *Error's cause is the context's error, so errors.Is matches
	// context.Canceled or context.DeadlineExceeded too.
	ErrCanceled error = &class{1002, "operation canceled by its context"}
)

var classes = []error{ErrBuffer, ErrCount, ErrTag, ErrComm, ErrRank, ErrRoot, ErrOp, ErrRequest, ErrGroup,
	ErrArg, ErrTruncate, ErrKeyval, ErrOther, ErrIntern, ErrProcFailed, ErrNotInitialized,
	ErrName, ErrPort, ErrService, ErrSession, ErrCanceled}

// Error is what MPI routines return: the class, the routine, and what went
// wrong. errors.Is matches its class (and whatever caused it); errors.As
// gives access to the fields.
type Error struct {
	Class  error  // one of the Err* classes
	Op     string // the routine, e.g. "Send"
	Detail string
	Err    error // the underlying cause, if any

	handled bool // an error handler has seen it
}

func (e *Error) Error() string {
	s := "mpi: " + e.Op + ": " + e.Detail
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is reports whether target is e's class (or, for a Class that is an
// AddErrorCode code, the code's class).
func (e *Error) Is(target error) bool {
	return target == e.Class || e.Class != nil && errors.Is(e.Class, target)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// errorf builds an Error of class cls for routine op.
func errorf(cls error, op, format string, args ...any) *Error {
	return &Error{Class: cls, Op: op, Detail: fmt.Sprintf(format, args...)}
}

// ErrorClass returns the class of err (MPI_ERROR_CLASS): one of the Err*
// values or of AddErrorClass's, ErrOther for an error from outside this
// package, nil for nil.
func ErrorClass(err error) error {
	if err == nil {
		return nil
	}
	for _, c := range classes {
		if errors.Is(err, c) {
			return c
		}
	}
	for _, c := range *added.classes.Load() {
		if errors.Is(err, c) {
			return c
		}
	}
	return ErrOther
}

// ErrorCode returns the MPI error code of err (MPI_SUCCESS, 0, for nil):
// an AddErrorCode code's own, else its class's.
func ErrorCode(err error) int {
	if err == nil {
		return 0
	}
	var c *ErrorCodeValue
	if errors.As(err, &c) {
		return c.code
	}
	return ErrorClass(err).(interface{ errorCode() int }).errorCode()
}

func (c *class) errorCode() int { return c.code }

// Classes and codes a program adds (AddErrorClass, AddErrorCode), above
// the predefined codes; last is the largest code in use
// (AttrLastUsedCode).
var added struct {
	mu      sync.Mutex
	classes atomic.Pointer[[]error]
	last    atomic.Int64
}

func init() {
	added.classes.Store(new([]error))
	n := 0
	for _, c := range classes {
		n = max(n, c.(*class).code)
	}
	added.last.Store(int64(n))
}

// addedClass is a class of AddErrorClass.
type addedClass struct {
	code int
	text atomic.Pointer[string]
}

func (c *addedClass) Error() string  { return "mpi: " + *c.text.Load() }
func (c *addedClass) errorCode() int { return c.code }

// ErrorCodeValue is an error code of AddErrorCode: an error of its class
// (errors.Is matches the class, and the code itself), with a code and a
// text of its own.
type ErrorCodeValue struct {
	code  int
	class error
	text  atomic.Pointer[string]
}

func (c *ErrorCodeValue) Error() string { return "mpi: " + *c.text.Load() }

// Is reports whether target is c's class.
func (c *ErrorCodeValue) Is(target error) bool { return target == c.class }

// AddErrorClass returns a new error class (MPI_ADD_ERROR_CLASS), with the
// next code above every code in use: an error that errors.Is matches,
// ErrorClass returns and ErrorString names ("error class N" until
// AddErrorString). A library built on MPI returns its own errors in it,
// for example as the Class of an *Error.
func AddErrorClass() (error, error) {
	if intercepted() {
		r, err := processCall(OpAddErrorClass).runResult()
		return r.Err, err
	}
	return pAddErrorClass()
}

// pAddErrorClass is AddErrorClass without interception.
func pAddErrorClass() (error, error) {
	added.mu.Lock()
	defer added.mu.Unlock()
	c := &addedClass{code: int(added.last.Add(1))}
	name := fmt.Sprintf("error class %d", c.code)
	c.text.Store(&name)
	list := append(append([]error(nil), *added.classes.Load()...), c)
	added.classes.Store(&list)
	return c, nil
}

// AddErrorCode returns a new error code in class, a predefined class or
// one of AddErrorClass's (MPI_ADD_ERROR_CODE): an error that errors.Is
// matches to itself and to class, whose ErrorCode is its own.
func AddErrorCode(class error) (error, error) {
	if intercepted() {
		c := processCall(OpAddErrorCode)
		c.Err = class
		r, err := c.runResult()
		return r.Err, err
	}
	return pAddErrorCode(class)
}

// pAddErrorCode is AddErrorCode without interception.
func pAddErrorCode(class error) (error, error) {
	if !isClass(class) {
		return nil, noComm(errorf(ErrArg, "AddErrorCode", "%v is not an error class", class))
	}
	c := &ErrorCodeValue{code: int(added.last.Add(1)), class: class}
	text := fmt.Sprintf("error code %d (%s)", c.code, strings.TrimPrefix(class.Error(), "mpi: "))
	c.text.Store(&text)
	return c, nil
}

// AddErrorString sets the text that ErrorString and Error give a class or
// code that AddErrorClass or AddErrorCode returned (MPI_ADD_ERROR_STRING);
// the predefined ones keep theirs (ErrArg).
func AddErrorString(code error, text string) error {
	if intercepted() {
		c := processCall(OpAddErrorString)
		c.Err, c.Name = code, text
		return c.run()
	}
	return pAddErrorString(code, text)
}

// pAddErrorString is AddErrorString without interception.
func pAddErrorString(code error, text string) error {
	switch c := code.(type) {
	case *addedClass:
		c.text.Store(&text)
	case *ErrorCodeValue:
		c.text.Store(&text)
	default:
		return noComm(errorf(ErrArg, "AddErrorString", "%v is not a class or code of AddErrorClass or AddErrorCode", code))
	}
	return nil
}

// isClass reports whether err is an error class, predefined or added.
func isClass(err error) bool {
	if slices.Contains(classes, err) {
		return true
	}
	return slices.Contains(*added.classes.Load(), err)
}

// ErrorString returns the text of err (MPI_ERROR_STRING), "" for nil.
func ErrorString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
