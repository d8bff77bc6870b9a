package rings

import "github.com/tachyon-hpc/tachyon/internal/procid"

// selfID returns this process's pid and start time (0 where unknown).
func selfID() (int, uint64) {
	pid, start, _ := procid.Self()
	return pid, start
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
	return procid.Alive(pid, start)
}
