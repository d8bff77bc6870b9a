package rings

import (
	"bytes"
	"errors"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// processStart returns the start time of process pid in clock ticks since
// boot (field 22 of /proc/<pid>/stat) and its state letter.
func processStart(pid int) (uint64, error) {
	start, _, err := procStat(pid)
	return start, err
}

func procStat(pid int) (start uint64, state byte, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// "pid (comm) S ppid ...": comm may hold spaces and parentheses, so
	// fields count from the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, errors.New("malformed stat")
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 {
		return 0, 0, errors.New("malformed stat")
	}
	start, err = strconv.ParseUint(string(f[19]), 10, 64)
	return start, f[0][0], err
}

func processAlive(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	if err := unix.Kill(pid, 0); err == unix.ESRCH {
		return false
	}
	_, selfStart := selfID()
	if selfStart == 0 {
		return true // no usable /proc: kill's answer is all there is
	}
	st, state, err := procStat(pid)
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	if state == 'Z' || state == 'X' || state == 'x' {
		return false // exited, not yet reaped
	}
	return start == 0 || st == start
}
