package mpi

import (
	"errors"
	"fmt"
)

// Errhandler says what routines do with an error on a communicator
// (MPI_Errhandler): return it (ErrorsReturn, the default, as Go's error
// values expect), end the job (ErrorsAreFatal, ErrorsAbort), or call a
// function of the user's first (NewErrhandler). Every error a routine
// returns on a communicator goes through its handler once, a nil or freed
// communicator's included: a nil one's through the process's Self
// (errors that belong to no communicator, such as a group routine's, do
// too).
type Errhandler struct {
	name string
	fn   func(c *Comm, err error) // nil: return the error
}

// The predefined error handlers.
var (
	// ErrorsReturn returns errors to the caller (MPI_ERRORS_RETURN).
	ErrorsReturn = &Errhandler{name: "ErrorsReturn"}
	// ErrorsAreFatal logs the error (an Error record to the session's
	// logger, WithLogger) and ends the whole job with exit status 1
	// (MPI_ERRORS_ARE_FATAL).
	ErrorsAreFatal = &Errhandler{name: "ErrorsAreFatal", fn: func(c *Comm, err error) { fatal(c, err, "ErrorsAreFatal") }}
	// ErrorsAbort logs the error and aborts the communicator's ranks,
	// as Abort(c, 1) does, which ends the whole job here
	// (MPI_ERRORS_ABORT).
	ErrorsAbort = &Errhandler{name: "ErrorsAbort", fn: func(c *Comm, err error) { fatal(c, err, "ErrorsAbort") }}
)

// NewErrhandler returns a handler that calls fn with the communicator and
// the error, then lets the routine return the error
// (MPI_COMM_CREATE_ERRHANDLER). fn may call MPI; an error of its own
// routines goes through their handlers, fn included.
func NewErrhandler(fn func(c *Comm, err error)) (*Errhandler, error) {
	if intercepted() {
		c := processCall(OpNewErrhandler)
		c.args = fn
		r, err := c.runResult()
		return r.Errhandler, err
	}
	return pNewErrhandler(fn)
}

// pNewErrhandler is NewErrhandler without interception.
func pNewErrhandler(fn func(c *Comm, err error)) (*Errhandler, error) {
	if fn == nil {
		return nil, noComm(errorf(ErrArg, "NewErrhandler", "nil function"))
	}
	return &Errhandler{name: "user", fn: fn}, nil
}

func (h *Errhandler) String() string { return h.name }

// SetErrhandler sets what routines called on c do with errors
// (MPI_COMM_SET_ERRHANDLER). Dup, Split and Create give the new
// communicator c's handler.
func (c *Comm) SetErrhandler(h *Errhandler) error {
	if intercepted() {
		call := newCall(OpSetErrhandler, c)
		call.Errhandler = h
		return call.run()
	}
	return c.pSetErrhandler(h)
}

// pSetErrhandler is SetErrhandler without interception.
func (c *Comm) pSetErrhandler(h *Errhandler) error {
	if err := c.check("SetErrhandler"); err != nil {
		return err
	}
	if h == nil {
		return c.handle(errorf(ErrArg, "SetErrhandler", "nil error handler"))
	}
	c.errh.Store(h)
	return nil
}

// Errhandler returns c's error handler (MPI_COMM_GET_ERRHANDLER).
func (c *Comm) Errhandler() *Errhandler {
	if c == nil {
		return ErrorsReturn
	}
	if h := c.errh.Load(); h != nil {
		return h
	}
	return ErrorsReturn
}

// CallErrhandler calls c's error handler with err, as a routine on c
// would, and returns err (MPI_COMM_CALL_ERRHANDLER): how a library built
// on MPI reports its own errors the MPI way.
func (c *Comm) CallErrhandler(err error) error {
	if intercepted() {
		call := newCall(OpCallErrhandler, c)
		call.Err = err
		return call.run()
	}
	return c.pCallErrhandler(err)
}

// pCallErrhandler is CallErrhandler without interception.
func (c *Comm) pCallErrhandler(err error) error {
	if err == nil {
		return nil
	}
	if cerr := c.check("CallErrhandler"); cerr != nil {
		return cerr
	}
	if h := c.Errhandler(); h.fn != nil {
		h.fn(c, err)
	}
	return err
}

// fail applies c's error handler to err and returns it. It is small
// enough to inline, so that the message path's success costs a compare.
func (c *Comm) fail(err error) error {
	if err == nil || c == nil {
		return err
	}
	return c.handle(err)
}

// handle is fail for an error. An *Error goes through a handler once,
// however many layers return it.
func (c *Comm) handle(err error) error {
	var e *Error
	if errors.As(err, &e) {
		if e.handled {
			return err
		}
		e.handled = true
	}
	if h := c.errh.Load(); h != nil && h.fn != nil {
		h.fn(c, err)
	}
	return err
}

// noComm applies the process's Self's handler to an error that belongs
// to no communicator (a nil one, a group routine's), if MPI is
// initialized in this process; a rank of Run has no such Self, and gets
// the error back.
func noComm(err error) error {
	if p := current(); p != nil && err != nil {
		return p.self.handle(err)
	}
	return err
}

// selfHandles is noComm for a routine's named error result, deferred.
func selfHandles(err *error) {
	if *err != nil {
		*err = noComm(*err)
	}
}

// fatal ends the job on an error under ErrorsAreFatal or ErrorsAbort,
// saying what the error was (abort logs it).
func fatal(c *Comm, err error, handler string) {
	abort(c, 1, fmt.Sprintf("an error on %s, whose handler is %s", c.label(), handler), err)
}
