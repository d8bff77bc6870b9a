package mpit

import (
	"errors"
	"testing"
)

// initT initializes the interface for one test and finalizes it after.
func initT(t *testing.T) {
	t.Helper()
	if err := Init(); err != nil {
		t.Fatalf("Init: %v", err)
	}
	t.Cleanup(func() {
		if err := Finalize(); err != nil {
			t.Errorf("Finalize: %v", err)
		}
	})
}

func TestInitCounting(t *testing.T) {
	if n := InitCount(); n != 0 {
		t.Fatalf("InitCount() = %d at the start of the test", n)
	}
	if err := Finalize(); !errors.Is(err, ErrNotInitialized) {
		t.Fatalf("Finalize without Init = %v, want ErrNotInitialized", err)
	}
	if _, err := current("test"); !errors.Is(err, ErrNotInitialized) {
		t.Fatalf("use before Init = %v, want ErrNotInitialized", err)
	}
	for range 3 {
		if err := Init(); err != nil {
			t.Fatal(err)
		}
	}
	for i := 3; i > 0; i-- {
		if _, err := current("test"); err != nil {
			t.Fatalf("use with %d Inits outstanding: %v", i, err)
		}
		if err := Finalize(); err != nil {
			t.Fatalf("Finalize %d: %v", 4-i, err)
		}
	}
	if n := InitCount(); n != 0 {
		t.Fatalf("InitCount() = %d after as many Finalizes as Inits", n)
	}
	if _, err := current("test"); !errors.Is(err, ErrNotInitialized) {
		t.Fatalf("use after the last Finalize = %v, want ErrNotInitialized", err)
	}
	if err := Finalize(); !errors.Is(err, ErrNotInitialized) {
		t.Fatalf("one Finalize too many = %v, want ErrNotInitialized", err)
	}
}

func TestErrorClasses(t *testing.T) {
	seen := map[string]bool{}
	for e := ErrInvalid; e <= ErrPvarNoAtomic; e++ {
		msg := e.Error()
		if seen[msg] || msg == "" {
			t.Errorf("class %d: message %q repeats or is empty", int(e), msg)
		}
		seen[msg] = true
		wrapped := errorf(e, "detail")
		if !errors.Is(wrapped, e) {
			t.Errorf("%v with a detail does not match its class", e)
		}
		for o := ErrInvalid; o <= ErrPvarNoAtomic; o++ {
			if o != e && errors.Is(wrapped, o) {
				t.Errorf("%v matches %v too", e, o)
			}
		}
	}
	if len(seen) != 16 {
		t.Errorf("%d error classes, want MPI-3.1's 16", len(seen))
	}
}

func TestEnumStrings(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{VerbosityMPIDevAll.String(), "mpidev_all"},
		{BindInfo.String(), "info"},
		{ScopeAllEq.String(), "all_eq"},
		{TypeChar.String(), "MPI_CHAR"},
		{Scope(9).String(), "Scope(9)"},
	} {
		if c.got != c.want {
			t.Errorf("String() = %q, want %q", c.got, c.want)
		}
	}
	if !(VerbosityUserBasic < VerbosityUserDetail && VerbosityTunerAll < VerbosityMPIDevBasic) {
		t.Error("verbosity levels are not in MPI's order")
	}
}
func TestFinalizeInvalidatesHandles(t *testing.T) {
	if err := Init(); err != nil {
		t.Fatal(err)
	}
	s, err := NewSession()
	if err != nil {
		t.Fatal(err)
	}
	i, err := CvarIndex(testLocal.Name())
	if err != nil {
		t.Fatal(err)
	}
	h, _, err := CvarHandleAlloc(i, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := Finalize(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Read(); !errors.Is(err, ErrNotInitialized) {
		t.Errorf("Read while finalized = %v, want ErrNotInitialized", err)
	}
	initT(t)
	if _, err := h.Read(); !errors.Is(err, ErrInvalidHandle) {
		t.Errorf("Read of a handle from before Finalize = %v, want ErrInvalidHandle", err)
	}
	if err := s.Free(); !errors.Is(err, ErrInvalidSession) {
		t.Errorf("Free of a session from before Finalize = %v, want ErrInvalidSession", err)
	}
}
