package rings

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/tachyon-hpc/tachyon/asm"
)

// Segment is a shared-memory segment: a file under rings_shm_dir (named
// segments, which any process can open) or a memfd (handed to children as
// an inherited file). Its header records the creator and a table of
// regions, each holding one ring or plain bytes; the creator carves them
// with the New methods and other processes look them up by index.
//
// Every process that has a segment open holds a shared flock on it, so a
// named segment that no process holds any more is stale: RemoveStale and
// CreateSegment remove such leftovers of dead jobs.
//
// Rings taken from a segment must not be used after its Close, which unmaps
// the memory.
type Segment struct {
	mu      sync.Mutex // orders region creation and Close; never on a message path
	name    string     // segment name, "" for an unnamed memfd
	path    string     // file path of a named segment
	fd      int
	dev     uint64 // identity of the file, for Remove
	ino     uint64
	mem     []byte
	creator bool
	next    uint64 // creator: first free byte after the last region
	closed  bool
}

// SegmentSize returns the size of a segment whose regions have the given
// sizes: the header plus each region rounded up to a cache line.
func SegmentSize(regions ...int) int {
	n := SegmentHeaderSize
	for _, r := range regions {
		n += int(align(uint64(max(r, 0)), CacheLine))
	}
	return n
}

// Name returns the segment's name ("" for a memfd segment opened from an
// inherited file).
func (s *Segment) Name() string { return s.name }

// Size returns the segment's size in bytes, header included.
func (s *Segment) Size() int { return len(s.mem) }

// CreatorPID returns the pid of the process that created the segment.
func (s *Segment) CreatorPID() int {
	if len(s.mem) < SegmentHeaderSize {
		return 0
	}
	return int(binary.LittleEndian.Uint32(s.mem[offSegPID:]))
}

// Regions returns how many regions the creator has published so far.
func (s *Segment) Regions() int {
	if len(s.mem) < SegmentHeaderSize {
		return 0
	}
	return int(asm.LoadAcquire32(s.count()))
}

func (s *Segment) count() *uint32 { return (*uint32)(unsafe.Pointer(&s.mem[offSegCount])) }

// initHeader writes the header of a segment this process creates.
func (s *Segment) initHeader(pid int, start uint64) {
	b := s.mem
	binary.LittleEndian.PutUint32(b[offSegVersion:], segVersion)
	binary.LittleEndian.PutUint32(b[offSegHdrSize:], SegmentHeaderSize)
	binary.LittleEndian.PutUint64(b[offSegSize:], uint64(len(b)))
	binary.LittleEndian.PutUint32(b[offSegPID:], uint32(pid))
	binary.LittleEndian.PutUint64(b[offSegStart:], start)
	binary.LittleEndian.PutUint32(b[offSegMax:], maxRegions)
	copy(b[offSegMagic:], segMagic)
	s.next = SegmentHeaderSize
	s.creator = true
}

// region is one entry of the region table.
type region struct {
	kind       Kind
	off, size  uint64
	entryIndex int
}

func readRegion(b []byte, i int) region {
	e := b[offSegTable+i*regionEntrySize:]
	return region{kind: Kind(binary.LittleEndian.Uint32(e)),
		off: binary.LittleEndian.Uint64(e[8:]), size: binary.LittleEndian.Uint64(e[16:]), entryIndex: i}
}

// check validates a region against a segment of size bytes.
func (r region) check(size uint64) error {
	switch {
	case r.kind < KindCellRing || r.kind > KindRaw:
		return fmt.Errorf("%w: region %d has unknown kind %d", ErrBadSegment, r.entryIndex, uint32(r.kind))
	case r.off < SegmentHeaderSize || r.off%CacheLine != 0:
		return fmt.Errorf("%w: region %d at offset %d is not a cache-line offset past the header", ErrBadSegment, r.entryIndex, r.off)
	case r.size == 0 || r.off > size || r.size > size-r.off:
		return fmt.Errorf("%w: region %d [%d, +%d) is outside the %d-byte segment", ErrBadSegment, r.entryIndex, r.off, r.size, size)
	}
	return nil
}

