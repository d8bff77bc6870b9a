package procid

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Start returns the start time of process pid in clock ticks since boot
// (field 22 of /proc/PID/stat) and its state letter ('Z' a zombie).
func Start(pid int) (start uint64, state byte, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// "pid (comm) S ppid ...": comm may hold spaces and parentheses, so
	// fields count from the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, errors.New("procid: malformed /proc stat")
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 || len(f[0]) != 1 {
		return 0, 0, errors.New("procid: malformed /proc stat")
	}
	start, err = strconv.ParseUint(string(f[19]), 10, 64)
	return start, f[0][0], err
}

// Alive reports whether process pid, started at start (0 if unknown),
// still runs. A missing process, a zombie and a pid that now names a
// process started at another time are not; where /proc says nothing,
// only kill's answer counts.
func Alive(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	if err := unix.Kill(pid, 0); err == unix.ESRCH {
		return false
	}
	if _, selfStart, _ := Self(); selfStart == 0 {
		return true // no usable /proc
	}
	st, state, err := Start(pid)
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	if state == 'Z' || state == 'X' || state == 'x' {
		return false // exited, not yet reaped
	}
	return start == 0 || st == start
}

// pidNamespace returns the inode of this process's pid namespace, 0 if
// /proc does not say.
func pidNamespace() uint64 {
	var st syscall.Stat_t
	if syscall.Stat("/proc/self/ns/pid", &st) != nil {
		return 0
	}
	return st.Ino
}
