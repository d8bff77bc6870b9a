package mpi

import (
	"errors"
	"sync"
	"sync/atomic"
)

// Attributes (MPI's attribute caching on communicators): a library
// creates a Keyval once, then stores a value of its own under it on any
// communicator. Dup asks the keyval's copier what the new communicator
// gets; DeleteAttr, a SetAttr that replaces a value, Free of the
// communicator and, for Self, Finalize call its deleter. Finalize deletes
// Self's attributes first, in the reverse order they were set, so that a
// tool can run code at the end of MPI while MPI still works.
//
// The predefined attributes (AttrTagUB and the rest) are keyvals too, read
// with Attr on any communicator, never set or deleted.

// Keyval names an attribute (MPI_Comm_create_keyval). Its copier and
// deleter run with no lock of the communicator held, so they may call
// MPI, attribute routines included.
type Keyval struct {
	name  string // predefined attributes only
	copy  AttrCopier
	del   AttrDeleter
	extra any
	get   func(c *Comm) (any, bool) // predefined: the value; nil for a user's keyval
	freed atomic.Bool
}

// AttrCopier decides what Dup gives the new communicator for an attribute
// of old: the value, or keep false to leave the attribute off. An error
// fails the Dup.
type AttrCopier func(old *Comm, k *Keyval, extra, value any) (newValue any, keep bool, err error)

// AttrDeleter runs when an attribute goes: DeleteAttr, SetAttr replacing
// it, Free of its communicator, Finalize for Self's. Its error is what
// that call returns.
type AttrDeleter func(c *Comm, k *Keyval, value, extra any) error

// DupAttr is the copier that gives the new communicator the same value
// (MPI_COMM_DUP_FN). A nil copier leaves the attribute off the new
// communicator (MPI_COMM_NULL_COPY_FN); a nil deleter does nothing
// (MPI_COMM_NULL_DELETE_FN).
func DupAttr(old *Comm, k *Keyval, extra, value any) (any, bool, error) { return value, true, nil }

// NewKeyval returns a new attribute key with its copier, deleter and the
// extra state they are handed (MPI_COMM_CREATE_KEYVAL).
//
// Interceptors see it as OpNewKeyval; it returns the Result.Keyval they
// leave, nil if one returned without calling next, which every routine
// then refuses with ErrKeyval.
func NewKeyval(copy AttrCopier, del AttrDeleter, extra any) *Keyval {
	if intercepted() {
		c := processCall(OpNewKeyval)
		c.args = keyvalArgs{copy, del, extra}
		r, _ := c.runResult()
		return r.Keyval
	}
	return pNewKeyval(copy, del, extra)
}

// pNewKeyval is NewKeyval without interception.
func pNewKeyval(copy AttrCopier, del AttrDeleter, extra any) *Keyval {
	return &Keyval{copy: copy, del: del, extra: extra}
}

// Free retires k (MPI_COMM_FREE_KEYVAL): it can no longer be set or read,
// while the attributes already stored under it stay until deleted, with
// their copier and deleter. A predefined keyval cannot be freed.
func (k *Keyval) Free() error {
	if intercepted() {
		c := processCall(OpKeyvalFree)
		c.Keyval = k
		return c.run()
	}
	return k.pFree()
}

// pFree is Free without interception.
func (k *Keyval) pFree() error {
	switch {
	case k == nil:
		return errorf(ErrKeyval, "Keyval.Free", "nil keyval")
	case k.get != nil:
		return errorf(ErrKeyval, "Keyval.Free", "%s is predefined", k.name)
	case !k.freed.CompareAndSwap(false, true):
		return errorf(ErrKeyval, "Keyval.Free", "keyval freed already")
	}
	return nil
}

// checkKey validates k for op on a user's attribute.
func checkKey(op string, k *Keyval) error {
	switch {
	case k == nil:
		return errorf(ErrKeyval, op, "nil keyval")
	case k.get != nil:
		return errorf(ErrKeyval, op, "%s is predefined: it can only be read", k.name)
	case k.freed.Load():
		return errorf(ErrKeyval, op, "the keyval was freed")
	}
	return nil
}

