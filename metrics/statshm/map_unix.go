//go:build unix

package statshm

import (
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps size bytes of f, shared: writable for the publisher,
// read-only for a reader.
func mapFile(f *os.File, size int, writable bool) ([]byte, error) {
	prot := unix.PROT_READ
	if writable {
		prot |= unix.PROT_WRITE
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, size, prot, unix.MAP_SHARED)
	if err != nil {
		return nil, &os.PathError{Op: "mmap", Path: f.Name(), Err: err}
	}
	return mem, nil
}

func unmap(mem []byte) error { return unix.Munmap(mem) }
