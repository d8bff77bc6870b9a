//go:build !linux || race

package progress

// Without membarrier(2) (or under the race detector, which does not know
// it), wakers always fence.
var asymmetric = false

func heavyBarrier() bool { return false }
