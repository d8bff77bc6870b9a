package rings

import (
	"os"
	"sync"
)

var self struct {
	once  sync.Once
	pid   int
	start uint64
}

// selfID returns this process's pid and start time (0 where unknown).
func selfID() (int, uint64) {
	self.once.Do(func() {
		self.pid = os.Getpid()
		self.start, _ = processStart(self.pid)
	})
	return self.pid, self.start
}

// peerAlive reports whether the process pid, started at start (0 if
// unknown), is still running. A reused pid, a zombie and a missing process
// all count as dead.
func peerAlive(pid int, start uint64) bool {
	if !peerCheck.Get() {
		return true
	}
	if me, _ := selfID(); pid == me {
		return true
	}
	return processAlive(pid, start)
}
