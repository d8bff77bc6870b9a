package cvar

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/testname"
)

func TestDefaultsAndSet(t *testing.T) {
	i := NewInt(testname.Uniq("test_int"), 5, "an int", WithRange(-3, 10), WithUnit("things"), WithCategory("test"))
	if i.Get() != 5 || i.Source() != FromDefault || i.Default() != "5" || i.Unit() != "things" {
		t.Fatalf("int: got %d from %v default %q", i.Get(), i.Source(), i.Default())
	}
	if err := i.Set("-3"); err != nil || i.Get() != -3 || i.Source() != FromSet {
		t.Fatalf("Set(-3): %v, got %d", err, i.Get())
	}
	for _, bad := range []string{"11", "-4"} {
		if err := i.Set(bad); !errors.Is(err, ErrRange) {
			t.Errorf("Set(%s) = %v, want ErrRange", bad, err)
		}
	}
	if err := i.Set("x"); !errors.Is(err, ErrInvalid) {
		t.Errorf("Set(x) = %v, want ErrInvalid", err)
	}
	if i.Get() != -3 {
		t.Errorf("failed Set changed the value to %d", i.Get())
	}

	d := NewDuration(testname.Uniq("test_duration"), time.Millisecond, "a duration", WithRange(0, int64(time.Second)))
	if d.Get() != time.Millisecond || d.String() != "1ms" {
		t.Fatalf("duration: %v %q", d.Get(), d.String())
	}
	if err := d.Set("250us"); err != nil || d.Get() != 250*time.Microsecond {
		t.Fatalf("Set(250us): %v %v", err, d.Get())
	}
	if err := d.Set("2s"); !errors.Is(err, ErrRange) {
		t.Errorf("Set(2s) = %v, want ErrRange", err)
	}

	e := NewEnum(testname.Uniq("test_enum"), "b", []string{"a", "b", "c"}, "an enum")
	if e.Get() != "b" || e.Index() != 1 {
		t.Fatalf("enum: %q %d", e.Get(), e.Index())
	}
	if err := e.Set("C"); err != nil || e.Get() != "c" {
		t.Fatalf("Set(C): %v %q", err, e.Get())
	}
	if err := e.Set("d"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "a, b, c") {
		t.Errorf("Set(d) = %v, want ErrInvalid listing the choices", err)
	}

	b := NewBool(testname.Uniq("test_bool"), false, "a bool")
	if err := b.Set("true"); err != nil || !b.Get() {
		t.Fatalf("bool Set: %v", err)
	}
	f := NewFloat(testname.Uniq("test_float"), 0.5, "a float")
	if err := f.Set("NaN"); !errors.Is(err, ErrInvalid) || f.Get() != 0.5 {
		t.Errorf("float Set(NaN) = %v, value %v", err, f.Get())
	}
	s := NewString(testname.Uniq("test_string"), "x", "a string")
	if err := s.Set("hello"); err != nil || s.Get() != "hello" {
		t.Fatalf("string Set: %v %q", err, s.Get())
	}
	u := NewUint(testname.Uniq("test_uint"), 7, "a uint", WithRange(1, 8))
	if err := u.Set("9"); !errors.Is(err, ErrRange) {
		t.Errorf("uint Set(9) = %v", err)
	}
	if err := u.Set("-1"); !errors.Is(err, ErrInvalid) {
		t.Errorf("uint Set(-1) = %v", err)
	}
}

func TestReadonly(t *testing.T) {
	name := testname.Uniq("test_readonly")
	r := NewInt(name, 1, "fixed at start", WithScope(ScopeReadonly))
	if err := r.Set("2"); !errors.Is(err, ErrReadOnly) || r.Get() != 1 {
		t.Fatalf("Set of readonly = %v, value %d", err, r.Get())
	}
	if err := Set(name, "2"); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("registry Set of readonly = %v", err)
	}
	if err := Set("no_such_var", "2"); !errors.Is(err, ErrUnknown) {
		t.Fatalf("Set of unknown = %v", err)
	}
}

