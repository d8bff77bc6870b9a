//go:build !unix

package statshm

import (
	"errors"
	"os"
)

var errNoMmap = errors.New("statshm: shared-memory files need a Unix system (mmap)")

func mapFile(f *os.File, size int, writable bool) ([]byte, error) { return nil, errNoMmap }

func unmap(mem []byte) error { return errNoMmap }
