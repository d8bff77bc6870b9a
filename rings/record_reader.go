package rings

import (
	"errors"
	"time"
	"unsafe"

	"github.com/tachyon-hpc/tachyon/asm"
)

// RecordReader is the reader of a record ring. Its methods are for one
// goroutine at a time.
type RecordReader struct {
	_          pad
	head       uint64
	capacity   uint64
	mask       uint64
	maxPayload uint64
	data       unsafe.Pointer
	headp      *uint64
	tailp      *uint64
	multi      bool
	closed     bool
	dead       bool
	broken     bool
	nextOff    bool   // multi, closed or broken: Next's one test of all three
	reclaimed  uint64 // many-to-one: slots producers took over from dead ones, as last seen
	stuckAt    uint64 // many-to-one: head where polls found nothing
	stuckPolls int64
	stuckRuns  int64
	stuckSince time.Time // when the reader was first seen stuck at stuckAt
	reaped     bool      // a producer was found dead ...
	reapTail   uint64    // ... when the tail was here: its claims lie below
	reapPID    int
	pending    error     // a death reaped but not yet reported
	peeked     int       // records handed out by Peek and Next and not yet released
	filled     int       // the first of them, those Peek found, have entries in recs
	next       uint64    // the position after the last record out; the head while none is (so NextReady reads no more)
	recs       []peekRec // where Peek's are
	wantp      *uint64   // the writers' requests for room (WantRoom) ...
	wantSeen   uint64    // ... and their count as RoomWanted last saw it
	r          *RecordRing
	_          pad
}

// peekRec locates one record handed out by Peek: its payload, and the
// position just after it.
type peekRec struct {
	idx, n, end uint64
}

func (rd *RecordReader) hdr(idx uint64) *uint64 { return (*uint64)(unsafe.Add(rd.data, idx)) }

// bytes returns the n bytes of the ring's data from idx. A slice of an
// array larger than any ring, where unsafe.Slice would check n against
// the address space: one comparison fewer a record.
func (rd *RecordReader) bytes(idx, n uint64) []byte {
	return (*[1 << 46]byte)(unsafe.Add(rd.data, idx))[:n:n]
}

// Poll hands up to limit ready records to fn, in order, and returns how
// many it handed; it never waits. Padding and aborted records are skipped.
// A record with a malformed length is dropped with everything published
// after it so far, counted, and reported with ErrCorrupt. On a many-to-one
// ring, a record left claimed by a producer that died is skipped and
// reported with ErrPeerDead once that death is seen.
func (rd *RecordReader) Poll(fn Handler, limit int) (int, error) {
	if rd.closed || rd.broken {
		return 0, rd.pollErr()
	}
	n := 0
	start := rd.head
	head := start
	var report error
	for n < limit {
		idx := head & rd.mask
		w := asm.LoadAcquire64(rd.hdr(idx))
		length := int32(uint32(w))
		if length <= 0 {
			if !rd.multi {
				if length < 0 {
					rd.keep(report)
					head, report = rd.corrupt(head)
				}
				break
			}
			next, skipped, err := rd.stuck(head, w)
			if err != nil {
				rd.keep(report)
				report = err
			}
			if head = next; skipped {
				continue
			}
			break
		}
		typ := uint32(w >> 32)
		step := align(uint64(length), recordAlign)
		if uint64(length) < recordHeader || step > rd.capacity-idx ||
			typ != typePadding && uint64(length)-recordHeader > rd.maxPayload {
			rd.keep(report)
			head, report = rd.corrupt(head)
			break
		}
		if typ != typePadding {
			fn(typ, rd.bytes(idx+recordHeader, uint64(length)-recordHeader))
			n++
		}
		clear(rd.bytes(idx, step))
		head += step
	}
	if head != start {
		rd.head = head
		if rd.peeked == 0 {
			rd.next = head
		}
		asm.StoreRelease64(rd.headp, head)
	}
	if report == nil && rd.pending != nil {
		report, rd.pending = rd.pending, nil
	}
	return n, report
}

// keep leaves err, an error Poll found earlier in the batch and is about
// to replace with a later one, for the next Poll or Check to report
// (joined with any other left there). One Poll can meet a dead
// producer's abandoned claim and then malformed data: it returns the
// ErrCorrupt, and the next one the ErrPeerDead.
func (rd *RecordReader) keep(err error) {
	switch {
	case err == nil:
	case rd.pending == nil:
		rd.pending = err
	default:
		rd.pending = errors.Join(rd.pending, err)
	}
}

