package mpit

import (
	"errors"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/internal/testname"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// Control variables of every type and scope, filed under "mpit_test".
var (
	testLocal    = cvar.NewInt("mpit_test_local", 5, "a local int", cvar.WithCategory("mpit_test"), cvar.WithRange(0, 100), cvar.WithUnit("things"))
	testConst    = cvar.NewInt("mpit_test_constant", 1, "a constant", cvar.WithCategory("mpit_test"), cvar.WithScope(cvar.ScopeConstant))
	testReadonly = cvar.NewInt("mpit_test_readonly", 2, "a readonly", cvar.WithCategory("mpit_test"), cvar.WithScope(cvar.ScopeReadonly))
	testGroup    = cvar.NewInt("mpit_test_group", 3, "a group", cvar.WithCategory("mpit_test"), cvar.WithScope(cvar.ScopeGroup))
	testAll      = cvar.NewInt("mpit_test_all", 4, "an all", cvar.WithCategory("mpit_test"), cvar.WithScope(cvar.ScopeAll), cvar.WithVerbosity(cvar.MPIDevDetail))
	testUint     = cvar.NewUint("mpit_test_uint", 7, "a uint", cvar.WithCategory("mpit_test"))
	testFloat    = cvar.NewFloat("mpit_test_float", 0.5, "a float", cvar.WithCategory("mpit_test"))
	testBool     = cvar.NewBool("mpit_test_bool", false, "a bool", cvar.WithCategory("mpit_test"))
	testString   = cvar.NewString("mpit_test_string", "x", "a string", cvar.WithCategory("mpit_test"))
	testDuration = cvar.NewDuration("mpit_test_duration", time.Millisecond, "a duration", cvar.WithCategory("mpit_test"))
	testEnum     = cvar.NewEnum("mpit_test_enum", "b", []string{"a", "b", "c"}, "an enum", cvar.WithCategory("mpit_test"))
)

// cvarHandle allocates a handle on the control variable named name.
func cvarHandle(t *testing.T, name string) *CvarHandle {
	t.Helper()
	i, err := CvarIndex(name)
	if err != nil {
		t.Fatalf("CvarIndex(%s): %v", name, err)
	}
	h, n, err := CvarHandleAlloc(i, nil)
	if err != nil || n != 1 {
		t.Fatalf("CvarHandleAlloc(%s) = %d, %v; want count 1", name, n, err)
	}
	t.Cleanup(func() { h.Free() })
	return h
}

func TestCvarEnumerate(t *testing.T) {
	initT(t)
	n, err := CvarNum()
	if err != nil || n < 11 {
		t.Fatalf("CvarNum = %d, %v; want at least the test's 11", n, err)
	}
	for i := range n {
		d, err := CvarInfo(i)
		if err != nil || d.Name == "" {
			t.Fatalf("CvarInfo(%d) = %+v, %v", i, d, err)
		}
		if j, err := CvarIndex(d.Name); err != nil || j != i {
			t.Errorf("CvarIndex(%s) = %d, %v; want %d", d.Name, j, err, i)
		}
		if again, _ := CvarInfo(i); again != d {
			t.Errorf("CvarInfo(%d) changed: %+v then %+v", i, d, again)
		}
	}
	for _, i := range []int{-1, n, n + 1000} {
		if _, err := CvarInfo(i); !errors.Is(err, ErrInvalidIndex) {
			t.Errorf("CvarInfo(%d) = %v, want ErrInvalidIndex", i, err)
		}
		if _, _, err := CvarHandleAlloc(i, nil); !errors.Is(err, ErrInvalidIndex) {
			t.Errorf("CvarHandleAlloc(%d) = %v, want ErrInvalidIndex", i, err)
		}
	}
	if _, err := CvarIndex("mpit_no_such_variable"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("CvarIndex of an unknown name = %v, want ErrInvalidName", err)
	}
	i, _ := CvarIndex(testAll.Name())
	d, _ := CvarInfo(i)
	want := CvarDesc{Name: "mpit_test_all", Desc: "an all", Verbosity: VerbosityMPIDevDetail,
		Datatype: TypeCount, Bind: BindNoObject, Scope: ScopeAllEq}
	if d != want {
		t.Errorf("CvarInfo(mpit_test_all) = %+v, want %+v", d, want)
	}
	i, _ = CvarIndex(testLocal.Name())
	if d, _ := CvarInfo(i); d.Desc != "a local int (things)" {
		t.Errorf("desc with a unit = %q", d.Desc)
	}
}

func TestCvarGrowth(t *testing.T) {
	initT(t)
	n0, _ := CvarNum()
	before := make([]string, n0)
	for i := range before {
		d, _ := CvarInfo(i)
		before[i] = d.Name
	}
	// A name that sorts before every other but the earlier runs' (category
	// "" and "a"): the registry's order puts it at or near the start, the
	// interface's after all others.
	late := testname.Uniq("a_mpit_test_late")
	cvar.NewInt(late, 0, "registered after the interface looked")
	n1, _ := CvarNum()
	if n1 != n0+1 {
		t.Fatalf("CvarNum = %d after one registration, want %d", n1, n0+1)
	}
	if i, err := CvarIndex(late); err != nil || i != n0 {
		t.Errorf("index of the late variable = %d, %v; want %d", i, err, n0)
	}
	for i, name := range before {
		if d, _ := CvarInfo(i); d.Name != name {
			t.Errorf("index %d was %s, is %s", i, name, d.Name)
		}
	}
}

func TestCvarScopes(t *testing.T) {
	initT(t)
	for _, c := range []struct {
		v     cvar.Int
		scope Scope
		err   error
	}{
		{testConst, ScopeConstant, ErrCvarSetNever},
		{testReadonly, ScopeReadonly, ErrCvarSetNever},
		{testLocal, ScopeLocal, nil},
		{testGroup, ScopeGroupEq, nil}, // the MPI environment is not running
		{testAll, ScopeAllEq, nil},
	} {
		h := cvarHandle(t, c.v.Name())
		if got := h.Desc().Scope; got != c.scope {
			t.Errorf("%s: scope %v, want %v", c.v.Name(), got, c.scope)
		}
		old := c.v.Get()
		err := h.Write(int64(42))
		if !errors.Is(err, c.err) || err == nil && c.err != nil {
			t.Errorf("%s: Write = %v, want %v", c.v.Name(), err, c.err)
		}
		want := old
		if c.err == nil {
			want = 42
		}
		if got, _ := h.Read(); got != want || c.v.Get() != want {
			t.Errorf("%s: Read = %v, registry %d; want %d", c.v.Name(), got, c.v.Get(), want)
		}
		if c.err == nil {
			h.Write(old)
		}
	}
}

func TestCvarTypes(t *testing.T) {
	initT(t)
	for _, c := range []struct {
		name           string
		dt             Datatype
		def, set       any
		wrongType, bad any
	}{
		{"mpit_test_local", TypeCount, int64(5), int64(9), "9", int64(101)},
		{"mpit_test_uint", TypeUnsignedLongLong, uint64(7), uint64(8), 1.5, -1},
		{"mpit_test_float", TypeDouble, 0.5, 0.25, 1, nil},
		{"mpit_test_bool", TypeInt, 0, 1, true, 2},
		{"mpit_test_string", TypeChar, "x", "y", 1, nil},
		{"mpit_test_duration", TypeCount, int64(time.Millisecond), int64(250 * time.Microsecond), "1s", nil},
		{"mpit_test_enum", TypeInt, 1, 2, "c", 3},
	} {
		h := cvarHandle(t, c.name)
		if dt := h.Desc().Datatype; dt != c.dt {
			t.Errorf("%s: datatype %v, want %v", c.name, dt, c.dt)
		}
		if got, err := h.Read(); err != nil || got != c.def {
			t.Errorf("%s: Read = %#v, %v; want %#v", c.name, got, err, c.def)
		}
		if err := h.Write(c.set); err != nil {
			t.Errorf("%s: Write(%#v) = %v", c.name, c.set, err)
		}
		if got, _ := h.Read(); got != c.set {
			t.Errorf("%s: Read after Write = %#v, want %#v", c.name, got, c.set)
		}
		for _, x := range []any{c.wrongType, c.bad} {
			if x == nil {
				continue
			}
			if err := h.Write(x); !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: Write(%#v) = %v, want ErrInvalid", c.name, x, err)
			}
			if got, _ := h.Read(); got != c.set {
				t.Errorf("%s: a refused Write changed the value to %#v", c.name, got)
			}
		}
		if err := h.Write(c.def); err != nil {
			t.Errorf("%s: restoring the default: %v", c.name, err)
		}
	}
	if testEnum.Get() != "b" || testDuration.Get() != time.Millisecond {
		t.Errorf("registry values after restoring: %s, %v", testEnum.Get(), testDuration.Get())
	}
}

// comm stands for a communicator, an MPI object of the mpi package.
type comm struct{}

func (comm) MPITBind() Bind { return BindComm }

func (comm) MPITKey() (pvar.Key, bool) { return pvar.Key{Owner: testOwner}, true }

var testOwner = pvar.NewOwner()

func TestCvarHandles(t *testing.T) {
	initT(t)
	i, _ := CvarIndex(testLocal.Name())
	h, n, err := CvarHandleAlloc(i, comm{}) // ignored: the variable is BindNoObject
	if err != nil || n != 1 {
		t.Fatalf("CvarHandleAlloc with an object for an unbound variable = %d, %v", n, err)
	}
	h2, _, _ := CvarHandleAlloc(i, nil)
	if err := h.Free(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Read(); !errors.Is(err, ErrInvalidHandle) {
		t.Errorf("Read of a freed handle = %v, want ErrInvalidHandle", err)
	}
	if err := h.Write(int64(1)); !errors.Is(err, ErrInvalidHandle) {
		t.Errorf("Write of a freed handle = %v, want ErrInvalidHandle", err)
	}
	if err := h.Free(); !errors.Is(err, ErrInvalidHandle) {
		t.Errorf("second Free = %v, want ErrInvalidHandle", err)
	}
	if _, err := h2.Read(); err != nil {
		t.Errorf("another handle on the variable after a Free: %v", err)
	}
	h2.Free()
	var null *CvarHandle
	if _, err := null.Read(); !errors.Is(err, ErrInvalidHandle) {
		t.Errorf("Read of a nil handle = %v, want ErrInvalidHandle", err)
	}
}

func TestEnum(t *testing.T) {
	initT(t)
	h := cvarHandle(t, testEnum.Name())
	e := h.Desc().Enum
	name, n, err := e.Info()
	if err != nil || name != "mpit_test_enum" || n != 3 {
		t.Fatalf("Info = %q, %d, %v", name, n, err)
	}
	for i, want := range []string{"a", "b", "c"} {
		if v, s, err := e.Item(i); err != nil || v != i || s != want {
			t.Errorf("Item(%d) = %d, %q, %v; want %d, %q", i, v, s, err, i, want)
		}
	}
	for _, i := range []int{-1, 3} {
		if _, _, err := e.Item(i); !errors.Is(err, ErrInvalidItem) {
			t.Errorf("Item(%d) = %v, want ErrInvalidItem", i, err)
		}
	}
	if d := cvarHandle(t, testLocal.Name()).Desc(); d.Enum != nil {
		t.Errorf("an int has enumeration %v", d.Enum)
	}
	var null *Enum
	if _, _, err := null.Info(); !errors.Is(err, ErrInvalidIndex) {
		t.Errorf("Info of MPI_T_ENUM_NULL = %v, want ErrInvalidIndex", err)
	}
}
