//go:build unix

package progress

import (
	"syscall"
	"testing"
	"time"
)

// cpuTime returns the CPU time this process has used.
func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal("getrusage: ", err)

	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
