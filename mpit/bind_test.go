package mpit

import (
	"errors"
	"testing"

	"github.com/tachyon-hpc/tachyon/pvar"
)

// object is a bindable object of any type, usable or not.
type object struct {
	bind Bind
	key  pvar.Key
	ok   bool
}

func (o object) MPITBind() Bind            { return o.bind }
func (o object) MPITKey() (pvar.Key, bool) { return o.key, o.ok }

var (
	testBoundCounter = pvar.NewCounter("mpit_test_bound_counter", "counts per rank", pvar.WithBind(pvar.BindComm))
	testBoundHWM     = pvar.NewHighWatermark("mpit_test_bound_hwm", "marks per rank", pvar.WithBind(pvar.BindComm))
)

func TestBindInfo(t *testing.T) {
	initT(t)
	for _, tc := range []struct {
		name string
		c    Class
		want Bind
	}{
		{testBoundCounter.Name(), pvar.ClassCounter, BindComm},
		{testBoundHWM.Name(), pvar.ClassHighWatermark, BindComm},
		{testCounter.Name(), pvar.ClassCounter, BindNoObject},
	} {
		d, _ := PvarInfo(mustIndex(t, tc.name, tc.c))
		if d.Bind != tc.want {
			t.Errorf("%s: Bind %v, want %v", tc.name, d.Bind, tc.want)
		}
	}
}

func TestBindWrongObject(t *testing.T) {
	initT(t)
	s := session(t)
	i := mustIndex(t, testBoundCounter.Name(), pvar.ClassCounter)
	o := pvar.NewOwner()
	for _, tc := range []struct {
		what string
		obj  Object
	}{
		{"nil", nil},
		{"a window", object{BindWin, pvar.Key{Owner: o}, true}},
		{"a freed communicator", object{BindComm, pvar.Key{}, false}},
		{"a communicator without a rank", object{BindComm, pvar.Key{}, true}},
	} {
		h, n, err := s.HandleAlloc(i, tc.obj)
		if !errors.Is(err, ErrInvalid) || h != nil || n != 0 {
			t.Errorf("HandleAlloc with %s = %v, %d, %v; want ErrInvalid", tc.what, h, n, err)
		}
	}
	// An unbound variable ignores whatever it is given.
	if _, _, err := s.HandleAlloc(mustIndex(t, testCounter.Name(), pvar.ClassCounter), object{BindWin, pvar.Key{}, false}); err != nil {
		t.Errorf("HandleAlloc of an unbound variable with an object = %v", err)
	}
}

func TestBoundReads(t *testing.T) {
	initT(t)
	o1, o2 := pvar.NewOwner(), pvar.NewOwner()
	c1, c2 := testBoundCounter.ShardOf(o1), testBoundCounter.ShardOf(o2)
	w1, w2 := testBoundHWM.ShardOf(o1), testBoundHWM.ShardOf(o2)
	defer c1.Close()
	defer c2.Close()
	defer w1.Close()
	defer w2.Close()
	s := session(t)
	ic := mustIndex(t, testBoundCounter.Name(), pvar.ClassCounter)
	iw := mustIndex(t, testBoundHWM.Name(), pvar.ClassHighWatermark)
	alloc := func(i int, o *pvar.Owner) *PvarHandle {
		h, n, err := s.HandleAlloc(i, object{BindComm, pvar.Key{Owner: o}, true})
		if err != nil || n != 1 {
			t.Fatalf("HandleAlloc = %d, %v", n, err)
		}
		if err := s.Start(h); err != nil {
			t.Fatal(err)
		}
		return h
	}
	hc1, hc2, hw1, hw2 := alloc(ic, o1), alloc(ic, o2), alloc(iw, o1), alloc(iw, o2)
	c1.Add(3)
	c2.Add(10)
	testBoundCounter.Add(100) // no owner: the process's only
	w1.Observe(4)
	w2.Observe(8)
	for _, tc := range []struct {
		h    *PvarHandle
		want int64
	}{{hc1, 3}, {hc2, 10}, {hw1, 4}, {hw2, 8}} {
		if v := read(t, s, tc.h); v != tc.want {
			t.Errorf("%s bound to a rank reads %d, want %d", tc.h.e.desc.Name, v, tc.want)
		}
	}
}

var testBoundState = pvar.NewState("mpit_test_bound_state", "modes per link", []string{"fast", "slow"}, pvar.WithBind(pvar.BindComm))

// TestStateVariable: a state variable is MPI_T's state class, TypeInt
// with an Enum of its states, and a handle bound to a rank reads that
// rank's worst state now.
func TestStateVariable(t *testing.T) {
	initT(t)
	i := mustIndex(t, testBoundState.Name(), pvar.ClassState)
	d, err := PvarInfo(i)
	if err != nil {
		t.Fatal(err)
	}
	if d.Datatype != TypeInt || !d.Continuous || !d.ReadOnly {
		t.Errorf("desc %+v", d)
	}
	name, n, err := d.Enum.Info()
	if err != nil || name != "mpit_test_bound_state" || n != 2 {
		t.Fatalf("Enum.Info = %q, %d, %v", name, n, err)
	}
	if _, s, err := d.Enum.Item(1); err != nil || s != "slow" {
		t.Errorf("Enum.Item(1) = %q, %v", s, err)
	}
	o := pvar.NewOwner()
	a, b := testBoundState.ShardOf(o), testBoundState.ShardOf(o)
	defer a.Close()
	defer b.Close()
	b.Set(1)
	s := session(t)
	h, _, err := s.HandleAlloc(i, object{BindComm, pvar.Key{Owner: o}, true})
	if err != nil {
		t.Fatal(err)
	}
	if v := read(t, s, h); v != 1 {
		t.Errorf("read %d, want 1 (slow)", v)
	}
	b.Set(0)
	if v := read(t, s, h); v != 0 {
		t.Errorf("read %d, want 0 (fast)", v)
	}
}
