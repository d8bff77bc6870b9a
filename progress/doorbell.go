package progress

import (
	"errors"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/tachyon-hpc/tachyon/asm"
)

// Doorbell is what a parked engine sleeps on and what wakes it: a futex word
// and a count of sleepers. Anything that gives a parked engine work (a
// transport that delivered a message, a request completed for a goroutine
// waiting on it, a timer armed earlier than the engine's nap) rings it.
//
// A doorbell may live in memory shared between processes (see DoorbellAt),
// so that a rank in another process can wake this one. Its layout is two
// little-endian 32-bit words, the futex sequence then the sleeper count,
// followed by padding to DoorbellSize.
//
// Ringing costs a fence and a load when nobody sleeps, which is the case
// while the engine is busy.
type Doorbell struct {
	seq      uint32 // futex word: bumped by every ring that finds sleepers
	sleepers uint32 // goroutines between announcing a nap and leaving it
	_        [56]byte
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

// Ring wakes every goroutine or process parked on d. Call it after
// publishing the work the sleeper should see; the fence inside orders the
// publication before the check for sleepers, so a sleeper either sees the
// work when it rechecks or is woken.
func (d *Doorbell) Ring() {
	asm.Fence()
	d.RingFenced()
}

// RingFenced is Ring for a caller that has executed a full fence
// (asm.Fence) since publishing the work: it skips Ring's own fence, so
// that a batch of publications, or one publication that must wake several
// doorbells, costs one fence.
func (d *Doorbell) RingFenced() {
	if asm.LoadAcquire32(&d.sleepers) == 0 {
		return
	}
	atomic.AddUint32(&d.seq, 1)
	futexWake(&d.seq, 1<<30)
}

// nap parks the caller until the doorbell rings or d elapses (forever if
// d <= 0), unless c is ready after the caller has announced itself
// as a sleeper. It reports whether it actually slept.
func (d *Doorbell) nap(timeout time.Duration, c condition) bool {
	seq := atomic.LoadUint32(&d.seq)
	atomic.AddUint32(&d.sleepers, 1) // full fence: orders the announcement before the recheck
	slept := false
	if !c.ready() {
		futexWait(&d.seq, seq, timeout)
		slept = true
	}
	atomic.AddUint32(&d.sleepers, ^uint32(0))
	return slept
}
