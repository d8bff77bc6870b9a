package rings

import (
	"runtime"

	"github.com/tachyon-hpc/tachyon/asm"
)

// spinner paces the empty polls of a blocking operation: a spin hint
// between polls and, every rings_check_spins polls, a yield to other
// goroutines and a signal to check that the peer still lives. A blocking
// operation therefore never spins forever on a dead peer.
type spinner struct{ n, limit int64 }

func newSpinner() spinner { return spinner{limit: checkSpins.Get()} }

// spin waits one poll and reports whether it is time for a liveness check.
func (s *spinner) spin() bool {
	s.n++
	if s.n < s.limit {
		asm.Pause()
		return false
	}
	s.n = 0
	runtime.Gosched()
	return true
}