// attrs are a communicator's attributes, in the order they were set.
type attrs struct {
	mu   sync.Mutex
	list []attr
}

type attr struct {
	k     *Keyval
	value any
}

// take removes and returns k's attribute, if any.
func (a *attrs) take(k *Keyval) (attr, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, at := range a.list {
		if at.k == k {
			a.list = append(a.list[:i], a.list[i+1:]...)
			return at, true
		}
	}
	return attr{}, false
}

// SetAttr stores value under k on c (MPI_COMM_SET_ATTR). A value already
// there is deleted first, with k's deleter; if that fails, the old value
// stays and SetAttr returns the error.
func (c *Comm) SetAttr(k *Keyval, value any) error {
	if intercepted() {
		call := newCall(OpSetAttr, c)
		call.Keyval, call.Value = k, value
		return call.run()
	}
	return c.pSetAttr(k, value)
}

// pSetAttr is SetAttr without interception.
func (c *Comm) pSetAttr(k *Keyval, value any) error {
	if err := c.check("SetAttr"); err != nil {
		return c.fail(err)
	}
	if err := checkKey("SetAttr", k); err != nil {
		return c.fail(err)
	}
	if old, ok := c.attrs.take(k); ok {
		if err := c.deleteAttr("SetAttr", old); err != nil {
			c.attrs.mu.Lock()
			c.attrs.list = append(c.attrs.list, old)
			c.attrs.mu.Unlock()
			return c.fail(err)
		}
	}
	c.attrs.mu.Lock()
	c.attrs.list = append(c.attrs.list, attr{k, value})
	c.attrs.mu.Unlock()
	return nil
}

// Attr returns the value stored under k on c, and whether there is one
// (MPI_COMM_GET_ATTR). A predefined keyval gives its value on any
// communicator.
func (c *Comm) Attr(k *Keyval) (value any, ok bool, err error) {
	if err := c.check("Attr"); err != nil {
		return nil, false, c.fail(err)
	}
	if k != nil && k.get != nil {
		v, ok := k.get(c)
		return v, ok, nil
	}
	if err := checkKey("Attr", k); err != nil {
		return nil, false, c.fail(err)
	}
	c.attrs.mu.Lock()
	defer c.attrs.mu.Unlock()
	for _, at := range c.attrs.list {
		if at.k == k {
			return at.value, true, nil
		}
	}
	return nil, false, nil
}

// DeleteAttr removes k's attribute from c, calling k's deleter
// (MPI_COMM_DELETE_ATTR); it is an error if there is none. If the deleter
// fails, the attribute stays.
func (c *Comm) DeleteAttr(k *Keyval) error {
	if intercepted() {
		call := newCall(OpDeleteAttr, c)
		call.Keyval = k
		return call.run()
	}
	return c.pDeleteAttr(k)
}

// pDeleteAttr is DeleteAttr without interception.
func (c *Comm) pDeleteAttr(k *Keyval) error {
	if err := c.check("DeleteAttr"); err != nil {
		return c.fail(err)
	}
	if err := checkKey("DeleteAttr", k); err != nil {
		return c.fail(err)
	}
	at, ok := c.attrs.take(k)
	if !ok {
		return c.fail(errorf(ErrKeyval, "DeleteAttr", "no attribute under this keyval on %s", c.label()))
	}
	if err := c.deleteAttr("DeleteAttr", at); err != nil {
		c.attrs.mu.Lock()
		c.attrs.list = append(c.attrs.list, at)
		c.attrs.mu.Unlock()
		return c.fail(err)
	}
	return nil
}

// deleteAttr runs at's deleter for op.
func (c *Comm) deleteAttr(op string, at attr) error {
	if at.k.del == nil {
		return nil
	}
	return callbackError(op, "the attribute's deleter", at.k.del(c, at.k, at.value, at.k.extra))
}

