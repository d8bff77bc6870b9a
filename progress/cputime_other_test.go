//go:build !unix

package progress

import (
	"github.com/tachyon-hpc/tachyon/internal/testskip"
	"testing"
	"time"
)

// cpuTime skips: the process's CPU time is read with getrusage.
func cpuTime(t *testing.T) time.Duration {
	testskip.Skip(t, testskip.NotUnix, "no getrusage on this system")
	return 0
}
