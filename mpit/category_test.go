package mpit

import (
	"errors"
	"slices"
	"testing"

	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/internal/testname"
	"github.com/tachyon-hpc/tachyon/pvar"
)

var testSub = cvar.NewInt("mpit_test_sub", 0, "in a subcategory", cvar.WithCategory("mpit_test.sub"))

// catIndex returns the index of the category named name.
func catIndex(t *testing.T, name string) int {
	t.Helper()
	i, err := CategoryIndex(name)
	if err != nil {
		t.Fatalf("CategoryIndex(%s): %v", name, err)
	}
	return i
}

func TestCategoryTree(t *testing.T) {
	initT(t)
	top, sub := catIndex(t, "mpit_test"), catIndex(t, "mpit_test.sub")
	if cats, _ := CategoryCategories(top); !slices.Contains(cats, sub) {
		t.Errorf("mpit_test's categories %v lack mpit_test.sub (%d)", cats, sub)
	}
	n, _ := CategoryNum()
	for i := range n {
		d, err := CategoryInfo(i)
		if err != nil || d.Name == "" {
			t.Fatalf("CategoryInfo(%d) = %+v, %v", i, d, err)
		}
		if j := catIndex(t, d.Name); j != i {
			t.Errorf("CategoryIndex(%s) = %d, want %d", d.Name, j, i)
		}
		cvars, _ := CategoryCvars(i)
		pvars, _ := CategoryPvars(i)
		cats, _ := CategoryCategories(i)
		if len(cvars) != d.NumCvars || len(pvars) != d.NumPvars || len(cats) != d.NumCategories {
			t.Errorf("%s: info counts %d/%d/%d, lists %d/%d/%d", d.Name,
				d.NumCvars, d.NumPvars, d.NumCategories, len(cvars), len(pvars), len(cats))
		}
		for _, j := range cvars {
			cd, _ := CvarInfo(j)
			if v, _ := cvar.Lookup(cd.Name); v.Category() != d.Name {
				t.Errorf("%s lists control variable %s of category %q", d.Name, cd.Name, v.Category())
			}
		}
		for _, j := range pvars {
			pd, _ := PvarInfo(j)
			if v, _ := pvar.Lookup(pd.Name); v.Category() != d.Name {
				t.Errorf("%s lists performance variable %s of category %q", d.Name, pd.Name, v.Category())
			}
		}
		// No category contains itself, directly or transitively.
		seen := map[int]bool{}
		var walk func(int)
		walk = func(k int) {
			below, _ := CategoryCategories(k)
			for _, b := range below {
				if b == i {
					t.Fatalf("category %s contains itself", d.Name)
				}
				if !seen[b] {
					seen[b] = true
					walk(b)
				}
			}
		}
		walk(i)
	}
	cvars, _ := CategoryCvars(top)
	if i, _ := CvarIndex(testLocal.Name()); !slices.Contains(cvars, i) {
		t.Errorf("mpit_test's control variables %v lack mpit_test_local (%d)", cvars, i)
	}
	pvars, _ := CategoryPvars(catIndex(t, "mpit"))
	if i, _ := PvarIndex(testCounter.Name(), pvar.ClassCounter); !slices.Contains(pvars, i) {
		t.Errorf("mpit's performance variables %v lack mpit_test_counter (%d)", pvars, i)
	}
	if d, _ := CategoryInfo(catIndex(t, "engine")); d.Desc == "" {
		t.Error("the engine category has no description")
	}
	for _, i := range []int{-1, n} {
		if _, err := CategoryInfo(i); !errors.Is(err, ErrInvalidIndex) {
			t.Errorf("CategoryInfo(%d) = %v, want ErrInvalidIndex", i, err)
		}
		if _, err := CategoryCvars(i); !errors.Is(err, ErrInvalidIndex) {
			t.Errorf("CategoryCvars(%d) = %v, want ErrInvalidIndex", i, err)
		}
	}
	if _, err := CategoryIndex("mpit_no_such_category"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("CategoryIndex of an unknown name = %v, want ErrInvalidName", err)
	}
}

func TestCategoryGrowth(t *testing.T) {
	initT(t)
	s0, _ := CategoryChanged()
	if s, _ := CategoryChanged(); s != s0 {
		t.Fatalf("stamp moved from %d to %d with nothing added", s0, s)
	}
	n0, _ := CategoryNum()
	top := catIndex(t, "mpit_test")
	cats0, _ := CategoryCategories(top)
	grownCat := testname.Uniq("mpit_test.grown")
	cvar.NewInt(testname.Uniq("mpit_test_grown"), 0, "added late", cvar.WithCategory(grownCat))
	s1, _ := CategoryChanged()
	if s1 <= s0 {
		t.Fatalf("stamp %d after a new variable and category, was %d", s1, s0)
	}
	if n, _ := CategoryNum(); n != n0+1 {
		t.Fatalf("CategoryNum = %d, want %d", n, n0+1)
	}
	grown := catIndex(t, grownCat)
	cats1, _ := CategoryCategories(top)
	if !slices.Equal(cats1, append(cats0, grown)) {
		t.Errorf("mpit_test's categories went from %v to %v, want the new one appended", cats0, cats1)
	}
	mpitCat := catIndex(t, "mpit")
	pvars0, _ := CategoryPvars(mpitCat)
	pvar.NewCounter(testname.Uniq("mpit_test_grown_counter"), "added late")
	s2, _ := CategoryChanged()
	pvars1, _ := CategoryPvars(mpitCat)
	if s2 <= s1 || len(pvars1) != len(pvars0)+1 || !slices.Equal(pvars1[:len(pvars0)], pvars0) {
		t.Errorf("after a new counter: stamp %d (was %d), pvars %v (were %v)", s2, s1, pvars1, pvars0)
	}
}
