package rings

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/tachyon-hpc/tachyon/asm"
)

// Flow of one record through a record ring (Aeron's one-to-one and
// many-to-one ring buffers):
//
//  1. The writer reserves 8+n bytes, rounded up to 8, at the tail: a
//     single producer just advances its own tail; producers of a
//     many-to-one ring compare-and-swap the shared tail. Both check a cached
//     copy of the reader's head first and reread the shared head only when
//     the ring looks full. A record that would cross the end of the buffer
//     is preceded by a padding record filling the rest of the buffer.
//  2. A many-to-one producer stores a negative length tagged with its slot
//     at once, marking the space as claimed (so the reader can tell whose
//     claim it waits on if that producer dies).
//  3. The writer copies the payload, then stores the header word
//     {length, type} with a release store: the commit.
//  4. The reader polls the header at its head with an acquire load; a
//     positive length is a complete record, handed to the handler in
//     place. It then zeroes the record, so that a zero header always means
//     "not yet written", and after the batch publishes its new head with a
//     release store.

// RecordRing carries variable-length records. A ring made by NewRecordRing
// has one producer; one made by NewMPSCRing has many (a receiver's shared
// inbox), possibly in different processes. Either has one reader.
type RecordRing struct {
	h *header
}

// Handler receives one record: its type and payload. The payload aliases
// the ring and is valid only until the handler returns.
type Handler func(typ uint32, p []byte)

// RecordRingSize returns the bytes a single-producer record ring with
// capacity bytes of data occupies, header included.
func RecordRingSize(capacity int) int {
	if capacity <= 0 {
		return 0
	}
	return ringHeaderSize + capacity
}

// MPSCRingSize returns the bytes a many-to-one ring with capacity bytes of
// data occupies, header and producer table included.
func MPSCRingSize(capacity int) int {
	if capacity <= 0 {
		return 0
	}
	return mpscHeaderSize + capacity
}

// NewRecordRing initializes a single-producer record ring in mem, which
// must start on a cache line and hold RecordRingSize(capacity) bytes.
// capacity is a power of two of at least 1024 bytes; a record carries up
// to capacity/8 - 8 bytes.
func NewRecordRing(mem []byte, capacity int) (*RecordRing, error) {
	return newRecordRing(mem, KindRecordRing, capacity)
}

// NewMPSCRing initializes a many-to-one record ring in mem, which must
// start on a cache line and hold MPSCRingSize(capacity) bytes. Up to
// MaxProducers writers may be attached at once.
func NewMPSCRing(mem []byte, capacity int) (*RecordRing, error) {
	return newRecordRing(mem, KindMPSCRing, capacity)
}

func newRecordRing(mem []byte, kind Kind, capacity int) (*RecordRing, error) {
	if capacity <= 0 {
		return nil, ErrInvalid
	}
	h, err := initRing(mem, kind, uint64(capacity), 0)
	if err != nil {
		return nil, err
	}
	return &RecordRing{h: h}, nil
}

// AttachRecordRing validates a record ring of either kind that another
// process (or goroutine) initialized in mem. A mismatched or corrupt
// header gives an error matching ErrBadSegment.
func AttachRecordRing(mem []byte) (*RecordRing, error) {
	h, err := attachRing(mem, 0)
	if err != nil {
		return nil, err
	}
	return &RecordRing{h: h}, nil
}

// Kind returns KindRecordRing or KindMPSCRing.
func (r *RecordRing) Kind() Kind { return r.h.kind }

// Capacity returns the bytes of the data area.
func (r *RecordRing) Capacity() int { return int(r.h.capacity) }

// MaxPayload returns the largest record payload.
func (r *RecordRing) MaxPayload() int { return int(r.h.maxPayload) }

