package mpi

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
)

// calls records the callbacks of a test's keyvals, in order.
type calls struct {
	mu  sync.Mutex
	log []string
}

func (c *calls) add(format string, args ...any) {
	c.mu.Lock()
	c.log = append(c.log, fmt.Sprintf(format, args...))
	c.mu.Unlock()
}

func (c *calls) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.log
	c.log = nil
	return l
}

// deleter records "delete <extra> <value>".
func (c *calls) deleter() AttrDeleter {
	return func(_ *Comm, _ *Keyval, value, extra any) error {
		c.add("delete %v %v", extra, value)
		return nil
	}
}

// TestAttributes: set, read, replace and delete an attribute, each
// deleter call where the standard puts it; a missing attribute; a freed
// keyval, whose attributes stay until deleted.
func TestAttributes(t *testing.T) {
	if err := Run(1, func(c *Comm) error {
		var log calls
		a := NewKeyval(nil, log.deleter(), "a")
		b := NewKeyval(DupAttr, log.deleter(), "b")
		if v, ok, err := c.Attr(a); v != nil || ok || err != nil {
			return fmt.Errorf("Attr before SetAttr: %v %v %v", v, ok, err)
		}
		if err := c.SetAttr(a, 1); err != nil {
			return err
		}
		if err := c.SetAttr(b, "x"); err != nil {
			return err
		}
		if err := c.SetAttr(a, 2); err != nil { // replaces: deletes 1
			return err
		}
		if v, ok, err := c.Attr(a); v != 2 || !ok || err != nil {
			return fmt.Errorf("Attr(a) = %v %v %v, want 2", v, ok, err)
		}
		if got := log.take(); !slices.Equal(got, []string{"delete a 1"}) {
			return fmt.Errorf("replacing: %q", got)
		}
		if err := c.DeleteAttr(a); err != nil {
			return err
		}
		if err := c.DeleteAttr(a); !errors.Is(err, ErrKeyval) {
			return fmt.Errorf("DeleteAttr of nothing: %v", err)
		}
		if got := log.take(); !slices.Equal(got, []string{"delete a 2"}) {
			return fmt.Errorf("deleting: %q", got)
		}
		if err := b.Free(); err != nil {
			return err
		}
		if err := b.Free(); !errors.Is(err, ErrKeyval) {
			return fmt.Errorf("second Free: %v", err)
		}
		for name, err := range map[string]error{
			"SetAttr":     c.SetAttr(b, 1),
			"DeleteAttr":  c.DeleteAttr(b),
			"SetAttr nil": c.SetAttr(nil, 1),
		} {
			if !errors.Is(err, ErrKeyval) {
				return fmt.Errorf("%s with a freed or nil keyval: %v", name, err)
			}
		}
		if _, _, err := c.Attr(b); !errors.Is(err, ErrKeyval) {
			return fmt.Errorf("Attr with a freed keyval: %v", err)
		}
		// b's attribute stays, and goes with its communicator.
		d, err := c.Dup()
		if err != nil {
			return err
		}
		if err := d.Free(); err != nil {
			return err
		}
		if got := log.take(); !slices.Equal(got, []string{"delete b x"}) {
			return fmt.Errorf("b's attribute copied to the dup and freed with it: %q", got)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestAttributesDup: Dup copies what each copier says (the same value, a
// new one, nothing), in order; a copier's error fails Dup and deletes
// what it had copied; Free deletes the last set first; Split does not
// copy.
func TestAttributesDup(t *testing.T) {
	if err := Run(2, func(c *Comm) error {
		var log calls
		same := NewKeyval(DupAttr, log.deleter(), "same")
		none := NewKeyval(nil, log.deleter(), "none")
		double := NewKeyval(func(_ *Comm, _ *Keyval, _, v any) (any, bool, error) { return 2 * v.(int), true, nil }, log.deleter(), "double")
		skip := NewKeyval(func(*Comm, *Keyval, any, any) (any, bool, error) { return nil, false, nil }, log.deleter(), "skip")
		for k, v := range map[*Keyval]int{same: 1, none: 2, double: 3, skip: 4} {
			if err := c.SetAttr(k, v); err != nil {
				return err
			}
		}
		d, err := c.Dup()
		if err != nil {
			return err
		}
		for k, want := range map[*Keyval]any{same: 1, none: nil, double: 6, skip: nil} {
			if v, ok, err := d.Attr(k); err != nil || v != want || ok != (want != nil) {
				return fmt.Errorf("the dup's %v: %v %v %v, want %v", k.extra, v, ok, err, want)
			}
		}
		if s, err := c.Split(0, 0); err != nil {
			return err
		} else if v, ok, _ := s.Attr(same); ok {
			return fmt.Errorf("Split copied an attribute: %v", v)
		} else if err := s.Free(); err != nil {
			return err
		}
		// Set on d in a known order; Free deletes the last set first.
		log.take()
		if err := d.SetAttr(none, "n"); err != nil {
			return err
		}
		if err := d.Free(); err != nil {
			return err
		}
		got := log.take()
		if len(got) != 3 || got[0] != "delete none n" || !slices.Contains(got, "delete same 1") || !slices.Contains(got, "delete double 6") {
			return fmt.Errorf("Free's deletions: %q", got)
		}
		if _, _, err := d.Attr(same); !errors.Is(err, ErrComm) {
			return fmt.Errorf("Attr on a freed communicator: %v", err)
		}
		// A failing copier fails Dup; what it had copied is deleted.
		boom := errors.New("boom")
		bad := NewKeyval(func(*Comm, *Keyval, any, any) (any, bool, error) { return nil, false, boom }, nil, "bad")
		if err := c.SetAttr(bad, 0); err != nil {
			return err
		}
		log.take()
		if d, err := c.Dup(); d != nil || !errors.Is(err, ErrOther) || !errors.Is(err, boom) {
			return fmt.Errorf("Dup with a failing copier: %v, %v", d, err)
		}
		if got := log.take(); len(got) != 2 { // same and double, copied before bad
			return fmt.Errorf("after the failed Dup: %q", got)
		}
		return c.DeleteAttr(bad)
	}); err != nil {
		t.Fatal(err)
	}
}

// TestAttributesFinalize: Finalize deletes Self's attributes first, the
// last set first, while MPI still works (a deleter's barrier on World
// completes), and returns a deleter's error; World's stay.
func TestAttributesFinalize(t *testing.T) {
	var log calls
	boom := errors.New("boom")
	err := Run(2, func(c *Comm) error {
		self := c.p.self
		k := func(name string, fail bool) *Keyval {
			return NewKeyval(nil, func(s *Comm, _ *Keyval, v, _ any) error {
				if s != self {
					return errors.New("a deleter got another communicator")
				}
				if err := c.Barrier(); err != nil {
					return err
				}
				if c.Rank() == 0 {
					log.add("%s %v", name, v)
				}
				if fail && c.Rank() == 1 {
					return boom
				}
				return nil
			}, nil)
		}
		for i, name := range []string{"first", "second", "third"} {
			if err := self.SetAttr(k(name, name == "second"), i); err != nil {
				return err
			}
		}
		if err := c.SetAttr(k("world", false), 9); err != nil {
			return err
		}
		me := c.Rank()
		err := c.Finalize()
		if me == 1 {
			if !errors.Is(err, ErrOther) || !errors.Is(err, boom) {
				return fmt.Errorf("rank 1's Finalize: %v, want the deleter's error", err)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("rank %d's Finalize: %w", me, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := log.take(); !slices.Equal(got, []string{"third 2", "second 1", "first 0"}) {
		t.Fatalf("Finalize's deletions: %q", got)
	}
}

// TestPredefinedAttributes: the environmental inquiries read through
// Attr on any communicator, and refuse to be set, deleted or freed.
func TestPredefinedAttributes(t *testing.T) {
	if err := Run(3, func(c *Comm) error {
		s, err := c.Split(c.Rank()%2, 0)
		if err != nil {
			return err
		}
		for _, cm := range []*Comm{c, s} {
			for k, want := range map[*Keyval]any{
				AttrTagUB: TagUB, AttrHost: ProcNull, AttrIO: AnySource, AttrWtimeIsGlobal: true,
				AttrAppNum: 0, AttrUniverseSize: 3, AttrLastUsedCode: lastUsedCode(), // 1002 until a test adds codes
			} {
				if v, ok, err := cm.Attr(k); v != want || !ok || err != nil {
					return fmt.Errorf("%s: %v %v %v, want %v", k.name, v, ok, err, want)
				}
				if err := cm.SetAttr(k, 1); !errors.Is(err, ErrKeyval) {
					return fmt.Errorf("SetAttr(%s): %v", k.name, err)
				}
				if err := cm.DeleteAttr(k); !errors.Is(err, ErrKeyval) {
					return fmt.Errorf("DeleteAttr(%s): %v", k.name, err)
				}
				if err := k.Free(); !errors.Is(err, ErrKeyval) {
					return fmt.Errorf("Free(%s): %v", k.name, err)
				}
			}
		}
		return s.Free()
	}); err != nil {
		t.Fatal(err)
	}
}

// TestAttributesConcurrent: goroutines of a ThreadMultiple rank set,
// read and delete attributes of one communicator at once (-race), each
// deleter running once per value.
func TestAttributesConcurrent(t *testing.T) {
	if err := Run(1, func(c *Comm) error {
		var deletes sync.Map
		k := NewKeyval(nil, func(_ *Comm, _ *Keyval, v, _ any) error {
			if _, dup := deletes.LoadOrStore(v, true); dup {
				return fmt.Errorf("value %v deleted twice", v)
			}
			return nil
		}, nil)
		return concurrently(4, 500, func(g, i int) error {
			if err := c.SetAttr(k, g*1000+i); err != nil {
				return err
			}
			if _, _, err := c.Attr(k); err != nil {
				return err
			}
			if err := c.DeleteAttr(k); err != nil && !errors.Is(err, ErrKeyval) {
				return err
			}
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
}
