// Command gen rewrites the variable list of docs/tools.md from the
// registries (see package vardoc). Run it from anywhere in the module:
//
//	go run ./internal/vardoc/gen
//
// It finds the module's root from the working directory (the nearest
// directory above it with a go.mod), or takes the page's path as its one
// argument.
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tachyon-hpc/tachyon/internal/vardoc"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "vardoc:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	var path string
	switch len(args) {
	case 0:
		root, err := moduleRoot()
		if err != nil {
			return err
		}
		path = filepath.Join(root, filepath.FromSlash(vardoc.Doc))
	case 1:
		path = args[0]
	default:
		return errors.New("usage: go run ./internal/vardoc/gen [page]")
	}
	page, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := vardoc.Rewrite(page)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if string(out) == string(page) {
		return nil
	}
	return os.WriteFile(path, out, 0o644)
}

// moduleRoot returns the nearest directory at or above the working
// directory that holds a go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("no go.mod in the working directory or above it: run from the module, or name the page")
		}
		dir = up
	}
}