// Writer attaches a producer. A single-producer ring takes one writer; a
// many-to-one ring takes up to MaxProducers at once, each for one
// goroutine at a time, and reclaims the slots of dead processes.
func (r *RecordRing) Writer() (*RecordWriter, error) {
	w := &RecordWriter{r: r, capacity: r.h.capacity, mask: r.h.capacity - 1,
		maxPayload: int(r.h.maxPayload), data: r.h.data(),
		headp: word64(r.h.base, offHead), tailp: word64(r.h.base, offTail)}
	if r.h.kind == KindMPSCRing {
		w.multi = true
		var err error
		for i := range MaxProducers {
			w.slot = uintptr(offSlots + i*slotSize)
			if w.gen, err = r.h.takeSlot(w.slot, true); err == nil {
				w.tag = uint32(i) | w.gen<<8
				break
			}
		}
		if err != nil {
			return nil, ErrBusy
		}
	} else {
		if _, err := r.h.takeSlot(offProducerSlot, false); err != nil {
			if r.h.flags()&flagProducerClosed != 0 {
				return nil, ErrClosed
			}
			return nil, err
		}
		w.tail = asm.LoadAcquire64(w.tailp)
		w.ahead = min(uint64(prefetchRecord.Get()), w.capacity/2)
		w.whole = uint64(prefetchWhole.Get())
	}
	w.headCache = asm.LoadAcquire64(w.headp)
	w.setFast()
	return w, nil
}

// Reader attaches the ring's only reader.
func (r *RecordRing) Reader() (*RecordReader, error) {
	if _, err := r.h.takeSlot(offConsumerSlot, false); err != nil {
		if r.h.flags()&flagConsumerClosed != 0 {
			return nil, ErrClosed
		}
		return nil, err
	}
	rd := &RecordReader{r: r, capacity: r.h.capacity, mask: r.h.capacity - 1,
		maxPayload: uint64(r.h.maxPayload), data: r.h.data(), multi: r.h.kind == KindMPSCRing,
		headp: word64(r.h.base, offHead), tailp: word64(r.h.base, offTail)}
	rd.head = asm.LoadAcquire64(rd.headp)
	rd.next = rd.head
	rd.wantp = r.h.roomWanted() // wantSeen 0: requests made before the reader came count
	rd.nextOff = rd.multi
	if rd.multi {
		rd.reclaimed = atomic.LoadUint64(word64(r.h.base, offReclaimed))
	}
	return rd, nil
}

// RecordWriter is one producer of a record ring. Its methods are for one
// goroutine at a time.
type RecordWriter struct {
	_          pad
	tail       uint64 // single producer: next free position
	headCache  uint64 // reader's head as last read
	capacity   uint64
	mask       uint64
	maxPayload int
	data       unsafe.Pointer
	headp      *uint64
	tailp      *uint64
	multi      bool
	claiming   bool
	closed     bool
	dead       bool
	tag        uint32 // many-to-one: slot | generation<<8, in claimed headers
	gen        uint32
	slot       uintptr
	claimIdx   uint64
	claimLen   uint64
	ahead      uint64 // single producer: prefetch distance in bytes
	pfAt       uint64 // TryWriteWords prefetches once the tail reaches this (nextLine); ^0 with the prefetch off
	whole      uint64 // single producer: records this long or longer are prefetched whole (0: never)
	noPrefetch bool   // SetPrefetch(false)
	padLines   bool   // SetLinePadding(true)
	holding    bool   // Hold: commits wait for Flush
	fastMax    uint64 // largest payload TryWriteWords writes in line (setFast)
	fastStream uint64 // fastMax with the prefetch on (in a stream)
	fastAlone  uint64 // fastMax with it off: records prefetched whole go the long way
	held       bool   // a committed record's header waits in heldHdr
	heldIdx    uint64
	heldHdr    uint64
	r          *RecordRing
	_          pad
}

func (w *RecordWriter) hdr(idx uint64) *uint64 { return (*uint64)(unsafe.Add(w.data, idx)) }

