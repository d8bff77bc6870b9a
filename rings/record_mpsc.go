package rings

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/tachyon-hpc/tachyon/asm"
)

// The many-to-one side of record rings (NewMPSCRing): producers claiming
// shared space, and the reader skipping what dead producers left.

// claimShared reserves need bytes among many producers and marks them
// claimed with a negative length tagged with this writer's slot. It
// returns ErrCorrupt if the shared head is beyond the shared tail, which
// only a corrupt ring shows: retrying would spin forever.
func (w *RecordWriter) claimShared(need, length uint64) (uint64, error) {
	for {
		t := asm.LoadAcquire64(w.tailp)
		idx := t & w.mask
		var padding uint64
		if toEnd := w.capacity - idx; need > toEnd {
			padding = toEnd
		}
		if t+padding+need-w.headCache > w.capacity || t < w.headCache {
			w.headCache = asm.LoadAcquire64(w.headp)
			if t < w.headCache {
				// t is stale: the reader is already past it. A tail
				// loaded after the head never is (the reader stops at
				// the tail), unless the indices are corrupt.
				if asm.LoadAcquire64(w.tailp) < w.headCache {
					return 0, ErrCorrupt
				}
				continue
			}
			if t+padding+need-w.headCache > w.capacity {
				return 0, ErrFull
			}
		}
		if !atomic.CompareAndSwapUint64(w.tailp, t, t+padding+need) {
			continue
		}
		if padding != 0 {
			asm.StoreRelease64(w.hdr(idx), padding|uint64(typePadding)<<32)
			idx = 0
		}
		asm.StoreRelease64(w.hdr(idx), uint64(uint32(-int32(length)))|uint64(w.tag)<<32)
		return idx, nil
	}
}

// stuck handles a many-to-one ring whose head record is not committed (w
// is its header word) and returns the head to go on from, whether it
// skipped something, and the death it found. Every rings_check_spins polls
// at the same head it looks at who holds the claim: a claim whose producer
// died (or whose slot has since been taken by another generation) is
// skipped. A claim whose header was never written (the producer died
// between reserving and marking it) is turned into padding, Aeron-style,
// up to the next written header, once a producer is known dead,
// rings_unblock_checks intervals passed and the gap has lasted
// rings_unblock_wait.
func (rd *RecordReader) stuck(head, w uint64) (uint64, bool, error) {
	if rd.stuckAt != head {
		rd.stuckAt, rd.stuckPolls, rd.stuckRuns = head, 0, 0
		rd.stuckSince = time.Time{}
	}
	if rd.stuckPolls++; rd.stuckPolls < checkSpins.Get() {
		return head, false, nil
	}
	rd.stuckPolls = 0
	idx := head & rd.mask
	if length := int32(uint32(w)); length < 0 {
		tag := uint32(w >> 32)
		slot, gen := tag&0xff, tag>>8
		claim := uint64(-int64(length))
		step := align(claim, recordAlign)
		if slot >= MaxProducers || claim < recordHeader || step > rd.capacity-idx ||
			claim-recordHeader > rd.maxPayload {
			head, err := rd.corrupt(head)
			return head, false, err
		}
		off := uintptr(offSlots + slot*slotSize)
		sw := atomic.LoadUint64(word64(rd.r.h.base, off))
		pid, dead := rd.r.h.slotDead(off)
		if slotGen(sw) == gen && slotPID(sw) != 0 && !dead {
			return head, false, nil // its producer is alive and still writing
		}
		pvAbandoned.Add(1)
		clear(rd.bytes(idx, step))
		if !dead {
			return head + step, true, fmt.Errorf("%w: producer in slot %d left a claim", ErrPeerDead, slot)
		}
		rd.r.h.freeSlot(off, gen)
		pvDead.Add(1)
		return head + step, true, deadErr(pid)
	}
	tail := asm.LoadAcquire64(rd.tailp)
	if tail == head {
		rd.stuckRuns = 0
		return head, false, nil // empty
	}
	if rd.stuckSince.IsZero() {
		rd.stuckSince = time.Now()
	}
	// A live writer descheduled between its compare-and-swap and its
	// marking store leaves the same zero header as a dead one: polls
	// alone pass in a few milliseconds, a time slice of a loaded host can
	// last longer, so the gap must also have lasted rings_unblock_wait.
	if rd.stuckRuns++; rd.stuckRuns < unblockChecks.Get() || time.Since(rd.stuckSince) < unblockWait.Get() {
		return head, false, nil
	}
	if tail < head || tail-head > rd.capacity {
		head, err := rd.corrupt(head)
		return head, false, err
	}
	rd.reapProducers()
	if !rd.reaped || head >= rd.reapTail {
		// No producer died with a claim below this head: a live one is
		// just slow to mark its claim.
		rd.reaped, rd.stuckRuns = false, 0
		return head, false, nil
	}
	// The claimed space is all zeros (the reader zeroes what it consumes
	// and a producer marks its claim before writing its payload): the next
	// non-zero aligned word is the next record's header.
	limit := min(tail-head, rd.capacity-idx)
	gap := uint64(recordAlign)
	for gap < limit && atomic.LoadUint64(rd.hdr(idx+gap)) == 0 {
		gap += recordAlign
	}
	pvAbandoned.Add(1)
	asm.StoreRelease64(rd.hdr(idx), gap|uint64(typePadding)<<32)
	return head, true, nil // the death was reported when it was reaped
}

// reapProducers frees the slots of dead producers. Each death it finds is
// left in rd.pending (several deaths joined into one error), to be
// reported exactly once by Poll or Check: the slot is free afterwards, so
// no later look would find it again.
func (rd *RecordReader) reapProducers() {
	for i := range MaxProducers {
		off := uintptr(offSlots + i*slotSize)
		if p, dead := rd.r.h.slotDead(off); dead {
			sw := atomic.LoadUint64(word64(rd.r.h.base, off))
			if slotPID(sw) != p || !rd.r.h.freeSlot(off, slotGen(sw)) {
				continue // taken over meanwhile: counted below
			}
			pvDead.Add(1)
			rd.reaped, rd.reapPID = true, p
			rd.reapTail = asm.LoadAcquire64(rd.tailp)
			rd.keep(deadErr(p))
		}
	}
	// A producer that attached after another died may have taken its
	// slot over before this reader looked: the ring counts such
	// takeovers, and each is a death to report.
	if n := atomic.LoadUint64(word64(rd.r.h.base, offReclaimed)); n != rd.reclaimed {
		p := int(atomic.LoadUint64(word64(rd.r.h.base, offReclaimedPID)))
		pvDead.Add(n - rd.reclaimed)
		rd.reclaimed = n
		rd.reaped, rd.reapPID = true, p
		rd.reapTail = asm.LoadAcquire64(rd.tailp)
		rd.keep(fmt.Errorf("%w: pid %d (a new producer took over its slot)", ErrPeerDead, p))
	}
}
