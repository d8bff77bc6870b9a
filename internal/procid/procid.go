// Package procid tells whether a process named in shared memory still
// runs: a pid alone may name another process once the first has gone, so
// a process is named by its pid and its start time (Linux's /proc), and a
// reader in another pid namespace can tell that the pid means nothing to
// it.
package procid

import (
	"os"
	"sync"
)

// Self returns this process's pid, its start time and the inode of its
// pid namespace, 0 for what the system does not say. None changes while
// the process lives: it looks once.
func Self() (pid int, start, pidNS uint64) {
	s := self()
	return s.pid, s.start, s.pidNS
}

var self = sync.OnceValue(func() (s struct {
	pid          int
	start, pidNS uint64
}) {
	s.pid = os.Getpid()
	s.start, _, _ = Start(s.pid)
	s.pidNS = pidNamespace()
	return s
})