// setFast sets fastMax after the writer's state changed: 0 (every payload
// goes the long way) on a many-to-one ring, while a claim is open, while
// holding and once closed; otherwise the largest payload whose record is
// not prefetched whole, so that TryWriteWords tells all of that apart
// with one comparison. Whole records are prefetched only outside a stream
// (SetPrefetch(false)), so it keeps the bound for either case at hand.
func (w *RecordWriter) setFast() {
	w.fastStream, w.fastAlone = 0, 0
	if !w.multi && !w.claiming && !w.holding && !w.closed {
		w.fastStream, w.fastAlone = uint64(w.maxPayload), uint64(w.maxPayload)
		if w.whole != 0 {
			w.fastAlone = min(w.fastAlone, max(w.whole, 2*recordHeader)-2*recordHeader)
		}
	}
	w.fastMax = w.fastStream
	if w.noPrefetch {
		w.fastMax = w.fastAlone
	}
	w.setPfAt()
}

// setPfAt sets where TryWriteWords next prefetches: at once, if the
// prefetch is on, else never.
func (w *RecordWriter) setPfAt() {
	w.pfAt = ^uint64(0)
	if w.ahead != 0 && !w.noPrefetch && !w.multi {
		w.pfAt = 0
	}
}

// Claim reserves space for one record with an n-byte payload and returns
// the payload area to fill in place; Commit publishes it and Abort gives
// it up. It returns ErrFull if the space is not free, ErrTooLarge if n
// exceeds MaxPayload, ErrInvalid if a claim is already open, and, on a
// many-to-one ring whose shared head has been found beyond its tail,
// ErrCorrupt.
func (w *RecordWriter) Claim(n int) ([]byte, error) {
	if uint(n) > uint(w.maxPayload) || w.claiming || w.closed {
		return nil, w.claimErr(n)
	}
	length := uint64(recordHeader + n)
	need := align(length, recordAlign)
	var idx uint64
	var err error
	if w.multi {
		idx, err = w.claimShared(need, length)
	} else {
		idx, err = w.claimOwn(need)
		if err == ErrFull && w.held {
			// The reader cannot free room it cannot see: publish what
			// is held (the hold goes on).
			w.publishHeld()
		}
	}
	if err != nil {
		return nil, err
	}
	w.claiming, w.claimIdx, w.claimLen = true, idx, length
	w.setFast()
	return unsafe.Slice((*byte)(unsafe.Add(w.data, idx+recordHeader)), n), nil
}

func (w *RecordWriter) claimErr(n int) error {
	switch {
	case w.closed:
		return ErrClosed
	case w.claiming:
		return ErrInvalid
	case n < 0:
		return ErrInvalid
	}
	return ErrTooLarge
}

// claimOwn reserves need bytes for a single producer and prefetches for
// them.
func (w *RecordWriter) claimOwn(need uint64) (uint64, error) {
	idx, err := w.reserveOwn(need)
	if err != nil {
		return 0, err
	}
	if w.noPrefetch {
		if w.whole != 0 && need >= w.whole && need <= maxWholePrefetch {
			w.prefetchRecord(idx, need) // a record waited for alone
		}
	} else if next := w.nextLine(); next != nil {
		asm.PrefetchW(next)
	}
	return idx, nil
}

// reserveOwn reserves need bytes for a single producer, padding to the
// end of the data area first if they would not fit before it, and
// returns where they start.
func (w *RecordWriter) reserveOwn(need uint64) (uint64, error) {
	if err := w.makeRoom(need); err != nil {
		return 0, err
	}
	idx := w.tail & w.mask
	w.tail += need
	return idx, nil
}

