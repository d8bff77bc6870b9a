package vardoc

import (
	"bytes"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// root is the module's root, from this package's directory.
var root = filepath.Join("..", "..")

// TestDocCurrent: docs/tools.md's variable list is what Command writes.
func TestDocCurrent(t *testing.T) {
	if runtime.GOOS != "linux" {
		testskip.Skip(t, testskip.NotLinux, "the variable list is generated on Linux, where every variable registers")
	}
	path := filepath.Join(root, filepath.FromSlash(Doc))
	page, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Rewrite(page)
	if err != nil {
		t.Fatalf("%s: %v", Doc, err)
	}
	if !bytes.Equal(page, want) {
		t.Errorf("%s's variable list is out of date: run %q from the module's root and commit the result\n%s",
			Doc, Command, firstDifference(page, want))
	}
}

// firstDifference describes the first line where got and want differ.
func firstDifference(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < max(len(g), len(w)); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return "first difference at line " + strconv.Itoa(i+1) + ":\n  page: " + gl + "\n  want: " + wl
		}
	}
	return ""
}

// TestListComplete: every registered variable has its row, once, and the
// output is the same each time.
func TestListComplete(t *testing.T) {
	list := string(List())
	if again := string(List()); again != list {
		t.Fatal("two Lists differ")
	}
	rows := map[string]int{}
	for _, line := range strings.Split(list, "\n") {
		if name, ok := strings.CutPrefix(line, "| `"); ok {
			name, _, _ = strings.Cut(name, "`")
			rows[name]++
		}
	}
	var names []string
	for _, v := range cvar.All() {
		names = append(names, v.Name())
		if !strings.Contains(list, "`"+v.Env()+"`") {
			t.Errorf("control variable %s: no %s in its row", v.Name(), v.Env())
		}
	}
	for _, v := range pvar.All() {
		names = append(names, v.Name())
	}
	if len(names) == 0 {
		t.Fatal("no variables registered")
	}
	for _, n := range names {
		if rows[n] != 1 {
			t.Errorf("variable %s has %d rows, want 1", n, rows[n])
		}
	}
	if len(rows) != len(names) {
		t.Errorf("%d rows for %d variables", len(rows), len(names))
	}
}

// TestCell: text in a cell cannot end the row or the table, or be read as
// HTML.
func TestCell(t *testing.T) {
	for in, want := range map[string]string{
		"a | b":             `a \| b`,
		"line\none\r\n two": "line one two",
		"/proc/<pid>/stat":  "/proc/&lt;pid&gt;/stat",
		"R&D":               "R&amp;D",
	} {
		if got := cell(in); got != want {
			t.Errorf("cell(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRewrite: the list replaces what lies between the markers, and
// nothing else changes; bad markers are ErrMarkers and never a panic.
func TestRewrite(t *testing.T) {
	page := "# Title\n\nbefore\n" + Begin + "\nstale\nrows\n" + End + "\nafter\n"
	out, err := Rewrite([]byte(page))
	if err != nil {
		t.Fatal(err)
	}
	want := "# Title\n\nbefore\n" + Begin + "\n\n" + string(List()) + "\n" + End + "\nafter\n"
	if string(out) != want {
		t.Errorf("Rewrite:\n%s\nwant:\n%s", out, want)
	}
	again, err := Rewrite(out)
	if err != nil || !bytes.Equal(again, out) {
		t.Errorf("Rewrite of its own output changed it (err %v)", err)
	}
	for name, bad := range map[string]string{
		"empty":          "",
		"no markers":     "# Title\n",
		"no end":         Begin + "\n",
		"no begin":       End + "\n",
		"reversed":       End + "\n" + Begin + "\n",
		"begin twice":    Begin + "\n" + Begin + "\n" + End + "\n",
		"end twice":      Begin + "\n" + End + "\n" + End + "\n",
		"not a line":     "text " + Begin + "\n" + End + "\n",
		"no final break": Begin + "\n" + End,
	} {
		if out, err := Rewrite([]byte(bad)); !errors.Is(err, ErrMarkers) || out != nil {
			t.Errorf("%s: Rewrite = %q, %v; want nil, ErrMarkers", name, out, err)
		}
	}
}

// TestImportsEveryRegisteringPackage: every package of the module that
// registers a variable (calls cvar.New... or pvar.New...) is this
// package's import or an import of one, so that List sees its variables.
func TestImportsEveryRegisteringPackage(t *testing.T) {
	const module = "github.com/tachyon-hpc/tachyon"
	imports := map[string][]string{} // package path -> module packages it imports
	var registering []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "testdata" || d.Name() == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		pkg := module
		if rel != "." {
			pkg += "/" + filepath.ToSlash(rel)
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(p, module+"/") {
				imports[pkg] = append(imports[pkg], p)
			}
		}
		if pkg == module+"/cvar" || pkg == module+"/pvar" {
			return nil
		}
		f, err = parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && (x.Name == "cvar" || x.Name == "pvar") && strings.HasPrefix(sel.Sel.Name, "New") {
				if !slices.Contains(registering, pkg) {
					registering = append(registering, pkg)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(registering) == 0 {
		t.Fatal("found no package that registers variables")
	}
	seen := map[string]bool{}
	var visit func(string)
	visit = func(p string) {
		if seen[p] {
			return
		}
		seen[p] = true
		for _, q := range imports[p] {
			visit(q)
		}
	}
	visit(module + "/internal/vardoc")
	for _, p := range registering {
		if !seen[p] {
			t.Errorf("package %s registers variables but internal/vardoc does not import it (directly or through another): add a blank import to vardoc.go, then run %q", p, Command)
		}
	}
}
