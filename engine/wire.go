package engine

import (
	"encoding/binary"
	"fmt"
)

// Packet layouts. Every packet starts with a one-byte type; all integers
// are little-endian at fixed offsets. The type decides the header length,
// and a packet shorter than its header is malformed and dropped.
//
//	eager  0 type, 1 flags, 4 context u32, 8 tag i32, 12 length u32,
//	       16 sender request u64 (synchronous sends only), 24 payload...
//	       The first packet of an eager message; length is the whole
//	       message, of which this packet carries the first part.
//	short  0 type, 4 context u32, 8 tag i32, 12 short id u32,
//	       16 payload...: a whole standard-mode eager message in one
//	       packet, its length the payload's. The short id names the
//	       send for a cancel: a count of the sender's short packets to
//	       this receiver, never 0 (0: the send cannot be cancelled).
//	       Eight bytes less than eager: an 8-byte message fills 32
//	       bytes of a record ring, two to a cache line.
//	frag   0 type, 8 payload...: the next part of the eager message the
//	       same peer sent last; packets of one message are contiguous.
//	rts    0 type, 1 flags, 4 context u32, 8 tag i32, 16 length u64,
//	       24 sender request u64, 32 sender address u64: a rendezvous
//	       message announced; the data stays in the sender's buffer.
//	cts    0 type, 1 flags, 8 sender request u64, 16 receiver request
//	       u64: the receiver matched an rts and asks for the data in
//	       packets, or with flagBulk (1) over the network's bulk lane.
//	data   0 type, 8 receiver request u64, 16 offset u64, 24 payload...
//	fin    0 type, 8 sender request u64: the receiver has the whole
//	       message (rendezvous) or has matched it (synchronous eager).
//	cancel 0 type, 4 context u32, 8 sender request u64, 16 tag i32,
//	       20 short id u32: the sender asks to withdraw an unmatched
//	       message, named by its request (eager, rts) or its short id
//	       (short; 0 if none); the answer names the request.
//	cancelled 0 type, 1 flags (1: withdrawn), 8 sender request u64.
//	ctw    0 type, 8 sender request u64, 16 receiver request u64,
//	       24 offset u64, 32 length u64, 40 receiver address u64: the
//	       receiver matched an rts and splits the copy (engine_rndv_split_min):
//	       it reads the part before offset itself and asks the sender to
//	       write length bytes from offset on to its address.
//	written 0 type, 1 flags (1: written), 8 receiver request u64,
//	       16 length u64: the sender's answer to ctw; if it could not
//	       write, the receiver gets that part another way.
const (
	pktEager     = 1
	pktFrag      = 2
	pktRTS       = 3
	pktCTS       = 4
	pktData      = 5
	pktFin       = 6
	pktCancel    = 7
	pktCancelled = 8
	pktShort     = 9
	pktCTW       = 10
	pktWritten   = 11

	flagSync = 1 << 0 // eager or rts: the sender wants fin once matched
	flagBulk = 1 << 0 // cts: send the data over the bulk lane (netbulk.go)

	eagerHeader   = 24
	shortHeader   = 16
	fragHeader    = 8
	rtsHeader     = 40
	ctsHeader     = 24
	dataHeader    = 24
	finHeader     = 16
	cancelHeader  = 24
	ctwHeader     = 48
	writtenHeader = 24

	// minPacket is the smallest packet capacity a link may offer: the
	// largest header of a packet with payload plus one byte of it, which
	// also holds ctw, the largest header of all.
	minPacket = rtsHeader + 8
)

// A ctw fits any link.
var _ [minPacket - ctwHeader]struct{}

// headerLen returns the header length of a packet type, 0 if the type is
// unknown.
func headerLen(typ byte) int {
	switch typ {
	case pktEager:
		return eagerHeader
	case pktShort:
		return shortHeader
	case pktFrag:
		return fragHeader
	case pktRTS:
		return rtsHeader
	case pktCTS:
		return ctsHeader
	case pktData:
		return dataHeader
	case pktCancel:
		return cancelHeader
	case pktCTW:
		return ctwHeader
	case pktWritten:
		return writtenHeader
	case pktFin, pktCancelled:
		return finHeader
	}
	return 0
}

// checkPacket validates a packet's type and length before any field is read.
func checkPacket(p []byte) error {
	if len(p) == 0 {
		return fmt.Errorf("%w: empty packet", ErrMalformed)
	}
	n := headerLen(p[0])
	if n == 0 {
		return fmt.Errorf("%w: unknown packet type %d", ErrMalformed, p[0])
	}
	if len(p) < n {
		return fmt.Errorf("%w: %d-byte packet of type %d, header needs %d", ErrMalformed, len(p), p[0], n)
	}
	return nil
}

func u32(p []byte, off int) uint32      { return binary.LittleEndian.Uint32(p[off:]) }
func u64(p []byte, off int) uint64      { return binary.LittleEndian.Uint64(p[off:]) }
func put32(p []byte, off int, v uint32) { binary.LittleEndian.PutUint32(p[off:], v) }
func put64(p []byte, off int, v uint64) { binary.LittleEndian.PutUint64(p[off:], v) }

// putEager writes an eager header.
func putEager(p []byte, flags byte, ctx uint32, tag int32, length uint32, sreq uint64) {
	p[0], p[1], p[2], p[3] = pktEager, flags, 0, 0
	put32(p, 4, ctx)
	put32(p, 8, uint32(tag))
	put32(p, 12, length)
	put64(p, 16, sreq)
}

// putShort writes a short eager header.
func putShort(p []byte, ctx uint32, tag int32, sid uint32) {
	h0, h1 := shortWords(ctx, tag, sid)
	put64(p, 0, h0)
	put64(p, 8, h1)
}

// shortWords returns a short header as two little-endian words.
func shortWords(ctx uint32, tag int32, sid uint32) (h0, h1 uint64) {
	return pktShort | uint64(ctx)<<32, uint64(uint32(tag)) | uint64(sid)<<32
}

// putRTS writes a rendezvous announcement.
func putRTS(p []byte, flags byte, ctx uint32, tag int32, length, sreq, addr uint64) {
	p[0], p[1], p[2], p[3] = pktRTS, flags, 0, 0
	put32(p, 4, ctx)
	put32(p, 8, uint32(tag))
	put32(p, 12, 0)
	put64(p, 16, length)
	put64(p, 24, sreq)
	put64(p, 32, addr)
}

// putIDs writes a control packet of one or two request ids (cts, data,
// fin, cancel, cancelled).
func putIDs(p []byte, typ, flags byte, a, b uint64) {
	p[0], p[1], p[2], p[3] = typ, flags, 0, 0
	put32(p, 4, 0)
	put64(p, 8, a)
	if len(p) >= 24 {
		put64(p, 16, b)
	}
}