// makeRoom makes need bytes at the tail free for a single producer: it
// rereads the reader's head if the cached one leaves too little room, and
// pads to the end of the data area if they would not fit before it
// (moving the tail to the start), or returns ErrFull.
func (w *RecordWriter) makeRoom(need uint64) error {
	t := w.tail
	idx := t & w.mask
	var padding uint64
	if toEnd := w.capacity - idx; need > toEnd {
		padding = toEnd
	}
	if t+padding+need-w.headCache > w.capacity {
		w.headCache = asm.LoadAcquire64(w.headp)
		if t+padding+need-w.headCache > w.capacity {
			return ErrFull
		}
	}
	if padding != 0 {
		asm.StoreRelease64(w.hdr(idx), padding|uint64(typePadding)<<32)
		w.tail = t + padding
	}
	return nil
}

// maxWholePrefetch bounds the records prefetched whole: far more lines
// than the CPU can have in flight only queue up (the rendezvous's 32 KiB
// packets took 1 MiB from 61-63 to 69-70 µs one way).
const maxWholePrefetch = 16 << 10

// prefetchRecord asks for write ownership of every line of the n bytes
// claimed at idx (rings_prefetch_whole_record_bytes), for a record
// written outside a stream (SetPrefetch(false)): the lines were last read
// and zeroed on the reader's core, and with all of them requested at once
// the copy into the record waits for one round of transfers instead of a
// line at a time as the store buffer fills. Far apart, it makes 2-4 KiB
// latency 5-8% shorter; near, 1-8 KiB latency 10-25% longer
// (docs/rings.md). In a stream it cost near placements about half the 2-4
// KiB message rate, and a 1 KiB record waited for alone goes faster
// written in line: hence streams and records below 2 KiB go without.
func (w *RecordWriter) prefetchRecord(idx, n uint64) {
	for off := idx &^ (CacheLine - 1); off < idx+n; off += CacheLine {
		asm.PrefetchW(unsafe.Add(w.data, off))
	}
}

// SetPrefetch turns the prefetch for writing (rings_prefetch_record_bytes)
// on or off for the claims that follow; it is on when a writer attaches.
// It pays off for records written in a stream, and is best off for one
// record that the reader waits for before the writer writes the next (a
// ping-pong): then the request for the next line reaches the reader's core
// just before the one for the line being committed, and delays the record.
// Off, a record of rings_prefetch_whole_record_bytes or more is prefetched
// whole instead; on, TryWriteWords writes records of any size in line.
func (w *RecordWriter) SetPrefetch(on bool) {
	w.noPrefetch = !on
	w.fastMax = w.fastStream
	if !on {
		w.fastMax = w.fastAlone
	}
	w.setPfAt()
}

// Prefetching reports whether the next claims prefetch: SetPrefetch left
// it on and the writer has a prefetch distance (a single producer with a
// non-zero rings_prefetch_record_bytes).
func (w *RecordWriter) Prefetching() bool { return w.ahead != 0 && !w.noPrefetch }

// Warm asks for write ownership of up to lines cache lines from the
// tail's own on, as far as the reader is known to have released them:
// the lines the next records will be written to. Between
// two streams of records the reader's cache takes those lines back: it
// zeroed them a lap before, its hardware prefetcher reads ahead of its
// head as it catches up, and it polls the tail's line at its head. A
// writer that calls Warm while it waits (the engine does so at each empty
// poll after a stream) finds them in its own cache when the next stream
// starts, instead of waiting a line transfer for the first records and
// queuing the stores after them. It returns the number of lines asked
// for; a many-to-one producer, or a closed one, asks for none.
func (w *RecordWriter) Warm(lines int) int {
	if w.multi || w.closed {
		return 0
	}
	at := w.tail &^ (CacheLine - 1)
	// Up to a lap past the cached head: the reader has released that.
	n := min(lines, int((w.headCache+w.capacity-at)/CacheLine))
	// A call per line spaces the requests out: the same 64 lines asked
	// for one instruction apart left the engine's 16 B message rate at
	// 10 M/s, against 17-19 with a call per line.
	for i := 0; i < n; i++ {
		asm.PrefetchW(unsafe.Add(w.data, (at+uint64(i)*CacheLine)&w.mask))
	}
	return max(n, 0)
}

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

