package engine

import (
	"errors"
	"fmt"

	"github.com/tachyon-hpc/tachyon/progress"
	"github.com/tachyon-hpc/tachyon/rings"
)

// ringLink is a Link over the producer side of a cell ring: one packet
// per cell, whatever its size.
type ringLink struct {
	p    *rings.CellProducer
	max  int
	bell *progress.Doorbell // the peer's
}

func (l *ringLink) Reserve(n int) []byte {
	if n > l.max || l.p.Claim(1) == 0 {
		return nil
	}
	return l.p.Slot(0)[:n]
}

func (l *ringLink) Commit(n int) {
	l.p.Commit(0, n)
	l.p.Publish(1)
}

func (l *ringLink) Put(h0, h1 uint64, payload []byte) bool { return putWords(l, h0, h1, payload) }

// putWords is Link.Put by way of Reserve and Commit.
func putWords(l Link, h0, h1 uint64, payload []byte) bool {
	n := shortHeader + len(payload)
	b := l.Reserve(n)
	if b == nil {
		return false
	}
	put64(b, offType, h0)  // type, three zero bytes, context
	put64(b, shortTag, h1) // tag, short id
	copy(b[shortHeader:], payload)
	l.Commit(n)
	return true
}

func (l *ringLink) MaxPacket() int { return l.max }

func (l *ringLink) Check() error { return l.p.Check() }

func (l *ringLink) Wake() {
	if l.bell != nil {
		l.bell.RingFenced()
	}
}

func (l *ringLink) WantRoom() { l.p.WantRoom() }

// ringInbox is an Inbox over the consumer side of a cell ring.
type ringInbox struct {
	c *rings.CellConsumer
}

func (in *ringInbox) Peek(max int) (int, error) { return peekOpen(in.c.Peek(max)) }

func (in *ringInbox) Packet(i int) []byte { return in.c.Message(i) }
func (in *ringInbox) Release(k int)       { in.c.Release(k) }
func (in *ringInbox) Check() error        { return in.c.Check() }
func (in *ringInbox) RoomWanted() bool    { return in.c.RoomWanted() }

// recordLink is a Link over the writer side of a single-producer record
// ring: packets of any size up to a record's largest payload, packed one
// after another, so that small packets share cache lines and a large
// eager message travels whole.
type recordLink struct {
	_    cachePad // last is written at every send: no line shared with another rank's link
	w    *rings.RecordWriter
	max  int
	bell *progress.Doorbell // the peer's

	// The writer prefetches the next line only for a packet that follows
	// another with no poll of the endpoint in between: a stream. A packet
	// sent after the endpoint polled (waiting for an answer, as in a
	// ping-pong) goes out without: there the prefetch's request reaches
	// the reader's core ahead of the committed line and the message
	// arrives later, where in a window of sends it raises the message
	// rate (docs/rings.md, Record ring).
	polls    *uint64 // the endpoint's count of polls (nil: always prefetch)
	last     uint64  // *polls at the previous Reserve
	streamed bool    // the previous packet followed another with no poll between

	// A packet that is not part of a stream pads the rest of its line
	// when the next packet of its size would not fit there
	// (engine_line_padding; rings.RecordWriter.SetLinePadding): a
	// ping-pong's reader then fetches one line per packet rather than
	// two for every packet that spans a line boundary, which shortens
	// a ping-pong's one-way latency (docs/engine.md, the message path's
	// rules); in a stream it would cost density, so streams stay packed.
	pad bool
	_   cachePad
}

// recordType marks engine packets in a record ring (the packet's own first
// byte says what it is).
const recordType = 1

func (l *recordLink) Reserve(n int) []byte {
	l.setStream()
	b, err := l.w.Claim(n)
	if err != nil {
		return nil // full, closed, or larger than a record
	}
	return b
}

// setStream sets the writer's prefetch and line padding for a packet
// that is (or is not) part of a stream.
func (l *recordLink) setStream() {
	if l.polls != nil && (*l.polls != l.last || !l.streamed) {
		l.changeStream() // else a stream going on: all is set already
	}
}

// changeStream is setStream past its usual case, out of line so that
// setStream stays small enough to go in line without a profile.
//
//go:noinline
func (l *recordLink) changeStream() {
	p := *l.polls
	stream := p == l.last
	l.w.SetPrefetch(stream)
	l.w.SetLinePadding(l.pad && !stream)
	l.last, l.streamed = p, stream
}

// warm readies the lines the next packets will be written to, at an empty
// poll (polls is the endpoint's count) within engine_warm_polls of the
// last packet of a stream (rings.RecordWriter.Warm), and returns how many
// it asked for. A window of sends waits for its answer there, and the next
// window starts without waiting for lines, which shortens the sender's
// window and raises the 16-128 B message rates (64 lines: the whole
// window of those sizes; figures in docs/engine.md).
// Every poll asks again, since the reader's cache takes lines back until
// it is done. A ping-pong's packets are no stream and never warm: there
// the prefetches would make its one-way latency longer.
func (l *recordLink) warm(polls uint64) int {
	if !l.streamed {
		return 0
	}
	if polls-l.last > uint64(warmPolls.Get()) {
		l.streamed = false // long enough: the next packet decides again
		return 0
	}
	return l.w.Warm(int(warmLines.Get()))
}

