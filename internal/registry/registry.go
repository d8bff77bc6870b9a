// Package registry holds named variables for cvar and pvar: one name each,
// names of the one form both allow, and listings sorted by name. It is
// safe for concurrent use.
package registry

import (
	"slices"
	"strings"
	"sync"
)

// Registry maps names to variables of type V. The zero value is empty and
// ready to use.
type Registry[V any] struct {
	mu   sync.Mutex
	vars map[string]V
}

// Add registers v under name and reports whether it did: false if the
// name is taken (the caller's error: a variable registered twice).
func (r *Registry[V]) Add(name string, v V) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.vars[name]; dup {
		return false
	}
	if r.vars == nil {
		r.vars = make(map[string]V)
	}
	r.vars[name] = v
	return true
}

// Lookup returns the variable registered under name.
func (r *Registry[V]) Lookup(name string) (V, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.vars[name]
	return v, ok
}

// All returns every registered variable, sorted by name.
func (r *Registry[V]) All() []V {
	r.mu.Lock()
	names := make([]string, 0, len(r.vars))
	for n := range r.vars {
		names = append(names, n)
	}
	slices.SortFunc(names, strings.Compare)
	all := make([]V, len(names))
	for i, n := range names {
		all[i] = r.vars[n]
	}
	r.mu.Unlock()
	return all
}

// ValidName reports whether s is a variable name: a lower-case letter,
// then lower-case letters, digits and underscores (so that TACHYON_ and
// the name upper-cased is an environment variable).
func ValidName(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