// Commit publishes the claimed record with type typ (at most
// MaxRecordType).
func (w *RecordWriter) Commit(typ uint32) error {
	if !w.claiming || typ > MaxRecordType {
		return ErrInvalid
	}
	if w.padLines && !w.multi {
		w.padLine()
	}
	hdr := w.claimLen | uint64(typ)<<32
	w.claiming = false
	w.setFast()
	if w.holding {
		if w.held {
			// The reader cannot pass the held header: a plain store is
			// published by Flush's release store.
			*w.hdr(w.claimIdx) = hdr
		} else {
			w.held, w.heldIdx, w.heldHdr = true, w.claimIdx, hdr
		}
		return nil
	}
	asm.StoreRelease64(w.hdr(w.claimIdx), hdr)
	if !w.multi {
		asm.StoreRelease64(w.tailp, w.tail)
	}
	return nil
}

// Hold makes the records committed from now on wait for Flush: they are
// written in place, but the reader sees none of them until Flush publishes
// them all with one release store (the header of the first, stored last).
// A writer with several records at hand saves a release store per record,
// and the reader, which polls only the first record's header meanwhile,
// stays off the lines being written. Only a single-producer ring holds
// (ErrInvalid otherwise); holding while already holding is a no-op.
func (w *RecordWriter) Hold() error {
	if w.multi || w.closed {
		if w.closed {
			return ErrClosed
		}
		return ErrInvalid
	}
	w.holding = true
	w.setFast()
	return nil
}

// Flush publishes the records committed since Hold and ends the hold.
// Without a hold it does nothing.
func (w *RecordWriter) Flush() {
	if w.holding {
		w.publishHeld()
		w.holding = false
		w.setFast()
	}
}

// publishHeld publishes the records held so far.
func (w *RecordWriter) publishHeld() {
	if w.held {
		w.held = false
		asm.StoreRelease64(w.hdr(w.heldIdx), w.heldHdr)
	}
	asm.StoreRelease64(w.tailp, w.tail)
}

// padLine fills the rest of the cache line the record being committed
// ends in with padding, when another record of its size would not fit
// there: the next record then starts on a fresh line instead of spanning
// two. The padding is stored before the commit's release store, so the
// reader finds it in the line it reads the record from.
func (w *RecordWriter) padLine() {
	end := w.tail
	rest := -end & (CacheLine - 1)
	size := align(w.claimLen, recordAlign)
	if rest == 0 || rest >= size || size > CacheLine || end+rest-w.headCache > w.capacity {
		return
	}
	*w.hdr(end & w.mask) = rest | uint64(typePadding)<<32
	w.tail = end + rest
}

// SetLinePadding turns line padding on or off for the commits that
// follow: with it, a record that leaves too little of its cache line for
// another of its size has the rest of the line padded, so that the next
// record does not span two lines. It pays off for records the reader
// waits for one at a time (a ping-pong), where each line the next record
// touches is a line the reader must fetch; in a stream, packing records
// densely moves fewer lines.
func (w *RecordWriter) SetLinePadding(on bool) { w.padLines = on }

// LinePadding reports whether SetLinePadding turned line padding on (a
// many-to-one ring never pads, whatever it says).
func (w *RecordWriter) LinePadding() bool { return w.padLines }

// CommitLen publishes the first n bytes of the claimed record with type
// typ, giving the rest of the claim back: a writer that reserved room for
// the largest packet it might build commits what it built. Only a
// single-producer ring can shrink a claim; on a many-to-one ring n must be
// the claimed length.
func (w *RecordWriter) CommitLen(typ uint32, n int) error {
	if !w.claiming || typ > MaxRecordType || n < 0 || uint64(recordHeader+n) > w.claimLen {
		return ErrInvalid
	}
	length := uint64(recordHeader + n)
	if length != w.claimLen {
		if w.multi {
			return ErrInvalid
		}
		w.tail -= align(w.claimLen, recordAlign) - align(length, recordAlign)
		w.claimLen = length
	}
	return w.Commit(typ)
}

