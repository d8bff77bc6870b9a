package statshm

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// processStart returns the start time of process pid in clock ticks since
// boot (field 22 of /proc/PID/stat), its state letter, and an error if
// /proc does not say.
func processStart(pid int) (uint64, byte, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// "pid (comm) S ppid ...": comm may hold spaces and parentheses, so
	// fields count from the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, errors.New("malformed /proc stat")
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 || len(f[0]) != 1 {
		return 0, 0, errors.New("malformed /proc stat")
	}
	start, err := strconv.ParseUint(string(f[19]), 10, 64)
	return start, f[0][0], err
}

// selfIdentity returns this process's start time and the inode of its pid
// namespace, 0 for what /proc does not say. Neither changes while the
// process lives: it looks once.
var selfIdentity = sync.OnceValues(func() (start, pidNS uint64) {
	start, _, _ = processStart(os.Getpid())
	var st syscall.Stat_t
	if syscall.Stat("/proc/self/ns/pid", &st) == nil {
		pidNS = st.Ino
	}
	return start, pidNS
})

// gone reports whether the process that wrote a file is certainly gone:
// no process pid exists, or it is a zombie, or pid now names a process
// that started at another time. A writer in another pid namespace (its
// pid means nothing here) or one /proc says nothing about is never gone.
func gone(pid int, start, pidNS uint64) bool {
	if pid <= 0 {
		return false // not a pid this reader can judge
	}
	if _, ns := selfIdentity(); pidNS != 0 && ns != 0 && ns != pidNS {
		return false
	}
	if err := unix.Kill(pid, 0); err == unix.ESRCH {
		return true
	}
	st, state, err := processStart(pid)
	if err != nil {
		return false
	}
	if state == 'Z' || state == 'X' || state == 'x' {
		return true
	}
	return start != 0 && st != start
}