func (rd *RecordReader) pollErr() error {
	if rd.closed {
		return ErrClosed
	}
	return ErrCorrupt
}

// corrupt drops everything from head up to the tail the producers have
// published, since a malformed length leaves no way to find the next
// record, and returns the new head. A tail that is itself impossible
// leaves the ring broken: every later Poll reports ErrCorrupt.
func (rd *RecordReader) corrupt(head uint64) (uint64, error) {
	pvMalformed.Add(1)
	tail := asm.LoadAcquire64(rd.tailp)
	if tail < head || tail-head > rd.capacity || tail%recordAlign != 0 {
		rd.broken, rd.nextOff = true, true
		return head, ErrCorrupt
	}
	for head < tail {
		idx := head & rd.mask
		k := min(tail-head, rd.capacity-idx)
		clear(rd.bytes(idx, k))
		head += k
	}
	return head, ErrCorrupt
}

// Peek finds up to max ready records for zero-copy reading with Record;
// Release consumes them. It suits a reader that hands records on without
// a callback per record; Next hands them out one at a time, for a reader
// that handles each before it reads the next (the engine's poll). Padding
// is skipped. A malformed record at the head is dropped with everything
// published after it so far, counted, and reported with ErrCorrupt; one
// further on ends the batch and is reported by the next Peek. Only single-producer rings
// support it (ErrInvalid otherwise); Poll and Peek must not be mixed
// within one batch.
func (rd *RecordReader) Peek(max int) (int, error) {
	switch {
	case rd.multi:
		return 0, ErrInvalid
	case rd.closed || rd.broken:
		return 0, rd.pollErr()
	}
	rd.peeked, rd.filled, rd.next = 0, 0, rd.head
	if asm.LoadAcquire64(rd.hdr(rd.head&rd.mask)) == 0 {
		return 0, nil // nothing ready: the usual answer to a waiter's poll
	}
	max = min(max, maxBatch)
	if cap(rd.recs) < max {
		rd.recs = make([]peekRec, max)
	}
	rd.recs = rd.recs[:cap(rd.recs)]
	head, k := rd.head, 0
	// A full ring holds a whole lap of records not yet released: stop
	// there, or the scan would come round to this batch's first record.
	for k < max && head-rd.head < rd.capacity {
		idx := head & rd.mask
		w := asm.LoadAcquire64(rd.hdr(idx))
		length := int32(uint32(w))
		if length == 0 {
			break
		}
		typ := uint32(w >> 32)
		step := align(uint64(length), recordAlign)
		if !rd.wellFormed(idx, length, typ, step) {
			if k > 0 {
				break
			}
			return 0, rd.dropCorrupt(head)
		}
		head += step
		if typ != typePadding {
			rd.recs[k] = peekRec{idx: idx + recordHeader, n: uint64(length) - recordHeader, end: head}
			k++
		}
	}
	if k == 0 && head != rd.head {
		// Only padding was ready: consume it now, since no Release
		// will, and the writer may be waiting for that space.
		rd.consume(head)
	}
	rd.peeked, rd.filled = k, k
	if k > 0 {
		rd.next = rd.recs[k-1].end
	}
	return k, nil
}