// parseSegmentHeader validates the header and region table of a segment
// whose file has fileSize bytes; b is the mapped segment (at least its
// header). Every field read from a peer is checked before it is used.
func parseSegmentHeader(b []byte, fileSize int64) error {
	if fileSize < SegmentHeaderSize || len(b) < SegmentHeaderSize {
		return fmt.Errorf("%w: %d bytes is smaller than a segment header", ErrBadSegment, fileSize)
	}
	if string(b[offSegMagic:offSegMagic+len(segMagic)]) != segMagic {
		return fmt.Errorf("%w: bad magic %q", ErrBadSegment, b[offSegMagic:offSegMagic+len(segMagic)])
	}
	if v := binary.LittleEndian.Uint32(b[offSegVersion:]); v != segVersion {
		return fmt.Errorf("%w: segment version %d, this build reads version %d", ErrBadSegment, v, segVersion)
	}
	if hs := binary.LittleEndian.Uint32(b[offSegHdrSize:]); hs != SegmentHeaderSize {
		return fmt.Errorf("%w: header size %d, want %d", ErrBadSegment, hs, SegmentHeaderSize)
	}
	size := binary.LittleEndian.Uint64(b[offSegSize:])
	if size != uint64(fileSize) {
		return fmt.Errorf("%w: header says %d bytes, file has %d (truncated or resized)", ErrBadSegment, size, fileSize)
	}
	if size > uint64(maxSegment.Get()) {
		return fmt.Errorf("%w: %d bytes exceeds rings_max_segment_size", ErrBadSegment, size)
	}
	if pid := binary.LittleEndian.Uint32(b[offSegPID:]); pid == 0 || pid > 1<<30 {
		return fmt.Errorf("%w: creator pid %d", ErrBadSegment, pid)
	}
	if m := binary.LittleEndian.Uint32(b[offSegMax:]); m != maxRegions {
		return fmt.Errorf("%w: region table of %d entries, want %d", ErrBadSegment, m, maxRegions)
	}
	n := binary.LittleEndian.Uint32(b[offSegCount:])
	if n > maxRegions {
		return fmt.Errorf("%w: %d regions, at most %d", ErrBadSegment, n, maxRegions)
	}
	end := uint64(SegmentHeaderSize)
	for i := range int(n) {
		r := readRegion(b, i)
		if err := r.check(size); err != nil {
			return err
		}
		if r.off < end {
			return fmt.Errorf("%w: region %d overlaps the one before", ErrBadSegment, i)
		}
		end = r.off + r.size
	}
	return nil
}

// carve reserves a region of size bytes of the given kind. The caller
// initializes it, then publishes it with publish.
func (s *Segment) carve(kind Kind, size int) (int, []byte, error) {
	switch {
	case s.closed:
		return 0, nil, ErrClosed
	case !s.creator:
		return 0, nil, fmt.Errorf("%w: only the segment's creator adds regions", ErrInvalid)
	case size <= 0:
		return 0, nil, fmt.Errorf("%w: region size %d", ErrInvalid, size)
	}
	i := s.Regions()
	if i >= maxRegions {
		return 0, nil, fmt.Errorf("%w: a segment holds at most %d regions", ErrInvalid, maxRegions)
	}
	sz := align(uint64(size), CacheLine)
	if sz > uint64(len(s.mem))-s.next {
		return 0, nil, fmt.Errorf("%w: %d bytes do not fit in the %d left in the segment", ErrInvalid, sz, uint64(len(s.mem))-s.next)
	}
	e := s.mem[offSegTable+i*regionEntrySize:]
	binary.LittleEndian.PutUint32(e, uint32(kind))
	binary.LittleEndian.PutUint64(e[8:], s.next)
	binary.LittleEndian.PutUint64(e[16:], sz)
	mem := s.mem[s.next : s.next+sz : s.next+sz]
	return i, mem, nil
}

// publish makes region i, now initialized, visible to other processes.
func (s *Segment) publish(i int, mem []byte) int {
	s.next += uint64(len(mem))
	asm.StoreRelease32(s.count(), uint32(i+1))
	return i
}

