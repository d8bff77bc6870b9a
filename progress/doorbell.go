package progress

import (
	"errors"
	"sync/atomic"
	"unsafe"

	"github.com/tachyon-hpc/tachyon/asm"
)

// Doorbell is what a parked engine sleeps on and what wakes it: a futex word
// and a count of sleepers. Anything that gives a parked engine work (a
// transport that delivered a message, a request completed for a goroutine
// waiting on it, a timer armed earlier than the engine's nap) rings it.
//
// A ring wakes one goroutine of each engine parked on the doorbell (one
// engine, unless several were given it with WithDoorbell): the engine's
// watcher, the only one of its parked goroutines that sleeps on the
// futex. The watcher polls and wakes whichever other parked goroutines'
// conditions are now met (park.go); the others sleep in Go's scheduler.
//
// A doorbell may live in memory shared between processes (see DoorbellAt),
// so that a rank in another process can wake this one. Its layout is three
// little-endian 32-bit words, the sleeper count, flags and the futex
// sequence, followed by padding to DoorbellSize. The first two share one
// aligned 64-bit word, which Quiet reads with one load.
//
// Ringing costs a load when nobody sleeps, which is the case while the
// engine is busy, and a fence before it where asymmetric wake-ups are off
// (see WakeFence).
type Doorbell struct {
	_        [0]uint64 // sleepers and flags: one aligned 64-bit word
	sleepers uint32    // goroutines between announcing a nap and leaving it
	flags    uint32    // flagFence: a sleeper does not issue the heavy barrier
	seq      uint32    // futex word: bumped by every ring that finds sleepers
	_        [52]byte
}

// quietMask selects, in the word of a doorbell's sleeper count and flags
// (little-endian: the count below, the flags above), what keeps RingFenced
// from doing nothing: any sleeper, and where this process skips its fence
// (asymmetric), a sleeper's demand that wakers fence.
var quietMask = func() uint64 {
	if asymmetric {
		return 1<<32 - 1 | flagFence<<32
	}
	return 1<<32 - 1
}()

// flagFence in Doorbell.flags tells wakers to fence: some goroutine that
// sleeps on the doorbell cannot make the barrier for them.
const flagFence = 1

// WakeFence orders the work a caller published before its check of a
// doorbell for sleepers (RingFenced), as a sleeper announces itself and
// then rechecks the work: one side or the other must see the other's
// store. Where this process registered for membarrier(2)'s global
// expedited barrier (the progress_membarrier control variable), the
// sleeper issues that barrier before it rechecks, and WakeFence does
// nothing: the cost moves to the rare goroutine about to park. Otherwise it
// is a full fence.
func WakeFence() {
	if !asymmetric {
		asm.Fence()
	}
}

// DoorbellSize is the number of bytes a Doorbell occupies in shared memory:
// one cache line, so that ringing never false-shares with data.
const DoorbellSize = int(unsafe.Sizeof(Doorbell{}))

// ErrDoorbellPlacement reports memory that cannot hold a Doorbell.
var ErrDoorbellPlacement = errors.New("progress: doorbell memory must be at least DoorbellSize bytes, 8-byte aligned")

// DoorbellAt returns the Doorbell stored in b, which must be at least
// DoorbellSize bytes and 8-byte aligned (a shared-memory segment's cache
// line, for example). The memory must stay mapped while the doorbell is in
// use. A zeroed region is a valid, quiet doorbell.
func DoorbellAt(b []byte) (*Doorbell, error) {
	if len(b) < DoorbellSize || uintptr(unsafe.Pointer(unsafe.SliceData(b)))%8 != 0 {
		return nil, ErrDoorbellPlacement
	}
	return (*Doorbell)(unsafe.Pointer(unsafe.SliceData(b))), nil
}

// Ring wakes the goroutine that watches d for each engine parked on it,
// which wakes in turn the parked goroutines whose conditions the work
// meets. Call it after publishing the work the sleepers should see; its
// WakeFence orders the publication before the check for sleepers, so a
// sleeper either sees the work when it rechecks or is woken.
func (d *Doorbell) Ring() {
	WakeFence()
	d.RingFenced()
}

// RingFenced is Ring for a caller that has called WakeFence since
// publishing the work, so that a batch of publications, or one publication
// that must wake several doorbells, costs one WakeFence.
func (d *Doorbell) RingFenced() {
	if asymmetric && asm.LoadAcquire32(&d.flags)&flagFence != 0 {
		asm.Fence() // a sleeper cannot make the barrier: make it here
	}
	if asm.LoadAcquire32(&d.sleepers) == 0 {
		return
	}
	atomic.AddUint32(&d.seq, 1)
	futexWake(&d.seq, 1<<30)
}

// Quiet reports whether RingFenced would do nothing: no sleeper to wake
// and no fence owed for one. It goes in line where RingFenced does not, so
// that a sender that rings after every message pays only its one load
// (and the mask's).
func (d *Doorbell) Quiet() bool {
	return asm.LoadAcquire64((*uint64)(unsafe.Pointer(&d.sleepers)))&quietMask == 0
}

// announce counts the caller among d's sleepers before it rechecks its
// work and parks (park.go), and returns the sequence read just before.
// sure is false where the heavy barrier failed: wakers that skipped their
// fence trusting it may have missed the announcement, so the caller must
// not sleep long (Engine.napAlone). Every announce is paired with a leave.
func (d *Doorbell) announce() (seq uint32, sure bool) {
	if !asymmetric && atomic.LoadUint32(&d.flags)&flagFence == 0 {
		atomic.OrUint32(&d.flags, flagFence) // wakers in other processes must fence
	}
	seq = atomic.LoadUint32(&d.seq)
	atomic.AddUint32(&d.sleepers, 1) // full fence: orders the announcement before the recheck
	if asymmetric && !heavyBarrier() {
		// Wakers skipped their fence trusting the barrier: have them
		// fence from now on.
		atomic.OrUint32(&d.flags, flagFence)
		return seq, false
	}
	return seq, true
}

// leave ends an announce: the caller no longer sleeps.
func (d *Doorbell) leave() { atomic.AddUint32(&d.sleepers, ^uint32(0)) }
