package rings

import (
	"strconv"
	"unsafe"
)

// Every offset and size of the shared layout is here. All words are
// little-endian on the machines Tachyon runs on and are read and written in
// place: the layout holds no Go pointers, only integers.

// CacheLine is the unit of layout: a field written by one side never shares
// a line with a field written by the other.
const CacheLine = 64

// Ring header, at the start of every ring's memory:
//
//	line 0   configuration, written once before the ring is published
//	         0 magic u32, 4 kind u32, 8 version u32, 12 cell size u32,
//	         16 capacity u64 (cells or bytes), 24 max payload u32,
//	         28 header size u32 (offset of the data area)
//	line 1   peers: 0 flags u32 (closed bits), 8 requests for room u64
//	         (raised by a producer about to wait for room), 16 consumer slot,
//	         32 producer slot (cell and one-to-one record rings),
//	         48 slots taken over from dead producers u64 and 56 the pid
//	         of the last of them u64 (many-to-one rings)
//	line 2   tail u64: written by the producer(s)
//	line 3   head u64: written by the consumer
//	lines 4+ many-to-one rings: MaxProducers producer slots
//	data     cells or records, from the header size on
//
// A slot is two words: {pid u32 | generation u24 << 32 | ready << 63,
// process start time u64}.
const (
	ringMagic   = 0x47525954 // "TYRG"
	ringVersion = 1

	offMagic      = 0
	offKind       = 4
	offVersion    = 8
	offCellSize   = 12
	offCapacity   = 16
	offMaxPayload = 24
	offHdrSize    = 28

	offFlags        = 1 * CacheLine
	offRoomWanted   = 1*CacheLine + 8
	offConsumerSlot = 1*CacheLine + 16
	offProducerSlot = 1*CacheLine + 32
	offReclaimed    = 1*CacheLine + 48
	offReclaimedPID = 1*CacheLine + 56
	offTail         = 2 * CacheLine
	offHead         = 3 * CacheLine
	offSlots        = 4 * CacheLine

	slotSize = 16

	ringHeaderSize = 4 * CacheLine
	mpscHeaderSize = offSlots + MaxProducers*slotSize
)

// Closed bits in the flags word.
const (
	flagProducerClosed = 1 << 0
	flagConsumerClosed = 1 << 1
)

// MaxProducers is how many writers a many-to-one ring holds attached at
// once.
const MaxProducers = 64

// Cells: an 8-byte header word {length u32, stamp u32 << 32} followed by
// the payload. The stamp is the cell's position plus one, truncated to 32
// bits: it tells a filled cell of this lap from a stale one.
const (
	cellHeader  = 8
	minCellSize = CacheLine
	maxCellSize = 1 << 16
	maxCells    = 1 << 30
)

// Records: an 8-byte header word {length i32, type u32 << 32} followed by
// the payload, each record starting on an 8-byte boundary. The length
// counts the header; zero means not yet written, negative (many-to-one
// rings) claimed but not yet committed, in which case the upper word holds
// the claimer's slot and generation instead of a type.
const (
	recordHeader   = 8
	recordAlign    = 8
	minRecordBytes = 1 << 10
	maxRecordBytes = 1 << 30 // NextReady relies on maxRecordBytes/8 < 1<<32-recordHeader
	typePadding    = ^uint32(0)
)

// MaxRecordType is the largest record type a writer may use; the one above
// it marks padding.
const MaxRecordType = typePadding - 1

// Segment header, the first SegmentHeaderSize bytes of a segment:
//
//	0 magic [8]byte "TACHYSEG", 8 version u32, 12 header size u32,
//	16 segment size u64, 24 creator pid u32, 32 creator start time u64,
//	40 region count u32 (published last), 44 max regions u32,
//	64 region table: maxRegions entries of 32 bytes
//	   {kind u32, 4 reserved u32, 8 offset u64, 16 size u64, 24 reserved u64}
const (
	// SegmentHeaderSize is the bytes a segment reserves for its header
	// and region table, in front of the first region.
	SegmentHeaderSize = 4096

	segMagic        = "TACHYSEG"
	segVersion      = 1
	offSegMagic     = 0
	offSegVersion   = 8
	offSegHdrSize   = 12
	offSegSize      = 16
	offSegPID       = 24
	offSegStart     = 32
	offSegCount     = 40
	offSegMax       = 44
	offSegTable     = 64
	regionEntrySize = 32
	maxRegions      = (SegmentHeaderSize - offSegTable) / regionEntrySize
)

// Kind says what a region of a segment, or a ring header, holds.
type Kind uint32

// Kinds of regions and rings.
const (
	KindCellRing   Kind = 1 // single-producer cell ring (NewCellRing)
	KindRecordRing Kind = 2 // single-producer record ring (NewRecordRing)
	KindMPSCRing   Kind = 3 // many-to-one record ring (NewMPSCRing)
	KindRaw        Kind = 4 // plain shared bytes (Segment.NewRegion)
)

func (k Kind) String() string {
	switch k {
	case KindCellRing:
		return "cell ring"
	case KindRecordRing:
		return "record ring"
	case KindMPSCRing:
		return "many-to-one ring"
	case KindRaw:
		return "raw region"
	}
	return "Kind(" + strconv.FormatUint(uint64(k), 10) + ")"
}

// AlignedBytes returns n zeroed bytes starting on a cache-line boundary:
// memory for a ring used between goroutines of one process. Rings shared
// between processes live in a Segment instead.
func AlignedBytes(n int) []byte {
	if n <= 0 {
		return nil
	}
	b := make([]byte, n+CacheLine)
	off := int(-uintptr(unsafe.Pointer(&b[0])) & (CacheLine - 1))
	return b[off : off+n : off+n]
}

func align(n, a uint64) uint64 { return (n + a - 1) &^ (a - 1) }

func isPow2(n uint64) bool { return n != 0 && n&(n-1) == 0 }

func aligned(mem []byte) bool {
	return len(mem) > 0 && uintptr(unsafe.Pointer(&mem[0]))&(CacheLine-1) == 0
}

// word64 and word32 point at a field of shared memory.
func word64(base unsafe.Pointer, off uintptr) *uint64 { return (*uint64)(unsafe.Add(base, off)) }
func word32(base unsafe.Pointer, off uintptr) *uint32 { return (*uint32)(unsafe.Add(base, off)) }