// Next hands out the next ready record after those Peek and Next have
// handed out since the last Release, while fewer than max are out, and
// nil when there is none. It reads one header for each record it hands
// out, where Peek walks the whole batch first: a reader that handles each
// record before asking for the next one (the engine's poll) handles the
// first records of a stream while the writer is still writing the next
// ones, instead of waiting for each of their lines in turn and only then
// handling them all. Record and Release treat its records as Peek's.
// Padding is skipped. A malformed record is dropped and reported as Peek
// does when nothing is out; after other records it ends the handing out,
// and the first Next after their Release reports it. Only single-producer
// rings support it (ErrInvalid otherwise).
func (rd *RecordReader) Next(max int) ([]byte, error) {
	if rd.nextOff {
		if rd.multi {
			return nil, ErrInvalid
		}
		return nil, rd.pollErr()
	}
	if rd.peeked >= max {
		return nil, nil
	}
	head := rd.head
	if rd.peeked > 0 {
		head = rd.next
	}
	for head-rd.head < rd.capacity { // never a whole lap: see Peek
		idx := head & rd.mask
		w := asm.LoadAcquire64(rd.hdr(idx))
		length := uint64(uint32(w))
		if length == 0 {
			return nil, nil
		}
		step := align(length, recordAlign)
		// A record, well formed (a length below the header's wraps n
		// past maxPayload): wellFormed's checks for that case alone.
		if n := length - recordHeader; uint32(w>>32) != typePadding && n <= rd.maxPayload && step <= rd.capacity-idx {
			// No entry in recs: Record and Release find a record Next
			// handed out by walking the headers (locate), which only a
			// partial Release or a Record call needs; the engine's poll
			// releases whole batches and never asks.
			head += step
			rd.next = head
			rd.peeked++
			return rd.bytes(idx+recordHeader, n), nil
		}
		if !rd.wellFormed(idx, int32(length), uint32(w>>32), step) {
			if rd.peeked > 0 {
				return nil, nil
			}
			return nil, rd.dropCorrupt(head)
		}
		head += step // padding
		if rd.peeked == 0 {
			rd.consume(head) // no Release would: the writer may be waiting for it
		} else {
			rd.next = head // released with the record before it
		}
	}
	return nil, nil
}

// NextReady is Next's usual case alone: the next record if it is ready
// and well formed at the place Next reads from next, and fewer than max
// are out; nil otherwise, where Next says what is there (nothing,
// padding, a malformed record, an error). It makes no call, for a reader
// whose loop over records keeps its values in registers and turns to
// Next only when this returns nil.
func (rd *RecordReader) NextReady(max int) []byte {
	head := rd.next                                                    // the head while nothing is out
	if rd.nextOff || rd.peeked >= max || head-rd.head >= rd.capacity { // never a whole lap: see Peek
		return nil
	}
	idx := head & rd.mask
	w := asm.LoadAcquire64(rd.hdr(idx))
	length := uint64(uint32(w))
	step := align(length, recordAlign)
	// A record, well formed (a length below the header's wraps n past
	// maxPayload): wellFormed's checks for that case alone. A header of
	// length 0 (nothing yet) fails the length check. n is taken in 32
	// bits, so that the slice below needs no check of its length: a length
	// below the header's still wraps it past maxPayload, at most
	// maxRecordBytes/8 (geometry; attach checks the header's).
	n := uint64(uint32(w) - recordHeader)
	if uint32(w>>32) == typePadding || n > rd.maxPayload || step > rd.capacity-idx {
		return nil
	}
	// No entry in recs, as for Next's records.
	rd.next = head + step
	rd.peeked++
	return rd.bytes(idx+recordHeader, n)
}

// Ready reports whether the writer has published something at the place
// Next reads from next: a record, padding, or a malformed header that
// Next will report. It reads one header and is small enough to go in
// line, for a reader that spins on one ring waiting for a record.
func (rd *RecordReader) Ready() bool {
	head := rd.head
	if rd.peeked > 0 {
		head = rd.next
	}
	return asm.LoadAcquire64(rd.hdr(head&rd.mask)) != 0
}

// locate returns the i-th record out (i < peeked): from recs if Peek found
// it, else by walking the headers from the last record Peek found, or from
// the head. Every header on the way was checked when its record was
// handed out.
func (rd *RecordReader) locate(i int) peekRec {
	if i < rd.filled {
		return rd.recs[i]
	}
	head, j := rd.head, rd.filled
	if j > 0 {
		head = rd.recs[j-1].end
	}
	for {
		idx := head & rd.mask
		w := asm.LoadAcquire64(rd.hdr(idx))
		head += align(uint64(uint32(w)), recordAlign)
		if uint32(w>>32) == typePadding {
			continue
		}
		if j == i {
			return peekRec{idx: idx + recordHeader, n: uint64(uint32(w)) - recordHeader, end: head}
		}
		j++
	}
}

// wellFormed reports whether the header of the record at idx, of length
// and type typ, taking step bytes, describes a record this ring can hold.
func (rd *RecordReader) wellFormed(idx uint64, length int32, typ uint32, step uint64) bool {
	return length >= 0 && uint64(length) >= recordHeader && step <= rd.capacity-idx &&
		(typ == typePadding || uint64(length)-recordHeader <= rd.maxPayload)
}

