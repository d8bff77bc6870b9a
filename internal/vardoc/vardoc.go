// Package vardoc generates the list of Tachyon's control and performance
// variables in docs/tools.md from the registries themselves (packages cvar
// and pvar), so that the documentation names exactly the variables a
// program built from this module has, with their defaults and help as
// registered. It is for this module's documentation only.
//
// The list sits in docs/tools.md between the lines Begin and End; Rewrite
// replaces what lies between them and leaves the rest of the page as it
// is. Command regenerates the page:
//
//	go run ./internal/vardoc/gen
//
// and the package's test fails, naming that command, when the page is not
// what it would write. The package imports every package of the module
// that registers variables (the facade mpi brings engine, nic, progress
// and rings), so the registries are complete once it is initialised; a
// test checks that no registering package is left out.
//
// The output depends only on the registered metadata (defaults, not
// current values, so TACHYON_* settings change nothing) and is sorted, so
// two runs on one platform write the same bytes. Some variables register
// on Linux only (nic's AF_XDP socket statistics): the page is generated
// on Linux.
package vardoc

//go:generate go run ./gen

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/pvar"

	// The packages that register variables: mpi imports engine, nic,
	// progress and rings, and registers its own; mpi1 registers its own.
	_ "github.com/tachyon-hpc/tachyon/mpi"
	_ "github.com/tachyon-hpc/tachyon/mpi/mpi1"
)

// Command is the command, run from the module's root, that rewrites
// docs/tools.md's variable list.
const Command = "go run ./internal/vardoc/gen"

// Doc is the page holding the list, relative to the module's root.
const Doc = "docs/tools.md"

// The marker lines around the generated list. Each must be a line of its
// own, Begin before End, once each in the page.
const (
	Begin = "<!-- BEGIN GENERATED VARIABLES: " + Command + " -->"
	End   = "<!-- END GENERATED VARIABLES -->"
)

// Errors of Rewrite.
var (
	// ErrMarkers reports a page whose marker lines are missing, repeated
	// or out of order.
	ErrMarkers = errors.New("vardoc: the page needs the marker lines " + Begin + " and " + End + ", once each, in that order")
)

// Rewrite returns page with the lines between Begin and End replaced by
// List's output. It returns an error matching ErrMarkers, and no page,
// when the markers are not each a line of their own once, in order.
func Rewrite(page []byte) ([]byte, error) {
	b, err := markerLine(page, Begin)
	if err != nil {
		return nil, err
	}
	e, err := markerLine(page, End)
	if err != nil {
		return nil, err
	}
	if e < b {
		return nil, fmt.Errorf("%w: %s comes before %s", ErrMarkers, End, Begin)
	}
	startList := b + len(Begin) + 1 // after Begin's newline
	var out bytes.Buffer
	out.Write(page[:startList])
	out.WriteString("\n")
	out.Write(List())
	out.WriteString("\n")
	out.Write(page[e:])
	return out.Bytes(), nil
}

// markerLine returns the offset of the one line of page that is marker,
// and which ends with a newline.
func markerLine(page []byte, marker string) (int, error) {
	at := -1
	for off := 0; off < len(page); {
		line := page[off:]
		n := bytes.IndexByte(line, '\n')
		if n < 0 {
			if string(bytes.TrimRight(line, "\r")) == marker {
				return 0, fmt.Errorf("%w: %s ends the page without a newline", ErrMarkers, marker)
			}
			break
		}
		if string(bytes.TrimRight(line[:n], "\r")) == marker {
			if at >= 0 {
				return 0, fmt.Errorf("%w: %s appears twice", ErrMarkers, marker)
			}
			at = off
		}
		off += n + 1
	}
	if at < 0 {
		return 0, fmt.Errorf("%w: %s is missing", ErrMarkers, marker)
	}
	return at, nil
}

