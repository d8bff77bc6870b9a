package statshm

import "github.com/tachyon-hpc/tachyon/internal/procid"

// selfIdentity returns this process's start time and the inode of its pid
// namespace, 0 for what the system does not say: what a file records of
// its writer.
func selfIdentity() (start, pidNS uint64) {
	_, start, pidNS = procid.Self()
	return start, pidNS
}

// gone reports whether the process that wrote a file is certainly gone:
// no process pid exists, or it is a zombie, or pid now names a process
// that started at another time. A writer in another pid namespace (its
// pid means nothing here), or where /proc says nothing, is never gone.
func gone(pid int, start, pidNS uint64) bool {
	if pid <= 0 {
		return false // not a writer this reader can judge
	}
	if _, _, ns := procid.Self(); pidNS != 0 && ns != 0 && ns != pidNS {
		return false
	}
	return !procid.Alive(pid, start)
}
