package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestProfileInlining checks the inlining that bench/default.pgo gives
// the message loops and that their instruction counts rest on
// (docs/bench.md). Go looks up a hot call inside a call it has put in
// line by the inner call's line less the outer function's first line
// (golang/go#69046), so some of it holds only while two lines in two
// files stay aligned; an edit that moves one of them loses it without a
// word but for this test.
func TestProfileInlining(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the bench with -gcflags=-m")
	}
	// The bench's package directory: go build uses its default.pgo.
	cmd := exec.Command(gobin, "build", "-o", filepath.Join(t.TempDir(), "bench"),
		"-gcflags=github.com/tachyon-hpc/tachyon/...=-m", ".")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go build -gcflags=-m: %v\n%s", err, out)
	}
	inlined := parseInlining(string(out))

	for _, c := range []struct {
		file, fn, callee, why string
	}{
		{"../mpi/p2p.go", "Isend", "rings.(*RecordWriter).TryWriteWords",
			"the send's ring write in line, the one call left the assembly that publishes it: " +
				"engine/send.go must keep IsendNow's call to TryWriteWords on the same line as Isend's call to IsendNow in mpi/p2p.go"},
		{"../mpi/p2p.go", "Isend", "engine.(*Endpoint).IsendNow", "the engine's send in the facade's"},
		{"../mpi/p2p.go", "Isend", "engine.(*recordLink).setStream", "the stream's check (within Go's budget of 80 without a profile)"},
		{"../mpi/p2p.go", "Irecv", "engine.(*Endpoint).Irecv", "the engine's receive in the facade's"},
		{"../engine/recv.go", "pollShort", "rings.(*RecordReader).NextReady", "the ring reads in the poll's loop"},
	} {
		first, last := funcLines(t, c.file, c.fn)
		found := false
		for _, in := range inlined[filepath.Clean(c.file)] {
			if in.callee == c.callee && in.line >= first && in.line <= last {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: %s not inlined into %s (lines %d-%d): %s", c.file, c.callee, c.fn, first, last, c.why)
		}
	}
}

type inlining struct {
	line   int
	callee string
}

var inlineLine = regexp.MustCompile(`^(\S+\.go):(\d+):\d+: inlining call to (\S+)$`)

// parseInlining returns the inlining decisions of -gcflags=-m output by
// the file of the call, as the output names it (relative to the bench's
// directory), cleaned.
func parseInlining(out string) map[string][]inlining {
	m := make(map[string][]inlining)
	for _, l := range strings.Split(out, "\n") {
		if s := inlineLine.FindStringSubmatch(l); s != nil {
			n, _ := strconv.Atoi(s[2])
			f := filepath.Clean(s[1])
			m[f] = append(m[f], inlining{n, s[3]})
		}
	}
	return m
}

// funcLines returns the first and last lines of the function or method
// name declared in file.
func funcLines(t *testing.T, file, name string) (int, int) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == name {
			return fset.Position(fd.Pos()).Line, fset.Position(fd.End()).Line
		}
	}
	t.Fatalf("%s: no function %s", file, name)
	return 0, 0
}