func (l *recordLink) Commit(n int) { l.w.CommitLen(recordType, n) }

func (l *recordLink) Put(h0, h1 uint64, payload []byte) bool {
	l.setStream()
	return l.w.TryWriteWords(recordType, h0, h1, payload) == nil
}

func (l *recordLink) MaxPacket() int { return l.max }

func (l *recordLink) Check() error { return l.w.Check() }

func (l *recordLink) Wake() {
	if l.bell != nil {
		l.bell.RingFenced()
	}
}

func (l *recordLink) WantRoom() { l.w.WantRoom() }

func (l *recordLink) close() { l.w.Close() }

// recordInbox is an Inbox over the reader side of a record ring.
type recordInbox struct {
	r *rings.RecordReader
}

func (in *recordInbox) Peek(max int) (int, error) { return peekOpen(in.r.Peek(max)) }

// peekOpen is what a ring's Peek returned, less rings.ErrClosed: an
// Inbox's Peek reports only malformed packets, and Check reports a ring
// that closed.
func peekOpen(n int, err error) (int, error) {
	if err != nil && errors.Is(err, rings.ErrClosed) {
		err = nil
	}
	return n, err
}

func (in *recordInbox) Packet(i int) []byte { return in.r.Record(i) }
func (in *recordInbox) Release(k int)       { in.r.Release(k) }
func (in *recordInbox) Check() error        { return in.r.Check() }
func (in *recordInbox) RoomWanted() bool    { return in.r.RoomWanted() }
func (in *recordInbox) close()              { in.r.Close() }

func (l *ringLink) close()   { l.p.Close() }
func (in *ringInbox) close() { in.c.Close() }

// Ring kinds of the engine_rings control variable.
const (
	ringsRecords = "records"
	ringsCells   = "cells"
)

// pairRing is the ring that carries one rank's packets to another, as
// the engine_rings control variable picks it.
type pairRing struct {
	cell   *rings.CellRing
	record *rings.RecordRing
}

// pairRingSize returns the bytes one pair's ring takes.
func pairRingSize() (int, error) {
	if ringKind.Get() == ringsCells {
		cells, size, err := ringGeometry()
		if err != nil {
			return 0, err
		}
		return rings.CellRingSize(cells, size), nil
	}
	n := int(ringBytes.Get())
	if n&(n-1) != 0 {
		return 0, fmt.Errorf("%w: engine_ring_bytes (%d) must be a power of two", ErrConfig, n)
	}
	return rings.RecordRingSize(n), nil
}

// newPairRing makes a pair's ring in mem, which holds pairRingSize bytes.
func newPairRing(mem []byte) (pairRing, error) {
	if ringKind.Get() == ringsCells {
		cells, size, err := ringGeometry()
		if err != nil {
			return pairRing{}, err
		}
		r, err := rings.NewCellRing(mem, cells, size)
		return pairRing{cell: r}, err
	}
	r, err := rings.NewRecordRing(mem, int(ringBytes.Get()))
	return pairRing{record: r}, err
}

// closer is a link or inbox end that can be closed.
type closer interface{ close() }

// link attaches as the ring's sender; bell is the receiver's doorbell
// (nil for a rank's ring to itself).
func (r pairRing) link(bell *progress.Doorbell) (Link, closer, error) {
	if r.record != nil {
		w, err := r.record.Writer()
		if err != nil {
			return nil, nil, err
		}
		l := &recordLink{w: w, max: r.record.MaxPayload(), bell: bell, pad: linePad.Get()}
		return l, l, nil
	}
	p, err := r.cell.Producer()
	if err != nil {
		return nil, nil, err
	}
	l := &ringLink{p: p, max: r.cell.MaxPayload(), bell: bell}
	return l, l, nil
}

// inbox attaches as the ring's receiver.
func (r pairRing) inbox() (Inbox, closer, error) {
	if r.record != nil {
		rd, err := r.record.Reader()
		if err != nil {
			return nil, nil, err
		}
		in := &recordInbox{r: rd}
		return in, in, nil
	}
	c, err := r.cell.Consumer()
	if err != nil {
		return nil, nil, err
	}
	in := &ringInbox{c: c}
	return in, in, nil
}

// ringGeometry returns the cell count and size the control variables ask
// for, checked.
func ringGeometry() (cells, size int, err error) {
	cells, size = int(cellCount.Get()), int(cellSize.Get())
	if cells&(cells-1) != 0 || size&(size-1) != 0 {
		return 0, 0, fmt.Errorf("%w: engine_cells (%d) and engine_cell_size (%d) must be powers of two", ErrConfig, cells, size)
	}
	return cells, size, nil
}
