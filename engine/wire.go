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

	flagWithdrawn = 1 // cancelled: the message was withdrawn
	flagWritten   = 1 // written: the sender wrote its part

	// Field offsets, by packet. Every packet has its type at offType;
	// those with flags have them at offFlags. TestWireTable checks the
	// table above against these.
	offType  = 0
	offFlags = 1

	eagerCtx     = 4  // u32
	eagerTag     = 8  // i32
	eagerLen     = 12 // u32, the whole message
	eagerSreq    = 16 // u64
	eagerPayload = 24
	eagerHeader  = eagerPayload

	shortCtx     = 4  // u32
	shortTag     = 8  // i32
	shortID      = 12 // u32
	shortPayload = 16
	shortHeader  = shortPayload

	fragPayload = 8
	fragHeader  = fragPayload

	rtsCtx    = 4  // u32
	rtsTag    = 8  // i32
	rtsPad    = 12 // u32, zero
	rtsLen    = 16 // u64
	rtsSreq   = 24 // u64
	rtsAddr   = 32 // u64
	rtsHeader = rtsAddr + 8

	ctsSreq   = 8  // u64
	ctsRreq   = 16 // u64
	ctsHeader = ctsRreq + 8

	dataRreq    = 8  // u64
	dataOff     = 16 // u64
	dataPayload = 24
	dataHeader  = dataPayload

	finSreq   = 8 // u64
	finHeader = finSreq + 8

	cancelCtx    = 4  // u32
	cancelSreq   = 8  // u64
	cancelTag    = 16 // i32
	cancelID     = 20 // u32
	cancelHeader = cancelID + 4

	cancelledSreq = 8 // u64; the header is finHeader

	ctwSreq   = 8  // u64
	ctwRreq   = 16 // u64
	ctwOff    = 24 // u64
	ctwLen    = 32 // u64
	ctwAddr   = 40 // u64
	ctwHeader = ctwAddr + 8

	writtenRreq   = 8  // u64
	writtenLen    = 16 // u64
	writtenHeader = writtenLen + 8

	// putIDs' two words, the ids of cts, data, fin, cancel, cancelled,
	// ctw and written.
	idsPad = 4 // u32, zero
	idsA   = 8
	idsB   = 16

	// minPacket is the smallest packet capacity a link may offer: the
	// largest header of a packet with payload plus one byte of it, which
	// also holds ctw, the largest header of all.
	minPacket = rtsHeader + 8
)

// A ctw fits any link.
var _ [minPacket - ctwHeader]struct{}

// putIDs writes the id fields of cts, data, fin, cancel, cancelled, ctw
// and written: theirs must sit where its words go, and cancel's tag and
// short id make its second word.
var (
	_ [0]struct{} = [ctsSreq - idsA]struct{}{}
	_ [0]struct{} = [ctsRreq - idsB]struct{}{}
	_ [0]struct{} = [dataRreq - idsA]struct{}{}
	_ [0]struct{} = [finSreq - idsA]struct{}{}
	_ [0]struct{} = [cancelSreq - idsA]struct{}{}
	_ [0]struct{} = [cancelTag - idsB]struct{}{}
	_ [0]struct{} = [cancelID - idsB - 4]struct{}{}
	_ [0]struct{} = [cancelledSreq - idsA]struct{}{}
	_ [0]struct{} = [ctwSreq - idsA]struct{}{}
	_ [0]struct{} = [ctwRreq - idsB]struct{}{}
	_ [0]struct{} = [writtenRreq - idsA]struct{}{}
	_ [0]struct{} = [writtenLen - idsB]struct{}{}
	_ [0]struct{} = [shortCtx - 4]struct{}{}         // shortWords: the context in h0's high half
	_ [0]struct{} = [shortTag - 8]struct{}{}         // the tag in h1's low half
	_ [0]struct{} = [shortID - 12]struct{}{}         // the short id in h1's high half
	_ [0]struct{} = [shortHeader - 16]struct{}{}     // two words
	_ [0]struct{} = [eagerCtx - cancelCtx]struct{}{} // handle.go reads the context of either at one offset
	_ [0]struct{} = [eagerCtx - rtsCtx]struct{}{}
	_ [0]struct{} = [eagerTag - rtsTag]struct{}{}
)

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
	n := headerLen(p[offType])
	if n == 0 {
		return fmt.Errorf("%w: unknown packet type %d", ErrMalformed, p[offType])
	}
	if len(p) < n {
		return fmt.Errorf("%w: %d-byte packet of type %d, header needs %d", ErrMalformed, len(p), p[offType], n)
	}
	return nil
}

func u32(p []byte, off int) uint32      { return binary.LittleEndian.Uint32(p[off:]) }
func u64(p []byte, off int) uint64      { return binary.LittleEndian.Uint64(p[off:]) }
func put32(p []byte, off int, v uint32) { binary.LittleEndian.PutUint32(p[off:], v) }
func put64(p []byte, off int, v uint64) { binary.LittleEndian.PutUint64(p[off:], v) }

// putEager writes an eager header.
func putEager(p []byte, flags byte, ctx uint32, tag int32, length uint32, sreq uint64) {
	p[offType], p[offFlags], p[2], p[3] = pktEager, flags, 0, 0
	put32(p, eagerCtx, ctx)
	put32(p, eagerTag, uint32(tag))
	put32(p, eagerLen, length)
	put64(p, eagerSreq, sreq)
}

// putShort writes a short eager header.
func putShort(p []byte, ctx uint32, tag int32, sid uint32) {
	h0, h1 := shortWords(ctx, tag, sid)
	put64(p, offType, h0)  // type, three zero bytes, context
	put64(p, shortTag, h1) // tag, short id
}

// shortWords returns a short header as two little-endian words.
func shortWords(ctx uint32, tag int32, sid uint32) (h0, h1 uint64) {
	return pktShort | uint64(ctx)<<32, uint64(uint32(tag)) | uint64(sid)<<32
}

// putRTS writes a rendezvous announcement.
func putRTS(p []byte, flags byte, ctx uint32, tag int32, length, sreq, addr uint64) {
	p[offType], p[offFlags], p[2], p[3] = pktRTS, flags, 0, 0
	put32(p, rtsCtx, ctx)
	put32(p, rtsTag, uint32(tag))
	put32(p, rtsPad, 0)
	put64(p, rtsLen, length)
	put64(p, rtsSreq, sreq)
	put64(p, rtsAddr, addr)
}

// putIDs writes a control packet of one or two request ids (cts, data,
// fin, cancel, cancelled).
func putIDs(p []byte, typ, flags byte, a, b uint64) {
	p[offType], p[offFlags], p[2], p[3] = typ, flags, 0, 0
	put32(p, idsPad, 0)
	put64(p, idsA, a)
	if len(p) >= idsB+8 {
		put64(p, idsB, b)
	}
}
