package pmi

import "golang.org/x/sys/unix"

// socketpairFDs returns the descriptors of a connected pair of Unix
// stream sockets, both close-on-exec from creation (SOCK_CLOEXEC), so
// that no program started meanwhile inherits them.
func socketpairFDs() ([2]int, error) {
	return unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
}