// Abort gives up the claimed record: the reader skips its space.
func (w *RecordWriter) Abort() {
	if !w.claiming {
		return
	}
	asm.StoreRelease64(w.hdr(w.claimIdx), align(w.claimLen, recordAlign)|uint64(typePadding)<<32)
	w.claiming = false
	w.setFast()
	if !w.multi && !w.holding {
		asm.StoreRelease64(w.tailp, w.tail)
	}
}

// TryWrite copies p into a new record of type typ and publishes it. It
// returns ErrFull if the ring has no room, ErrTooLarge if p exceeds
// MaxPayload, ErrInvalid for a type above MaxRecordType, and ErrCorrupt
// as Claim does.
func (w *RecordWriter) TryWrite(typ uint32, p []byte) error {
	if typ > MaxRecordType {
		return ErrInvalid
	}
	buf, err := w.Claim(len(p))
	if err != nil {
		return err
	}
	copy(buf, p)
	return w.Commit(typ)
}

// TryWriteWords is TryWrite of a record whose payload is the words h0
// and h1, little-endian, followed by p: the shape of a small message with
// its header. On a single-producer ring that is not holding it claims,
// stores and commits in one call, without the bookkeeping that carries a
// claim from Claim to Commit: a third fewer instructions for a record of
// 24 bytes, what an engine's short messages are. Its errors are
// TryWrite's.
func (w *RecordWriter) TryWriteWords(typ uint32, h0, h1 uint64, p []byte) error {
	n := 16 + len(p)
	length := uint64(recordHeader + n)
	need := align(length, recordAlign)
	t := w.tail
	idx := t & w.mask
	end := t + need
	if uint64(n) > w.fastMax || typ > MaxRecordType || need > w.capacity-idx || end-w.headCache > w.capacity {
		// Everything else out of line, with nothing of this call live
		// across a call in its usual case.
		return w.writeWordsSlow(typ, h0, h1, p)
	}
	w.tail = end
	b := (*[16]byte)(unsafe.Add(w.data, idx+recordHeader))
	binary.LittleEndian.PutUint64(b[:8], h0)
	binary.LittleEndian.PutUint64(b[8:], h1)
	copySmall(unsafe.Add(w.data, idx+recordHeader+16), p)
	if w.padLines {
		return w.commitPadded(idx, length, typ)
	}
	// Publish, then prefetch for what comes next (no store waits on the
	// prefetch), in the call into assembly that ends the write.
	asm.StoreRelease64PairPrefetchW(w.hdr(idx), length|uint64(typ)<<32, w.tailp, w.tail, w.nextLine())
	return nil
}

// commitPadded ends TryWriteWords for a writer that pads lines: the call
// to padLine comes last but for the one that publishes, so that nothing of
// TryWriteWords is live across a call.
func (w *RecordWriter) commitPadded(idx, length uint64, typ uint32) error {
	w.claimLen = length
	w.padLine()
	asm.StoreRelease64PairPrefetchW(w.hdr(idx), length|uint64(typ)<<32, w.tailp, w.tail, w.nextLine())
	return nil
}

// nextLine returns the line a single producer's write or claim that
// moved the tail prefetches for writing, or nil: only one that took the
// tail to pfAt or past it, where the line the prefetch distance ahead of
// the tail is a new one, does, only while the prefetch is on, and only if
// the reader has released that line (the cached head says so): fetching
// a line it has yet to read would steal it from the reader. One compare
// with pfAt tells a write that enters no new line.
func (w *RecordWriter) nextLine() unsafe.Pointer {
	if w.tail < w.pfAt {
		return nil
	}
	at := w.tail + w.ahead
	w.pfAt = at&^(CacheLine-1) + CacheLine - w.ahead // where at enters the next line
	if at+CacheLine-w.headCache > w.capacity {
		return nil // the reader has yet to release that line
	}
	return unsafe.Add(w.data, at&w.mask&^(CacheLine-1))
}

