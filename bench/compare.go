package main

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// The comparison of -compare: compare/pingpong.c, bench's suite written
// in C against the MPI API (the same sizes, iterations, warm-up, window
// and acknowledgement), built with each implementation's compiler and run
// on two ranks right after the benchmark. It is part of the bench, so
// -compare needs nothing outside the repository but the implementations
// (Debian: mpich libmpich-dev, openmpi-bin libopenmpi-dev).

//go:embed compare/pingpong.c
var pingpongC []byte

// mpiImpl is an MPI implementation -compare measures.
type mpiImpl struct {
	name, cc, run string
	args          []string // mpiexec's, before -n
	pkgs          string   // the Debian packages that bring cc and run
}

var mpiImpls = []mpiImpl{
	{name: "mpich", cc: "mpicc.mpich", run: "mpiexec.mpich", pkgs: "mpich libmpich-dev"},
	{name: "openmpi", cc: "mpicc.openmpi", run: "mpiexec.openmpi", args: []string{"--oversubscribe"}, pkgs: "openmpi-bin libopenmpi-dev"},
}

// buildProgram writes src as name.c into dir and builds it with impl's
// compiler, returning the binary's path.
func buildProgram(impl mpiImpl, dir, name string, src []byte) (string, error) {
	for _, tool := range []string{impl.cc, impl.run} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", fmt.Errorf("-compare needs %s (Debian: %s): %w", tool, impl.pkgs, err)
		}
	}
	file := filepath.Join(dir, name+".c")
	if err := os.WriteFile(file, src, 0o644); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, name+"_"+impl.name)
	// -w: gcc misreads MPI_STATUSES_IGNORE in MPICH's header as an
	// array of size 0.
	if out, err := exec.Command(impl.cc, "-O2", "-w", "-o", bin, file).CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the comparison with %s: %v\n%s", impl.cc, err, out)
	}
	return bin, nil
}

// runProgram runs bin with args on n ranks under impl's mpiexec over
// shared memory and returns what it printed.
func runProgram(impl mpiImpl, n int, bin string, args ...string) (string, error) {
	argv := append(append(append([]string{}, impl.args...), "-n", strconv.Itoa(n), bin), args...)
	cmd := exec.Command(impl.run, argv...)
	// Open MPI refuses root without these; CI runs as root.
	cmd.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("the comparison under %s: %w", impl.name, err)
	}
	return out.String(), nil
}

// runComparison builds and runs the comparison under each implementation
// over shared memory and returns their results by name (underEach).
func runComparison(max int) (map[string][]Result, error) {
	return underEach("pingpong", pingpongC, 2, parseAnchor, strconv.Itoa(max))
}

// underEach builds src as name.c with each MPI implementation installed,
// runs it on n ranks with args and returns what parse reads from its
// output, by implementation. An implementation that is not installed is
// left out, with a line that says which packages bring it; none
// installed is an error.
func underEach(name string, src []byte, n int, parse func(io.Reader) ([]Result, error), args ...string) (map[string][]Result, error) {
	dir, err := os.MkdirTemp("", "tachyon-bench-"+name+"-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	got := map[string][]Result{}
	var missing []error
	for _, impl := range mpiImpls {
		if _, err := exec.LookPath(impl.cc); err != nil {
			missing = append(missing, fmt.Errorf("%s is not installed (Debian: %s)", impl.name, impl.pkgs))
			fmt.Fprintln(os.Stderr, "bench:", missing[len(missing)-1], "- left out of the comparison")
			continue
		}
		bin, err := buildProgram(impl, dir, name, src)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(os.Stderr, "running %s under %s on %d ranks\n", name, impl.name, n)
		out, err := runProgram(impl, n, bin, args...)
		if err != nil {
			return nil, err
		}
		res, err := parse(strings.NewReader(out))
		if err != nil {
			return nil, err
		}
		got[impl.name] = res
	}
	if len(got) == 0 {
		return nil, fmt.Errorf("-compare: %w", errors.Join(missing...))
	}
	return got, nil
}
