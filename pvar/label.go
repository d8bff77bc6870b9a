package pvar

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
)

// Labels tell owners apart for the tools that show values per owner: a
// layer above the engine labels the owner of each rank it makes (package
// mpi: its session's name and its peer), and a metrics exporter reads
// the labeled owners (Labeled) and each variable's value for each of
// them (Var.ReadSplit). Labels are for reads only: nothing on a message
// path looks at them.

// Label is one name and value an Owner carries (SetLabels).
type Label struct {
	Name  string // a variable name: lower-case letters, digits, '_'
	Value string // not empty
}

// labeled lists the owners that carry labels, in the order they were
// labeled.
var labeled struct {
	mu     sync.Mutex
	owners []*Owner
}

// SetLabels labels o with labels, a name and value each (replacing any
// it had), so that Labeled lists it until Unlabel. Names are lower-case
// letters, digits and '_', starting with a letter (as variable names, so
// that every exporter takes them); values are not empty. It returns an
// error and changes nothing otherwise.
func (o *Owner) SetLabels(labels map[string]string) error {
	if o == nil {
		return errors.New("pvar: labels for a nil owner")
	}
	if len(labels) == 0 {
		return errors.New("pvar: no labels (Unlabel removes them)")
	}
	ls := make([]Label, 0, len(labels))
	for _, name := range slices.Sorted(maps.Keys(labels)) {
		if !validLabel(name) {
			return fmt.Errorf("pvar: label name %q: want lower-case letters, digits and '_', starting with a letter", name)
		}
		if labels[name] == "" {
			return fmt.Errorf("pvar: label %s has an empty value", name)
		}
		ls = append(ls, Label{Name: name, Value: labels[name]})
	}
	labeled.mu.Lock()
	defer labeled.mu.Unlock()
	if o.labels == nil {
		labeled.owners = append(labeled.owners, o)
	}
	o.labels = ls
	return nil
}

// validLabel reports whether s may name a label: a variable name.
func validLabel(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	return strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_')
	}) < 0
}

// Labels returns o's labels sorted by name, nil if it has none.
func (o *Owner) Labels() []Label {
	labeled.mu.Lock()
	defer labeled.mu.Unlock()
	return slices.Clone(o.labels)
}

// Unlabel removes o's labels: Labeled no longer lists it. What o counted
// stays in the process-wide values, as ever. Unlabeling an owner without
// labels does nothing.
func (o *Owner) Unlabel() {
	labeled.mu.Lock()
	defer labeled.mu.Unlock()
	if o.labels == nil {
		return
	}
	o.labels = nil
	if i := slices.Index(labeled.owners, o); i >= 0 {
		labeled.owners = slices.Delete(labeled.owners, i, i+1)
	}
}

// LabeledOwner is an owner and the labels it had when Labeled listed it.
type LabeledOwner struct {
	Owner  *Owner
	Labels []Label // sorted by name
}

// Labeled returns the owners that carry labels now, with their labels,
// in the order they were labeled: one consistent listing, which the
// caller owns.
func Labeled() []LabeledOwner {
	labeled.mu.Lock()
	defer labeled.mu.Unlock()
	out := make([]LabeledOwner, len(labeled.owners))
	for i, o := range labeled.owners {
		out[i] = LabeledOwner{Owner: o, Labels: o.labels} // never changed in place: SetLabels replaces the slice
	}
	return out
}