// writeWordsSlow is TryWriteWords for a record it does not write in line:
// by way of Claim and Commit for a writer not in its fast state (setFast)
// or a type out of range; after rereading the reader's head, or padding
// to the end of the data area, for a record that did not fit as things
// stood, which then goes in line.
func (w *RecordWriter) writeWordsSlow(typ uint32, h0, h1 uint64, p []byte) error {
	if uint64(16+len(p)) > w.fastMax || typ > MaxRecordType {
		return w.writeWords(typ, h0, h1, p)
	}
	if err := w.makeRoom(align(uint64(recordHeader+16+len(p)), recordAlign)); err != nil {
		return err // not holding, so nothing held to publish (Claim)
	}
	return w.TryWriteWords(typ, h0, h1, p) // fits at the tail now
}

// copySmall copies p to dst: a payload of 8 to 16 bytes (a short
// message's) with two overlapping loads and stores in line instead of a
// call to memmove, others with copy.
func copySmall(dst unsafe.Pointer, p []byte) {
	if n := len(p); n >= 8 && n <= 16 {
		*(*[8]byte)(dst) = [8]byte(p)
		*(*[8]byte)(unsafe.Add(dst, n-8)) = [8]byte(p[n-8:])
		return
	}
	copy(unsafe.Slice((*byte)(dst), len(p)), p)
}

// writeWords is TryWriteWords by way of Claim and Commit.
func (w *RecordWriter) writeWords(typ uint32, h0, h1 uint64, p []byte) error {
	if typ > MaxRecordType {
		return ErrInvalid
	}
	b, err := w.Claim(16 + len(p))
	if err != nil {
		return err
	}
	binary.LittleEndian.PutUint64(b, h0)
	binary.LittleEndian.PutUint64(b[8:], h1)
	copy(b[16:], p)
	return w.Commit(typ)
}

// Write is TryWrite that waits for room. While it waits it checks, every
// rings_check_spins polls, that the reader lives: it returns ErrPeerDead
// if the reader's process died and ErrClosed if the reader closed.
func (w *RecordWriter) Write(typ uint32, p []byte) error {
	s := newSpinner()
	for {
		err := w.TryWrite(typ, p)
		if err != ErrFull {
			return err
		}
		if s.spin() {
			if err := w.Check(); err != nil {
				return err
			}
		}
	}
}

// WantRoom tells the reader that this writer found the ring full and is
// about to wait for room, asleep: its RoomWanted reports true after it
// next frees space, and whoever reads then wakes the writer. It is an
// atomic add to a line the reader only reads, for a writer about to sleep,
// not for every claim that finds the ring full.
func (w *RecordWriter) WantRoom() { atomic.AddUint64(w.r.h.roomWanted(), 1) }

// Check reports the reader's state: ErrClosed if it closed, ErrPeerDead if
// its process died, nil otherwise (also before it attaches).
func (w *RecordWriter) Check() error {
	err := w.r.h.peerState(offConsumerSlot, flagConsumerClosed)
	if err != nil && err != ErrClosed && !w.dead {
		w.dead = true
		pvDead.Add(1)
	}
	return err
}

// Close detaches the writer, aborting an open claim. On a single-producer
// ring it tells the reader that no more records will come; on a
// many-to-one ring it frees the writer's slot.
func (w *RecordWriter) Close() error {
	if w.closed {
		return ErrClosed
	}
	w.Abort()
	w.Flush()
	w.closed = true
	w.setFast()
	if w.multi {
		w.r.h.freeSlot(w.slot, w.gen)
	} else {
		w.r.h.setFlag(flagProducerClosed)
	}
	return nil
}

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
	err := rd.r.h.peerState(offProducerSlot, flagProducerClosed)
	if err != nil && err != ErrClosed && !rd.dead {
		rd.dead = true
		pvDead.Add(1)
	}
	return err
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
