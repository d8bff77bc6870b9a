package registry

import (
	"slices"
	"sync"
	"testing"
)

// TestRegistry: one variable a name, listed sorted by name, safe from
// goroutines registering at once.
func TestRegistry(t *testing.T) {
	var r Registry[int]
	if _, ok := r.Lookup("a"); ok || len(r.All()) != 0 {
		t.Fatal("a zero registry is not empty")
	}
	var wg sync.WaitGroup
	for i, n := range []string{"c", "a", "b", "d"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !r.Add(n, i) {
				t.Errorf("Add(%q) refused", n)
			}
		}()
	}
	wg.Wait()
	if r.Add("a", 9) {
		t.Fatal("a name registered twice")
	}
	if v, ok := r.Lookup("a"); !ok || v != 1 {
		t.Fatalf("Lookup(a) = %v, %v", v, ok)
	}
	if got := r.All(); !slices.Equal(got, []int{1, 2, 0, 3}) {
		t.Fatalf("All() = %v, want the values of a, b, c, d", got)
	}
}

func TestValidName(t *testing.T) {
	for s, want := range map[string]bool{
		"engine_eager_limit": true, "a": true, "x9_": true,
		"": false, "9a": false, "_a": false, "Engine": false, "a-b": false, "a.b": false,
	} {
		if ValidName(s) != want {
			t.Errorf("ValidName(%q) = %v", s, !want)
		}
	}
}
