package nic

import "fmt"

// Frame ownership. Every frame buffer of a link is in exactly one of
// these states, which the link records in one byte per frame and changes
// on every move; audit checks the record against the free list and the
// kernel's rings. A frame given to the kernel twice (in the fill and the
// transmit rings at once, say) would be written by both and corrupt
// data, so every move checks the state it leaves.
const (
	ownFree   uint8 = iota // on the link's free list
	ownFill                // posted for receive: the fill ring, or the UDP receive batch
	ownRx                  // received, held by the caller until Release
	ownUser                // the caller's: allocated, or kept after a completed send
	ownTx                  // queued for transmit; freed when the send completes
	ownTxKeep              // queued for transmit; back to the caller when it completes
	ownTxFree              // kept, released while in flight: freed when it completes
	numOwners
)

var ownerNames = [numOwners]string{"free", "fill", "rx", "user", "tx", "tx-keep", "tx-free"}

// frames is a link's record of its frame buffers: the owner of each and
// the free list, a stack so that the most recently used (cache-warm)
// frame goes out next.
type frames struct {
	owner []uint8
	free  []Frame // free[:nfree] are free
	nfree int
}

func newFrames(n int) frames {
	f := frames{owner: make([]uint8, n), free: make([]Frame, n), nfree: n}
	for i := range f.free {
		f.free[i] = Frame(n - 1 - i) // frame 0 on top
	}
	return f
}

// valid reports whether f names a frame of the link.
func (t *frames) valid(f Frame) bool { return int(f) < len(t.owner) }

// pop takes up to len(fs) frames off the free list for owner o.
func (t *frames) pop(fs []Frame, o uint8) int {
	n := min(len(fs), t.nfree)
	for i := range n {
		f := t.free[t.nfree-1-i]
		t.owner[f] = o
		fs[i] = f
	}
	t.nfree -= n
	return n
}

// push puts f on the free list.
func (t *frames) push(f Frame) {
	t.owner[f] = ownFree
	t.free[t.nfree] = f
	t.nfree++
}

// audit checks the record: each frame on the free list once and marked
// free, and as many marked free as listed. The links add what their
// rings hold. It returns the count of frames in each state.
func (t *frames) audit() ([numOwners]int, error) {
	var n [numOwners]int
	for i, o := range t.owner {
		if o >= numOwners {
			return n, fmt.Errorf("frame %d has owner %d", i, o)
		}
		n[o]++
	}
	if n[ownFree] != t.nfree {
		return n, fmt.Errorf("%d frames marked free, %d on the free list", n[ownFree], t.nfree)
	}
	seen := make(map[Frame]bool, t.nfree)
	for _, f := range t.free[:t.nfree] {
		if !t.valid(f) || t.owner[f] != ownFree || seen[f] {
			return n, fmt.Errorf("free list holds frame %d (owner %s, twice %v)", f, ownerName(t, f), seen[f])
		}
		seen[f] = true
	}
	return n, nil
}

func ownerName(t *frames, f Frame) string {
	if !t.valid(f) {
		return "none"
	}
	return ownerNames[t.owner[f]]
}

// release is Release's move for one frame, common to both links: a
// received frame goes to rx (the link's receive side), an allocated or
// kept one to the free list, a kept one in flight is marked to be freed
// on completion. It reports false for a frame the caller does not own.
func (t *frames) release(f Frame, rx func(Frame)) bool {
	if !t.valid(f) {
		return false
	}
	switch t.owner[f] {
	case ownRx:
		rx(f)
	case ownUser:
		t.push(f)
	case ownTxKeep:
		t.owner[f] = ownTxFree
	default:
		return false
	}
	return true
}

// sendable checks that the caller may send f: ErrNotOwned or ErrInFlight.
func (t *frames) sendable(f Frame) error {
	if !t.valid(f) {
		return ErrNotOwned
	}
	switch t.owner[f] {
	case ownUser:
		return nil
	case ownTxKeep:
		return ErrInFlight
	}
	return ErrNotOwned
}

// completed is the move of a frame whose send completed: to the free
// list or, kept, back to the caller. It reports false for a frame that
// was not in flight (a completion the link did not expect).
func (t *frames) completed(f Frame) bool {
	if !t.valid(f) {
		return false
	}
	switch t.owner[f] {
	case ownTx, ownTxFree:
		t.push(f)
	case ownTxKeep:
		t.owner[f] = ownUser
	default:
		return false
	}
	return true
}