// dropCorrupt handles a malformed record at head with nothing handed out:
// the padding before it is consumed, and it and everything published
// after it dropped (corrupt).
func (rd *RecordReader) dropCorrupt(head uint64) error {
	if head != rd.head {
		rd.consume(head)
	}
	head, err := rd.corrupt(head)
	if head != rd.head {
		rd.head, rd.next = head, head
		asm.StoreRelease64(rd.headp, head)
	}
	return err
}

// consume zeroes everything from the head up to end and gives it back to
// the writer.
func (rd *RecordReader) consume(end uint64) {
	for head := rd.head; head < end; {
		idx := head & rd.mask
		n := min(end-head, rd.capacity-idx)
		clear(rd.bytes(idx, n))
		head += n
	}
	rd.head, rd.next = end, end // nothing is out once consumed
	asm.StoreRelease64(rd.headp, end)
}

// Record returns the payload of the i-th record found by Peek, valid until
// Release; nil if i is out of the peek.
func (rd *RecordReader) Record(i int) []byte {
	if uint(i) >= uint(rd.peeked) {
		return nil
	}
	r := rd.locate(i)
	return rd.bytes(r.idx, r.n)
}

// Release consumes the first k records Peek found or Next handed out (and
// the padding before them): their space is zeroed and given back to the
// writer. It ends the peek.
func (rd *RecordReader) Release(k int) {
	k = max(0, min(k, rd.peeked))
	end := rd.next
	if k < rd.peeked && k > 0 {
		end = rd.locate(k - 1).end
	}
	rd.peeked, rd.filled, rd.next = 0, 0, rd.head
	if k > 0 {
		rd.consume(end)
	}
}

// RoomWanted reports whether a writer asked for room (WantRoom) since the
// last call. A reader calls it after Release and wakes the writers if it
// reports true: they may be asleep waiting for the space just freed. It is
// one load of a line that changes only when a writer asks. The writer
// rechecks for room after WantRoom and before it sleeps, so the reader's
// Release must be visible before this load: a store-load fence between
// them, or a barrier forced on the reader from the writer's side (as
// progress.WakeFence and the progress engine's asymmetric wake-ups do).
func (rd *RecordReader) RoomWanted() bool {
	if n := asm.LoadAcquire64(rd.wantp); n != rd.wantSeen {
		rd.wantSeen = n
		return true
	}
	return false
}

// Read is Poll that waits until at least one record is handed to fn.
// While it waits it checks, every rings_check_spins polls, the producers:
// on a single-producer ring it returns ErrClosed or ErrPeerDead once
// everything published has been read and the producer closed or died; on
// a many-to-one ring it returns ErrPeerDead when it finds a producer dead
// (later Reads go on with the others).
func (rd *RecordReader) Read(fn Handler, limit int) (int, error) {
	s := newSpinner()
	for {
		n, err := rd.Poll(fn, limit)
		if n > 0 || err != nil {
			return n, err
		}
		if s.spin() {
			if err := rd.Check(); err != nil {
				if rd.multi {
					return 0, err // the others' records wait for the next Read
				}
				if n, err2 := rd.Poll(fn, limit); n > 0 || err2 != nil {
					return n, err2
				}
				return 0, err
			}
		}
	}
}

// Check reports the producers' state. On a single-producer ring: ErrClosed
// if the producer closed, ErrPeerDead if its process died. On a
// many-to-one ring: ErrPeerDead if a producer's process died since the
// last check (its slot is freed). Records published before can still be
// read.
func (rd *RecordReader) Check() error {
	if rd.multi {
		rd.reapProducers()
		err := rd.pending
		rd.pending = nil
		return err
	}
	return rd.r.h.checkPeer(offProducerSlot, flagProducerClosed, &rd.dead)
}

// Close tells the producers that nothing more will be read: their blocking
// Write returns ErrClosed.
func (rd *RecordReader) Close() error {
	if rd.closed {
		return ErrClosed
	}
	rd.closed, rd.nextOff = true, true
	rd.r.h.setFlag(flagConsumerClosed)
	return nil
}
