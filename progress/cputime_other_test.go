//go:build !unix

package progress

import (
	"testing"
	"time"
)

// cpuTime skips: the process's CPU time is read with getrusage.
func cpuTime(t *testing.T) time.Duration {
	t.Skip("no getrusage on this system")
	return 0
}