// region returns the memory of region i, which must be of kind want.
func (s *Segment) region(i int, want Kind) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	n := s.Regions()
	if i < 0 || i >= n || n > maxRegions {
		return nil, fmt.Errorf("%w: no region %d (segment has %d)", ErrInvalid, i, n)
	}
	r := readRegion(s.mem, i)
	if err := r.check(uint64(len(s.mem))); err != nil {
		pvRejected.Add(1)
		return nil, err
	}
	if r.kind != want && !(want == KindRecordRing && r.kind == KindMPSCRing) {
		return nil, fmt.Errorf("%w: region %d holds a %s, not a %s", ErrBadSegment, i, r.kind, want)
	}
	return s.mem[r.off : r.off+r.size : r.off+r.size], nil
}

// NewCellRing carves a cell ring (see NewCellRing) out of the segment and
// returns its region index, by which other processes find it.
func (s *Segment) NewCellRing(cells, cellSize int) (int, *CellRing, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, mem, err := s.carve(KindCellRing, CellRingSize(cells, cellSize))
	if err != nil {
		return 0, nil, err
	}
	r, err := NewCellRing(mem, cells, cellSize)
	if err != nil {
		return 0, nil, err
	}
	return s.publish(i, mem), r, nil
}

// NewRecordRing carves a single-producer record ring (see NewRecordRing)
// out of the segment and returns its region index.
func (s *Segment) NewRecordRing(capacity int) (int, *RecordRing, error) {
	return s.newRecordRing(KindRecordRing, capacity, RecordRingSize(capacity))
}

// NewMPSCRing carves a many-to-one record ring (see NewMPSCRing) out of
// the segment and returns its region index.
func (s *Segment) NewMPSCRing(capacity int) (int, *RecordRing, error) {
	return s.newRecordRing(KindMPSCRing, capacity, MPSCRingSize(capacity))
}

func (s *Segment) newRecordRing(kind Kind, capacity, size int) (int, *RecordRing, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, mem, err := s.carve(kind, size)
	if err != nil {
		return 0, nil, err
	}
	r, err := newRecordRing(mem, kind, capacity)
	if err != nil {
		return 0, nil, err
	}
	return s.publish(i, mem), r, nil
}

// NewRegion carves size bytes of plain, zeroed shared memory out of the
// segment, starting on a cache line, and returns its region index.
func (s *Segment) NewRegion(size int) (int, []byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, mem, err := s.carve(KindRaw, size)
	if err != nil {
		return 0, nil, err
	}
	clear(mem)
	s.publish(i, mem)
	return i, mem[:size], nil
}

// CellRing attaches the cell ring in region i.
func (s *Segment) CellRing(i int) (*CellRing, error) {
	mem, err := s.region(i, KindCellRing)
	if err != nil {
		return nil, err
	}
	return AttachCellRing(mem)
}

// RecordRing attaches the record ring, of either kind, in region i.
func (s *Segment) RecordRing(i int) (*RecordRing, error) {
	mem, err := s.region(i, KindRecordRing)
	if err != nil {
		return nil, err
	}
	return AttachRecordRing(mem)
}

// Region returns the plain shared memory of region i.
func (s *Segment) Region(i int) ([]byte, error) {
	return s.region(i, KindRaw)
}

// checkName accepts names that are one plain file name.
func checkName(name string) error {
	if name == "" || len(name) > 200 || name[0] == '.' {
		return fmt.Errorf("%w: segment name %q", ErrInvalid, name)
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("%w: segment name %q: use letters, digits, '-', '_' and '.'", ErrInvalid, name)
		}
	}
	return nil
}

// touch reads every cache line of mem.
func touch(mem []byte) {
	var sum byte
	for off := 0; off < len(mem); off += CacheLine {
		sum += mem[off]
	}
	touchSink.Store(uint32(sum))
}

// touchSink keeps touch's reads from being optimized away; atomic, since
// goroutines attaching at once all touch.
var touchSink atomic.Uint32