// List returns the Markdown tables of every registered variable: the
// control variables by category (cvar's order: category, then name), then
// the performance variables by category (the part of the name before its
// first underscore), each sorted by name.
func List() []byte {
	var b bytes.Buffer
	cvars := cvar.All()
	fmt.Fprintf(&b, "### Control variables (%d)\n", len(cvars))
	b.WriteString("\nEach is set for a process by the environment variable in its row, read when its package is initialised. Those of scope local may also be written at any time through MPI_T (package mpit), those of scope group or all while MPI is not running; constant and readonly ones never.\n")
	category := ""
	for i, v := range cvars {
		if i == 0 || v.Category() != category {
			category = v.Category()
			fmt.Fprintf(&b, "\n#### %s\n\n", cell(category))
			b.WriteString("| Name | Type | Default | Scope | Environment | Description |\n")
			b.WriteString("|---|---|---|---|---|---|\n")
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | `%s` | %s |\n",
			v.Name(), cvarType(v), cvarDefault(v), v.Scope(), v.Env(), cell(v.Doc()))
	}
	pvars := groupPvars(pvar.All())
	n := 0
	for _, g := range pvars {
		n += len(g)
	}
	fmt.Fprintf(&b, "\n### Performance variables (%d)\n", n)
	b.WriteString("\nValues are the process's, over all its ranks; those bound to communicators are kept per rank too, which MPI_T reads through a communicator, tachyonstat per session and metrics/prom per session and peer. metrics/expvars reads the process's; timers count clock ticks there, but seconds in Prometheus.\n")
	for _, g := range pvars {
		fmt.Fprintf(&b, "\n#### %s\n\n", cell(g[0].Category()))
		b.WriteString("| Name | Class | Unit | Description |\n")
		b.WriteString("|---|---|---|---|\n")
		for _, v := range g {
			unit := v.Unit()
			if unit == "" {
				unit = "-"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", v.Name(), v.Class(), cell(unit), cell(v.Doc()))
		}
	}
	return b.Bytes()
}

// groupPvars splits vars, sorted by name, into runs of one category each,
// in the order of the categories' names.
func groupPvars(vars []*pvar.Var) [][]*pvar.Var {
	var groups [][]*pvar.Var
	index := map[string]int{}
	for _, v := range vars {
		i, ok := index[v.Category()]
		if !ok {
			i = len(groups)
			index[v.Category()] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], v)
	}
	// The name order need not be the categories' ("ab_x" < "a_x"), so the
	// groups are sorted by category too.
	slices.SortStableFunc(groups, func(a, b []*pvar.Var) int {
		return strings.Compare(a[0].Category(), b[0].Category())
	})
	return groups
}

// cvarType describes a control variable's type: the choices of an
// enumeration, the bounds of a ranged number.
func cvarType(v *cvar.Var) string {
	t := v.Type().String()
	switch {
	case v.Type() == cvar.TypeEnum:
		return t + ": " + cell(strings.Join(v.Choices(), ", "))
	case v.Type() == cvar.TypeDuration:
		if lo, hi, ok := v.Range(); ok {
			return fmt.Sprintf("%s [%v, %v]", t, time.Duration(lo), time.Duration(hi))
		}
	default:
		if lo, hi, ok := v.Range(); ok {
			return fmt.Sprintf("%s [%d, %d]", t, lo, hi)
		}
	}
	return t
}

// cvarDefault is a control variable's default, in code, with its unit.
func cvarDefault(v *cvar.Var) string {
	d := v.Default()
	if d == "" {
		return "(empty)"
	}
	s := "`" + strings.ReplaceAll(d, "`", "'") + "`"
	if u := v.Unit(); u != "" {
		s += " " + cell(u)
	}
	return s
}

// cell makes s safe in a Markdown table cell: one line, no column
// separators, no HTML.
func cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	r := strings.NewReplacer("|", `\|`, "&", "&amp;", "<", "&lt;", ">", "&gt;")
	return r.Replace(s)
}
