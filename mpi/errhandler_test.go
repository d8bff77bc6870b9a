package mpi

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/tachyon-hpc/tachyon/internal/testrole"
)

// handlerLog is a user error handler that records what it was called
// with.
type handlerLog struct {
	mu    sync.Mutex
	comms []*Comm
	errs  []error
}

func (l *handlerLog) handler(t *testing.T) *Errhandler {
	h, err := NewErrhandler(func(c *Comm, err error) {
		l.mu.Lock()
		l.comms, l.errs = append(l.comms, c), append(l.errs, err)
		l.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (l *handlerLog) take() ([]*Comm, []error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, e := l.comms, l.errs
	l.comms, l.errs = nil, nil
	return c, e
}

// TestErrhandler: a user handler runs once for each error a routine on
// its communicator returns, with the communicator and the error the
// routine returns: a bad argument, a freed communicator, a freed
// request; Dup, Split and Create inherit it; CallErrhandler calls it; the
// error is still returned.
func TestErrhandler(t *testing.T) {
	var log handlerLog
	h := log.handler(t)
	if err := Run(1, func(c *Comm) error {
		if err := c.SetErrhandler(h); err != nil {
			return err
		}
		if c.Errhandler() != h {
			return errors.New("Errhandler does not return the handler set")
		}
		once := func(what string, cm *Comm, err error, cls error) error {
			comms, errs := log.take()
			if !errors.Is(err, cls) || len(errs) != 1 || errs[0] != err || comms[0] != cm {
				return fmt.Errorf("%s: returned %v; the handler saw %v on %v", what, err, errs, comms)
			}
			return nil
		}
		err := c.Send(nil, 5, 0)
		if e := once("a send to rank 5 of 1", c, err, ErrRank); e != nil {
			return e
		}
		d, err := c.Dup()
		if err != nil {
			return err
		}
		if d.Errhandler() != h {
			return errors.New("Dup did not inherit the handler")
		}
		if err := d.Free(); err != nil {
			return err
		}
		err = d.Send(nil, 0, 0)
		if e := once("a send on a freed communicator", d, err, ErrComm); e != nil {
			return e
		}
		r, err := c.Isend([]byte("x"), 0, 7)
		if err != nil {
			return err
		}
		if err := r.Free(); err != nil {
			return err
		}
		_, err = r.Wait()
		if e := once("Wait on a freed request", c, err, ErrRequest); e != nil {
			return e
		}
		if _, err := c.Recv(make([]byte, 1), 0, 7); err != nil {
			return err
		}
		mine := errors.New("a library's error")
		if err := c.CallErrhandler(mine); err != mine {
			return fmt.Errorf("CallErrhandler returned %v", err)
		}
		if comms, errs := log.take(); len(errs) != 1 || errs[0] != mine || comms[0] != c {
			return fmt.Errorf("CallErrhandler: the handler saw %v", errs)
		}
		if err := c.SetErrhandler(nil); !errors.Is(err, ErrArg) {
			return fmt.Errorf("SetErrhandler(nil): %v", err)
		}
		log.take()
		if err := c.SetErrhandler(ErrorsReturn); err != nil {
			return err
		}
		if err := c.Send(nil, 5, 0); !errors.Is(err, ErrRank) {
			return err
		}
		if _, errs := log.take(); len(errs) != 0 {
			return fmt.Errorf("ErrorsReturn still called the handler: %v", errs)
		}
		return c.Barrier()
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := NewErrhandler(nil); !errors.Is(err, ErrArg) {
		t.Fatalf("NewErrhandler(nil): %v", err)
	}
}

// TestErrhandlerInherited: Split and Create give the new communicator the
// parent's handler.
func TestErrhandlerInherited(t *testing.T) {
	var log handlerLog
	h := log.handler(t)
	if err := Run(2, func(c *Comm) error {
		if err := c.SetErrhandler(h); err != nil {
			return err
		}
		s, err := c.Split(0, 0)
		if err != nil {
			return err
		}
		g, err := c.Group()
		if err != nil {
			return err
		}
		k, err := c.Create(g)
		if err != nil {
			return err
		}
		for _, cm := range []*Comm{s, k} {
			if cm.Errhandler() != h {
				return errors.New("a new communicator did not inherit the handler")
			}
			if err := cm.Free(); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// The process scenarios of the error handlers: a nil communicator's and a
// group routine's errors go to Self's handler; ErrorsAreFatal and
// ErrorsAbort end the job, saying what the error was.
var (
	scSelfHandler = scenario("errh-self", func(c *Comm) error {
		var log handlerLog
		h, _ := NewErrhandler(func(c *Comm, err error) {
			log.mu.Lock()
			log.comms, log.errs = append(log.comms, c), append(log.errs, err)
			log.mu.Unlock()
		})
		if err := Self().SetErrhandler(h); err != nil {
			return err
		}
		var null *Comm
		err1 := null.Send(nil, 0, 0)
		_, err2 := (*Group)(nil).Incl([]int{0})
		comms, errs := log.take()
		if !errors.Is(err1, ErrComm) || !errors.Is(err2, ErrGroup) || len(errs) != 2 || errs[0] != err1 || errs[1] != err2 || comms[0] != Self() {
			return fmt.Errorf("Self's handler saw %v on %v for %v and %v", errs, comms, err1, err2)
		}
		return nil
	})
	scFatal = scenario("errh-fatal", func(c *Comm) error {
		h := map[string]*Errhandler{"fatal": ErrorsAreFatal, "abort": ErrorsAbort}[os.Getenv("ERRH_KIND")]
		if err := c.SetErrhandler(h); err != nil {
			return err
		}
		err := c.Send(nil, 99, 0)
		return fmt.Errorf("the job runs on after %v", err)
	})
)

func TestErrhandlerSelf(t *testing.T) { runProcesses(t, 2, scSelfHandler) }

// TestErrorsAreFatal: ErrorsAreFatal and ErrorsAbort end a process job
// with exit status 1 and the error's text.
func TestErrorsAreFatal(t *testing.T) {
	for _, kind := range []string{"fatal", "abort"} {
		cmd := testrole.Command(scFatal, []string{"ERRH_KIND=" + kind})

		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("%s: %v, want exit status 1:\n%s", kind, err, out)
		}
		name := map[string]string{"fatal": "ErrorsAreFatal", "abort": "ErrorsAbort"}[kind]
		for _, want := range []string{"destination 99 is not a rank", name} {
			if !strings.Contains(string(out), want) {
				t.Fatalf("%s: the output does not say %q:\n%s", kind, want, out)
			}
		}
	}
}

// TestAddErrorClass: classes and codes a library adds are matched by
// errors.Is, named by ErrorString, coded above every code in use, and
// raise AttrLastUsedCode; predefined ones cannot be renamed.
func TestAddErrorClass(t *testing.T) {
	last := lastUsedCode()
	cls, err := AddErrorClass()
	if err != nil {
		t.Fatal(err)
	}
	code, err := AddErrorCode(cls)
	if err != nil {
		t.Fatal(err)
	}
	other, err := AddErrorCode(ErrArg)
	if err != nil {
		t.Fatal(err)
	}
	if ErrorCode(cls) != last+1 || ErrorCode(code) != last+2 || ErrorCode(other) != last+3 || lastUsedCode() != last+3 {
		t.Fatalf("codes %d %d %d after %d, last used %d", ErrorCode(cls), ErrorCode(code), ErrorCode(other), last, lastUsedCode())
	}
	if err := AddErrorString(cls, "the library's trouble"); err != nil {
		t.Fatal(err)
	}
	if err := AddErrorString(code, "a particular trouble"); err != nil {
		t.Fatal(err)
	}
	wrapped := &Error{Class: code, Op: "LibCall", Detail: "went wrong"}
	for name, c := range map[string]struct {
		err   error
		class error
	}{"class": {cls, cls}, "code": {code, cls}, "wrapped code": {wrapped, cls}, "code of ErrArg": {other, ErrArg}} {
		if !errors.Is(c.err, c.class) || ErrorClass(c.err) != c.class {
			t.Errorf("%s: errors.Is %v, ErrorClass %v, want %v", name, errors.Is(c.err, c.class), ErrorClass(c.err), c.class)
		}
	}
	if !errors.Is(wrapped, code) || errors.Is(code, ErrOther) {
		t.Error("a code matches itself and its class only")
	}
	if s := ErrorString(cls); s != "mpi: the library's trouble" {
		t.Errorf("ErrorString(class) = %q", s)
	}
	if s := ErrorString(code); s != "mpi: a particular trouble" {
		t.Errorf("ErrorString(code) = %q", s)
	}
	if s := ErrorString(other); !strings.Contains(s, "invalid argument") {
		t.Errorf("ErrorString of an unnamed code = %q", s)
	}
	if err := AddErrorString(ErrArg, "x"); !errors.Is(err, ErrArg) {
		t.Errorf("renaming ErrArg: %v", err)
	}
	if _, err := AddErrorCode(errors.New("no class")); !errors.Is(err, ErrArg) {
		t.Errorf("AddErrorCode of no class: %v", err)
	}
	if err := Run(1, func(c *Comm) error {
		v, _, _ := c.Attr(AttrLastUsedCode)
		if v != last+3 {
			return fmt.Errorf("MPI_LASTUSEDCODE %v, want %d", v, last+3)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
