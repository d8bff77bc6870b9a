package rings

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"github.com/tachyon-hpc/tachyon/asm"
)

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
// than the CPU can have in flight only queue up, and the rendezvous's 32
// KiB packets went slower prefetched whole (docs/rings.md, Record ring).
const maxWholePrefetch = 16 << 10

// prefetchRecord asks for write ownership of every line of the n bytes
// claimed at idx (rings_prefetch_whole_record_bytes), for a record
// written outside a stream (SetPrefetch(false)): the lines were last read
// and zeroed on the reader's core, and with all of them requested at once
// the copy into the record waits for one round of transfers instead of a
// line at a time as the store buffer fills. Far apart, it makes 2-4 KiB
// latency shorter; near, 1-8 KiB latency longer (docs/rings.md). In a
// stream it cost near placements much of the 2-4 KiB message rate, and a
// 1 KiB record waited for alone goes faster written in line: hence
// streams and records below 2 KiB go without.
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
	return w.r.h.checkPeer(offConsumerSlot, flagConsumerClosed, &w.dead)
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

// Used returns the bytes of the ring published (committed and flushed) and
// not yet released by the reader, headers and padding included, as seen
// at the moment of the call: the ring's occupancy. It loads only the
// ring's shared indexes, so any goroutine may call it while the writer
// writes, as long as the ring stays mapped.
func (w *RecordWriter) Used() int {
	t := asm.LoadAcquire64(w.tailp)
	h := asm.LoadAcquire64(w.headp)
	if t < h || t-h > w.capacity {
		return 0
	}
	return int(t - h)
}
