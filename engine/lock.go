package engine

import (
	"fmt"
	"runtime"
	"sync/atomic"

	"github.com/tachyon-hpc/tachyon/asm"
	"github.com/tachyon-hpc/tachyon/progress"
)

// spinLock guards an endpoint's queues between the goroutine polling it
// and goroutines posting operations. It is held for a few hundred
// nanoseconds at most and never across a wait, so a contender spins
// briefly and then yields instead of parking in the kernel.
type spinLock struct{ v uint32 }

func (l *spinLock) tryLock() bool {
	return asm.LoadAcquire32(&l.v) == 0 && atomic.CompareAndSwapUint32(&l.v, 0, 1)
}

func (l *spinLock) lock() {
	for i := 0; !l.tryLock(); i++ {
		if i < 64 {
			asm.Pause()
		} else {
			runtime.Gosched()
		}
	}
}

func (l *spinLock) unlock() { asm.StoreRelease32(&l.v, 0) }

// lock takes the endpoint for an operation; in serial mode (SetSerial)
// there is nothing to take.
func (ep *Endpoint) lock() {
	if !ep.serial {
		ep.lk.lock()
	}
}

func (ep *Endpoint) tryLock() bool { return ep.serial || ep.lk.tryLock() }

// unlock ends an operation. The wake-ups the operation owes (peers whose
// links got packets, goroutines that may be parked on requests it
// completed) go out here, after one WakeFence for all of them: a fence
// right after a store to a line the peer is reading waits for that line to
// move, so one per message would serialize the messages of a window (and
// with asymmetric wake-ups there is none at all).
func (ep *Endpoint) unlock() {
	if len(ep.woken) > 0 || ep.notify || !ep.serial {
		ep.wakeUnlock()
	}
}

// wakeUnlock is unlock when there are wake-ups to send or a lock to
// release; unlock itself stays small enough to be inlined.
func (ep *Endpoint) wakeUnlock() {
	if len(ep.woken) > 0 || ep.notify {
		ep.wake()
	}
	if !ep.serial {
		ep.lk.unlock()
	}
}

// wake sends the wake-ups an operation owes.
func (ep *Endpoint) wake() {
	progress.WakeFence()
	for _, i := range ep.woken {
		p := &ep.peers[i]
		p.wake = false
		p.out.Wake()
	}
	ep.woken = ep.woken[:0]
	if ep.notify {
		ep.notify = false
		ep.prog.Doorbell().RingFenced()
	}
}

// wakeLater notes that peer i's link got packets: its owner is woken when
// the current operation ends.
func (ep *Endpoint) wakeLater(i int) {
	if p := &ep.peers[i]; !p.wake {
		p.wake = true
		ep.woken = append(ep.woken, int32(i))
	}
}

// SetSerial tells the endpoint whether its caller promises that no two
// goroutines ever call into it at once (MPI_THREAD_SINGLE, FUNNELED or
// SERIALIZED) and that no dedicated progress goroutine runs (Engine.Start).
// The endpoint then takes no lock and, since no other goroutine can be
// waiting on its requests, rings no doorbell for its own completions: no
// locked instruction on its message path. Breaking the promise is a data
// race. It
// returns an error if a progress goroutine runs. Call it before any other
// use of the endpoint, or while no other goroutine uses it.
func (ep *Endpoint) SetSerial(on bool) error {
	if on && ep.prog.Running() {
		return fmt.Errorf("%w: a progress goroutine polls the endpoint, so it cannot run serially", ErrConfig)
	}
	ep.lk.lock() // the real lock, whatever the mode
	ep.serial = on
	ep.lk.unlock()
	return nil
}
