package rings

import (
	"sync/atomic"

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
		if err := r.h.attach(offProducerSlot, flagProducerClosed); err != nil {
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
	if err := r.h.attach(offConsumerSlot, flagConsumerClosed); err != nil {
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
