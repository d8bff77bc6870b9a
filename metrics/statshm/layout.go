package statshm

import (
	"bytes"
	"strings"
	"sync/atomic"
	"unsafe"
)

// The file's layout, every offset in bytes from the start of the file.
// Integers are in the host's byte order (a writer and its readers share a
// host); every integer field is 8 bytes wide and 8-byte aligned, so that
// each is read and written whole with one atomic operation. Strings are
// UTF-8, padded with NUL bytes, and hold no NUL.
//
//	header   [0, headerSize)
//	descs    [headerSize, headerSize + capacity*descSize)   one per variable, append-only
//	values   [valuesOff, valuesOff + capacity*8)            one int64 per variable
//	states   [statesOff, statesOff + capacity*statesLen)    one per variable: a state variable's names
//
// The header's first line holds what never changes after the file is
// made; the second line what the publisher rewrites at every interval, on
// a cache line of its own.
//
// Compatibility: a reader refuses a version it does not know
// (ErrVersion). Within a version a field may only be added where every
// older file of that version holds zeros (bytes no field used), so that a
// reader of either age reads the other's files: an older reader skips the
// new field, a newer one reads an older file's as zero or "". The session
// name (offSession) and the states region (offStates) came that way: an
// older file has no states region (offStates is 0, the file ends after
// the values), and an older reader maps no more than the values.
const (
	magic   = "TACHSTAT" // the first 8 bytes of every file (offMagic)
	version = 1          // the layout described here

	offMagic       = 0   // [8]byte magic
	offVersion     = 8   // uint64 version
	offHeaderSize  = 16  // uint64 headerSize
	offDescSize    = 24  // uint64 descSize
	offCapacity    = 32  // uint64 variables the table holds
	offPID         = 40  // uint64 the publishing process's id
	offProcStart   = 48  // uint64 its start time, clock ticks since boot (/proc/PID/stat field 22); 0 unknown
	offPIDNS       = 56  // uint64 inode of its pid namespace (/proc/self/ns/pid); 0 unknown
	offRank        = 64  // int64 world rank, -1 unknown
	offSize        = 72  // int64 ranks in the job, 0 unknown
	offStarted     = 80  // int64 when the file was made, Unix nanoseconds
	offInterval    = 88  // int64 the publishing interval, nanoseconds
	offSecPerCount = 96  // float64 bits: seconds per clock count, for timer variables
	offSession     = 104 // [sessionLen]byte the name of the session whose values these are (mpi.WithName); "" for a process's
	offSeq         = 128 // uint64 sequence: odd while the publisher writes, even between
	offCount       = 136 // uint64 descriptors published, at most capacity
	offUpdated     = 144 // int64 the last publication, Unix nanoseconds
	offDropped     = 152 // uint64 variables that did not fit (table full, name too long)
	offStates      = 160 // uint64 the offset of the states region (statesOff); 0 for a file without one
	offJob         = 192 // [jobLen]byte the job's name: its segment, or its PMI name space
	offHost        = 320 // [hostLen]byte the host's name
	offCommand     = 384 // [commandLen]byte the program's name
	headerSize     = 512

	jobLen     = 128
	hostLen    = 64
	commandLen = 128
	sessionLen = 24

	// A descriptor: the variable's name, unit and class.
	descName  = 0   // [nameLen]byte
	descUnit  = 88  // [unitLen]byte
	descClass = 120 // int64 pvar.Class
	descSize  = 128
	nameLen   = 88
	unitLen   = 32

	// A state variable's slot in the states region: the names of its
	// values (pvar.Var.States) in order, each ended by a NUL, as many
	// whole names as fit; zeros for a variable of another class.
	statesLen = 128

	// maxCapacity bounds the table a reader accepts, so that a corrupt
	// header cannot make it map or allocate without bound.
	maxCapacity = 1 << 20
)

// fileSize returns the size of a file whose table holds capacity variables.
func fileSize(capacity int) int { return statesOff(capacity) + capacity*statesLen }

// statesOff returns the offset of the states region of a file whose table
// holds capacity variables: where an older file, which has none, ends.
func statesOff(capacity int) int { return valuesOff(capacity) + capacity*8 }

// putStates writes the names of a state variable's values into the slot
// at off, NUL-ended, as many whole names as fit; an empty name, or one
// holding a NUL, ends the list there (it could not be read back).
func putStates(mem []byte, off int, names []string) {
	slot := mem[off : off+statesLen]
	clear(slot)
	n := 0
	for _, s := range names {
		if s == "" || strings.IndexByte(s, 0) >= 0 || n+len(s)+1 > statesLen {
			break
		}
		n += copy(slot[n:], s) + 1
	}
}

// getStates reads the names putStates wrote at off.
func getStates(mem []byte, off int) []string {
	slot := mem[off : off+statesLen]
	var names []string
	for len(slot) > 0 && slot[0] != 0 {
		i := bytes.IndexByte(slot, 0)
		if i < 0 { // no NUL: not putStates's
			break
		}
		names = append(names, strings.ToValidUTF8(string(slot[:i]), "\uFFFD"))
		slot = slot[i+1:]
	}
	return names
}

// valuesOff returns the offset of the first value of a file whose table
// holds capacity variables.
func valuesOff(capacity int) int { return headerSize + capacity*descSize }

// word returns the 8-byte field at off of mem, for atomic access. off is a
// multiple of 8 and mem is page-aligned (a mapping), so the field is
// aligned.
func word(mem []byte, off int) *uint64 {
	_ = mem[off+7] // bounds check
	return (*uint64)(unsafe.Pointer(&mem[off]))
}

func load(mem []byte, off int) uint64     { return atomic.LoadUint64(word(mem, off)) }
func store(mem []byte, off int, v uint64) { atomic.StoreUint64(word(mem, off), v) }

// putString writes s into the n-byte field at off, NUL-padded, and
// reports whether it fit whole (it is cut at a rune boundary if not).
func putString(mem []byte, off, n int, s string) bool {
	fits := len(s) <= n
	if !fits {
		s = s[:n]
		for len(s) > 0 && !validEnd(s) {
			s = s[:len(s)-1]
		}
	}
	clear(mem[off : off+n])
	copy(mem[off:off+n], s)
	return fits
}

// validEnd reports whether s does not end inside a multi-byte rune.
func validEnd(s string) bool {
	for i := len(s) - 1; i >= 0 && i >= len(s)-4; i-- {
		c := s[i]
		if c < 0x80 {
			return true
		}
		if c >= 0xC0 { // a leading byte: its rune needs this many bytes
			need := 2
			if c >= 0xE0 {
				need = 3
			}
			if c >= 0xF0 {
				need = 4
			}
			return len(s)-i == need
		}
	}
	return true
}

// getString reads the n-byte string field at off: up to its first NUL.
func getString(mem []byte, off, n int) string {
	b := mem[off : off+n]
	for i, c := range b {
		if c == 0 {
			b = b[:i]
			break
		}
	}
	return string(b)
}