// copyAttrs gives d, Dup's new communicator, what c's copiers say, in the
// order c's attributes were set. If a copier fails, what was copied is
// deleted again and the error returned.
func (c *Comm) copyAttrs(d *Comm) error {
	c.attrs.mu.Lock()
	list := append([]attr(nil), c.attrs.list...)
	c.attrs.mu.Unlock()
	for _, at := range list {
		if at.k.copy == nil {
			continue
		}
		v, keep, err := at.k.copy(c, at.k, at.k.extra, at.value)
		if err != nil {
			d.clearAttrs("Dup")
			return callbackError("Dup", "an attribute's copier", err)
		}
		if keep {
			d.attrs.list = append(d.attrs.list, attr{at.k, v})
		}
	}
	return nil
}

// clearAttrs deletes all of c's attributes, the last set first, and
// returns the first deleter's error; every deleter runs.
func (c *Comm) clearAttrs(op string) error {
	c.attrs.mu.Lock()
	list := c.attrs.list
	c.attrs.list = nil
	c.attrs.mu.Unlock()
	var first error
	for i := len(list) - 1; i >= 0; i-- {
		if err := c.deleteAttr(op, list[i]); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// callbackError is the error of a user's callback for op: of its own
// class if it is an MPI error, else ErrOther.
func callbackError(op, what string, err error) error {
	if err == nil {
		return nil
	}
	cls := ErrOther
	var e *Error
	if errors.As(err, &e) {
		cls = e.Class
		err = errors.New(e.Error())
	}
	return &Error{Class: cls, Op: op, Detail: what + " failed", Err: err}
}

// The predefined attributes (MPI's environmental inquiries), read with
// Attr on any communicator.
var (
	// AttrTagUB: the largest tag, TagUB (int).
	AttrTagUB = predefined("MPI_TAG_UB", func(c *Comm) (any, bool) { return TagUB, true })
	// AttrHost: the rank of the host process, ProcNull: there is none (int).
	AttrHost = predefined("MPI_HOST", func(c *Comm) (any, bool) { return ProcNull, true })
	// AttrIO: a rank that can do input and output, AnySource: every
	// rank can (int).
	AttrIO = predefined("MPI_IO", func(c *Comm) (any, bool) { return AnySource, true })
	// AttrWtimeIsGlobal: whether the ranks' Wtime clocks agree
	// (bool, Comm.WtimeIsGlobal).
	AttrWtimeIsGlobal = predefined("MPI_WTIME_IS_GLOBAL", func(c *Comm) (any, bool) { return c.WtimeIsGlobal(), true })
	// AttrAppNum: which block of an MPMD launch the rank came from (int):
	// 0 under tachyonrun and Run, the launcher's answer under PMI, unset
	// where the launcher gave none.
	AttrAppNum = predefined("MPI_APPNUM", func(c *Comm) (any, bool) { return c.p.appNum, c.p.appNum >= 0 })
	// AttrUniverseSize: how many processes the job could have: the
	// launcher's answer under PMI, else the world's size (int).
	AttrUniverseSize = predefined("MPI_UNIVERSE_SIZE", func(c *Comm) (any, bool) { return c.p.universe, true })
	// AttrLastUsedCode: the largest error code in use (int): 1001,
	// ErrNotInitialized's, until AddErrorClass or AddErrorCode add more.
	AttrLastUsedCode = predefined("MPI_LASTUSEDCODE", func(c *Comm) (any, bool) { return lastUsedCode(), true })
)

func predefined(name string, get func(c *Comm) (any, bool)) *Keyval {
	return &Keyval{name: name, get: get}
}

// lastUsedCode returns the largest error code in use: the predefined
// classes', or the last that AddErrorClass or AddErrorCode gave.
func lastUsedCode() int { return int(added.last.Load()) }
