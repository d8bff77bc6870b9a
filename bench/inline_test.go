package main

import (
	"github.com/tachyon-hpc/tachyon/internal/testskip"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// TestProfileInlining checks the inlining that bench/default.pgo gives
// the message loops and that their instruction counts rest on
// (docs/bench.md), as go build -gcflags=-m reports it. It finds each
// function by name in the files of its package, wherever it is declared.
//
// Every call it checks is a call the profile names in the function that
// makes it. The profile does not find a call inside a call put in line
// (golang/go#69046): the functions in the middle of the message path
// are kept out of line (go:noinline) so that their calls stay their own,
// and the test checks that too.
func TestProfileInlining(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		testskip.Skip(t, testskip.NoGoCommand, "no go command to build the bench with -gcflags=-m")
	}
	// The bench's package directory: go build uses its default.pgo, or
	// the profile BENCH_PGO names (bench/pgo.sh OUT checks its own).
	pgo := "auto"
	if p := os.Getenv("BENCH_PGO"); p != "" {
		pgo = p
	}
	cmd := exec.Command(gobin, "build", "-o", filepath.Join(t.TempDir(), "bench"), "-pgo="+pgo,
		"-gcflags=github.com/tachyon-hpc/tachyon/...=-m", ".")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go build -gcflags=-m: %v\n%s", err, out)
	}
	ix := newFuncIndex()
	inlined, err := ix.inlinedInto(string(out))
	if err != nil {
		t.Fatal(err)
	}

	const remake = "if the code under the profile moved, remake it with bench/pgo.sh (docs/bench.md)"
	for _, c := range []struct {
		fn, callee, why string
	}{
		{"main.messageRate", "mpi.(*Comm).Isend",
			"the facade's send in the rate loop, which then calls IsendNow"},
		{"engine.(*Endpoint).IsendNow", "rings.(*RecordWriter).TryWriteWords",
			"the send's ring write in line, the one call left the assembly that publishes it"},
		{"engine.(*Endpoint).IsendNow", "engine.(*recordLink).setStream",
			"the stream's check (within Go's budget of 80 without a profile)"},
		{"mpi.(*Comm).pIrecv", "engine.(*Endpoint).Irecv", "the engine's receive in the facade's"},
		{"mpi.(*Comm).pRecv", "engine.(*Endpoint).Recv",
			"the latency loop's blocking receive in the facade's (a profile without it gave the 8 B latency of no profile)"},
		{"engine.(*Endpoint).pollShort", "rings.(*RecordReader).NextReady", "the ring reads in the poll's loop"},
	} {
		if !ix.has(c.fn) {
			t.Errorf("no function %s in the packages the build reported on", c.fn)
			continue
		}
		if !inlined[c.fn][c.callee] {
			t.Errorf("%s not inlined into %s: %s; %s", c.callee, c.fn, c.why, remake)
		}
	}
	// Put in line in a caller, the calls these put in line would be calls
	// inside a call put in line, which the profile does not find.
	for _, fn := range []string{"main.messageRate", "engine.(*Endpoint).IsendNow", "mpi.(*Comm).pIrecv", "engine.(*Endpoint).pollShort"} {
		for caller, callees := range inlined {
			if callees[fn] {
				t.Errorf("%s inlined into %s: the calls it puts in line would be calls there (golang/go#69046); keep it go:noinline", fn, caller)
			}
		}
	}
}

var inlineLine = regexp.MustCompile(`^(\S+\.go):(\d+):\d+: inlining call to (\S+)$`)

// funcIndex finds the function declared around a line of a file, by the
// name -gcflags=-m gives it: package.Func, package.(*T).Method or
// package.T.Method.
type funcIndex struct {
	files map[string][]funcSpan // by absolute path
	names map[string]bool       // every function of the packages read
	dirs  map[string]bool       // the package directories read
	root  string                // the module's directory, once resolve found it
}

type funcSpan struct {
	pkg, name   string // name qualified by pkg, as the compiler prints it
	first, last int
}

func newFuncIndex() *funcIndex {
	return &funcIndex{files: map[string][]funcSpan{}, names: map[string]bool{}, dirs: map[string]bool{}}
}

func (ix *funcIndex) has(name string) bool { return ix.names[name] }

// inlinedInto returns, for each function, the calls -gcflags=-m output
// out reports put in line in it, reading every Go file of each package
// it names.
func (ix *funcIndex) inlinedInto(out string) (map[string]map[string]bool, error) {
	m := map[string]map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		s := inlineLine.FindStringSubmatch(l)
		if s == nil {
			continue
		}
		file := ix.resolve(s[1])
		if file == "" {
			continue // the standard library's, or generated
		}
		if err := ix.readDir(filepath.Dir(file)); err != nil {
			return nil, err
		}
		line, _ := strconv.Atoi(s[2])
		if fn := ix.at(file, line); fn.name != "" {
			if m[fn.name] == nil {
				m[fn.name] = map[string]bool{}
			}
			// A callee of the caller's own package comes unqualified.
			callee := s[3]
			if own := fn.pkg + "." + callee; ix.names[own] {
				callee = own
			}
			m[fn.name][callee] = true
		}
	}
	return m, nil
}

// resolve returns the absolute path of a file of the module that
// -gcflags=-m output names: relative to the bench's directory or, for
// some packages, to the module's root; "" for a file outside the module.
func (ix *funcIndex) resolve(name string) string {
	if ix.root == "" {
		dir, err := filepath.Abs(".")
		if err != nil {
			return ""
		}
		for dir != filepath.Dir(dir) {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				break
			}
			dir = filepath.Dir(dir)
		}
		ix.root = dir
	}
	var tries []string
	if filepath.IsAbs(name) {
		tries = []string{name}
	} else {
		here, _ := filepath.Abs(name)
		tries = []string{here, filepath.Join(ix.root, name)}
	}
	for _, p := range tries {
		if rel, err := filepath.Rel(ix.root, p); err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// at returns the function of file whose declaration holds line, or a
// zero funcSpan.
func (ix *funcIndex) at(file string, line int) funcSpan {
	spans := ix.files[file]
	i := sort.Search(len(spans), func(i int) bool { return spans[i].last >= line })
	if i < len(spans) && spans[i].first <= line {
		return spans[i]
	}
	return funcSpan{}
}

// readDir indexes the functions of every Go file in dir, once.
func (ix *funcIndex) readDir(dir string) error {
	if ix.dirs[dir] {
		return nil
	}
	ix.dirs[dir] = true
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		var spans []funcSpan
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			name := f.Name.Name + "." + funcName(fd)
			ix.names[name] = true
			spans = append(spans, funcSpan{f.Name.Name, name, fset.Position(fd.Pos()).Line, fset.Position(fd.End()).Line})
		}
		ix.files[path] = spans // in source order: sorted by line
	}
	return nil
}

// funcName returns fd's name as the compiler prints it: F, (*T).M or T.M.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	star := false
	if s, ok := typ.(*ast.StarExpr); ok {
		typ, star = s.X, true
	}
	switch x := typ.(type) { // a generic receiver's parameters dropped
	case *ast.IndexExpr:
		typ = x.X
	case *ast.IndexListExpr:
		typ = x.X
	}
	id, _ := typ.(*ast.Ident)
	if id == nil {
		return fd.Name.Name
	}
	if star {
		return "(*" + id.Name + ")." + fd.Name.Name
	}
	return id.Name + "." + fd.Name.Name
}