func TestEnvironment(t *testing.T) {
	// Each run's environment variables carry testname.Uniq's suffix too:
	// TACHYON_TEST_ENV_GOOD_2 for test_env_good_2.
	goodName, badName, rngName := testname.Uniq("test_env_good"), testname.Uniq("test_env_bad"), testname.Uniq("test_env_range")
	badEnv := "TACHYON_TEST_ENV_BAD" + strings.ToUpper(strings.TrimPrefix(badName, "test_env_bad"))
	rngEnv := "TACHYON_TEST_ENV_RANGE" + strings.ToUpper(strings.TrimPrefix(rngName, "test_env_range"))
	t.Setenv("TACHYON_TEST_ENV_GOOD"+strings.ToUpper(strings.TrimPrefix(goodName, "test_env_good")), "42")
	t.Setenv(badEnv, "lots")
	t.Setenv(rngEnv, "100")
	good := NewInt(goodName, 1, "from env")
	bad := NewInt(badName, 1, "bad env")
	rng := NewInt(rngName, 1, "env out of range", WithRange(0, 10), WithScope(ScopeReadonly))
	if good.Get() != 42 || good.Source() != FromEnvironment {
		t.Errorf("good: %d from %v", good.Get(), good.Source())
	}
	if bad.Get() != 1 || bad.Source() != FromDefault || rng.Get() != 1 {
		t.Errorf("bad env values applied: %d %d", bad.Get(), rng.Get())
	}
	var sawBad, sawRange bool
	for _, err := range Problems() {
		msg := err.Error()
		sawBad = sawBad || strings.Contains(msg, badEnv) && errors.Is(err, ErrInvalid)
		sawRange = sawRange || strings.Contains(msg, rngEnv) && errors.Is(err, ErrRange)
	}
	if !sawBad || !sawRange {
		t.Errorf("Problems() = %v, want both bad variables reported", Problems())
	}
}

func TestRegistry(t *testing.T) {
	// A category of the run's own: in one shared by every run, the runs'
	// variables would interleave (test_reg_a, test_reg_a_2, test_reg_b, ...).
	cat, a, b := testname.Uniq("zz"), testname.Uniq("test_reg_a"), testname.Uniq("test_reg_b")
	NewInt(b, 0, "b", WithCategory(cat))
	NewInt(a, 0, "a", WithCategory(cat))
	v, ok := Lookup(a)
	env := "TACHYON_TEST_REG_A" + strings.ToUpper(strings.TrimPrefix(a, "test_reg_a"))
	if !ok || v.Name() != a || v.Env() != env || v.Type() != TypeInt {
		t.Fatalf("Lookup: %v %v", v, ok)
	}
	all := All()
	ia, ib := -1, -1
	for i, v := range all {
		switch v.Name() {
		case a:
			ia = i
		case b:
			ib = i
		}
		if v.Doc() == "" {
			t.Errorf("%s has no doc", v.Name())
		}
	}
	if ia < 0 || ib != ia+1 {
		t.Errorf("All order: a at %d, b at %d", ia, ib)
	}
}

func TestBadRegistration(t *testing.T) {
	dup := testname.Uniq("test_dup")
	for name, f := range map[string]func(){
		"duplicate":   func() { NewInt(dup, 0, "x"); NewInt(dup, 0, "x") },
		"bad name":    func() { NewInt("Bad-Name", 0, "x") },
		"bad default": func() { NewEnum(testname.Uniq("test_bad_default"), "z", []string{"a"}, "x") },
		"out of range default": func() {
			NewInt(testname.Uniq("test_bad_range"), 50, "x", WithRange(0, 10))
		},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: registration did not panic", name)
				}
			}()
			f()
		}()
	}
}

func BenchmarkGet(b *testing.B) {
	d := NewDuration(testname.Uniq("bench_duration"), time.Millisecond, "x")
	var sum time.Duration
	for b.Loop() {
		sum += d.Get()
	}
	_ = sum
}
