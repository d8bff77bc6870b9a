package rings

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"
	"unsafe"

	"github.com/tachyon-hpc/tachyon/internal/testcvar"
)

// Fuzz tests. Everything a peer process can write is fuzzed here: the
// segment header and region table, a ring's header, and the cells,
// records, tail and peer slots of a ring in use. Any input must give an
// error (matching ErrBadSegment, ErrInvalid or ErrCorrupt) or a valid
// result; never a panic, an access outside the memory, or a malformed
// message handed to the user. Run one with, for example,
//
//	go test -run XXX -fuzz FuzzRecordLengths -fuzztime 30s ./rings

// seedSegment returns the image of a segment holding one ring of each
// kind and a raw region, with a few messages in each ring.
func seedSegment(t testing.TB) []byte {
	size := SegmentSize(CellRingSize(4, 64), RecordRingSize(1024), MPSCRingSize(1024), 100)
	s := &Segment{mem: AlignedBytes(size)}
	s.initHeader(selfID())
	_, cr, err := s.NewCellRing(4, 64)
	if err != nil {
		t.Fatal(err)
	}
	_, rr, err := s.NewRecordRing(1024)
	if err != nil {
		t.Fatal(err)
	}
	_, mr, err := s.NewMPSCRing(1024)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.NewRegion(100); err != nil {
		t.Fatal(err)
	}
	fillSeedRings(t, cr, rr, mr)
	return s.mem
}

// fillSeedRings writes a few messages into the rings, through writers
// that are then closed and whose slots are emptied, so that a fuzzed
// copy can be attached again.
func fillSeedRings(t testing.TB, cr *CellRing, rings ...*RecordRing) {
	p, err := cr.Producer()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		p.TrySend([]byte("message " + itoa(i)))
	}
	*word64(cr.h.base, offProducerSlot) = 0
	for _, r := range rings {
		w, err := r.Writer()
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			w.TryWrite(uint32(i), []byte("record "+itoa(i)))
		}
		w.Close()
		*word64(r.h.base, offProducerSlot) = 0
		*word32(r.h.base, offFlags) = 0
	}
}

// checkSegmentHeader is an independent statement of what a valid segment
// header is: it fails the test if parseSegmentHeader accepted b but b
// breaks a rule.
func checkSegmentHeader(t *testing.T, b []byte, fileSize int64) {
	t.Helper()
	le := binary.LittleEndian
	size := le.Uint64(b[offSegSize:])
	switch {
	case len(b) < SegmentHeaderSize || fileSize < SegmentHeaderSize:
		t.Fatalf("accepted a %d-byte header of a %d-byte file", len(b), fileSize)
	case string(b[:8]) != segMagic || le.Uint32(b[offSegVersion:]) != segVersion ||
		le.Uint32(b[offSegHdrSize:]) != SegmentHeaderSize || le.Uint32(b[offSegMax:]) != maxRegions:
		t.Fatal("accepted a bad magic, version, header size or table size")
	case size != uint64(fileSize) || size > uint64(maxSegment.Get()):
		t.Fatalf("accepted size %d for a %d-byte file", size, fileSize)
	}
	n := le.Uint32(b[offSegCount:])
	if n > maxRegions {
		t.Fatalf("accepted %d regions", n)
	}
	end := uint64(SegmentHeaderSize)
	for i := range int(n) {
		e := b[offSegTable+i*regionEntrySize:]
		kind, off, sz := le.Uint32(e), le.Uint64(e[8:]), le.Uint64(e[16:])
		if kind < uint32(KindCellRing) || kind > uint32(KindRaw) || off%CacheLine != 0 || off < end ||
			sz == 0 || off > size || sz > size-off {
			t.Fatalf("accepted region %d: kind %d [%d, +%d) in %d bytes", i, kind, off, sz, size)
		}
		end = off + sz
	}
}

func FuzzSegmentHeader(f *testing.F) {
	testcvar.Set(f, "rings_peer_check", "false")
	img := seedSegment(f)
	n := binary.LittleEndian.Uint32(img[offSegCount:])
	table := img[:offSegTable+int(n)*regionEntrySize] // the rest of the header is zeros
	f.Add(table, int64(len(img)))
	f.Add(table[:offSegTable], int64(SegmentHeaderSize))
	f.Add(table[:40], int64(100))
	f.Fuzz(func(t *testing.T, hdr []byte, fileSize int64) {
		defer hangGuard()()
		// As given, the header of a file of fileSize bytes.
		if err := parseSegmentHeader(hdr, fileSize); err == nil {
			checkSegmentHeader(t, hdr, fileSize)
		} else if !errors.Is(err, ErrBadSegment) {
			t.Fatalf("error %v does not match ErrBadSegment", err)
		}
		// As the start of a whole mapped segment of the size its header
		// states: every region it accepts must lie inside it, and every
		// ring lookup must attach or fail cleanly.
		size := uint64(SegmentHeaderSize)
		if len(hdr) >= offSegSize+8 {
			size = max(size, binary.LittleEndian.Uint64(hdr[offSegSize:]))
		}
		if size > 1<<20 {
			return
		}
		mem := AlignedBytes(int(size))
		copy(mem[:SegmentHeaderSize], hdr)
		if err := parseSegmentHeader(mem, int64(len(mem))); err != nil {
			if !errors.Is(err, ErrBadSegment) {
				t.Fatalf("error %v does not match ErrBadSegment", err)
			}
			return
		}
		checkSegmentHeader(t, mem, int64(len(mem)))
		s := &Segment{mem: mem}
		for i := -1; i <= s.Regions(); i++ {
			if b, err := s.Region(i); err == nil {
				clear(b)
			} else if !errors.Is(err, ErrBadSegment) && !errors.Is(err, ErrInvalid) {
				t.Fatalf("region %d: %v", i, err)
			}
			if r, err := s.CellRing(i); err == nil {
				exerciseCell(t, r)
			} else if !errors.Is(err, ErrBadSegment) && !errors.Is(err, ErrInvalid) {
				t.Fatalf("cell ring %d: %v", i, err)
			}
			if r, err := s.RecordRing(i); err == nil {
				exerciseRecord(t, r)
			} else if !errors.Is(err, ErrBadSegment) && !errors.Is(err, ErrInvalid) {
				t.Fatalf("record ring %d: %v", i, err)
			}
		}
	})
}

func FuzzRingHeader(f *testing.F) {
	testcvar.Set(f, "rings_peer_check", "false")
	cr, _ := NewCellRing(AlignedBytes(CellRingSize(4, 64)), 4, 64)
	rr, _ := NewRecordRing(AlignedBytes(RecordRingSize(1024)), 1024)
	mr, _ := NewMPSCRing(AlignedBytes(MPSCRingSize(1024)), 1024)
	fillSeedRings(f, cr, rr, mr)
	for _, h := range []*header{cr.h, rr.h, mr.h} {
		// Seeds end at their last non-zero byte; the zeros after it
		// come back as the memory beyond the image.
		img := bytes.TrimRight(h.mem, "\x00")
		f.Add(img, uint16(len(h.mem)-len(img)), uint32(h.kind))
	}
	f.Add(cr.h.mem[:ringHeaderSize], uint16(0), uint32(KindCellRing))
	f.Fuzz(func(t *testing.T, img []byte, zeros uint16, kind uint32) {
		defer hangGuard()()
		mem := AlignedBytes(len(img) + int(zeros))
		copy(mem, img)
		for _, want := range []Kind{0, KindCellRing, KindRecordRing, KindMPSCRing, KindRaw, Kind(kind)} {
			h, err := parseRing(mem, want)
			if err != nil {
				if !errors.Is(err, ErrBadSegment) && !errors.Is(err, ErrInvalid) {
					t.Fatalf("want %s: error %v", want, err)
				}
				continue
			}
			checkRingHeader(t, h, mem, want)
		}
		if r, err := AttachCellRing(mem); err == nil {
			exerciseCell(t, r)
		}
		if r, err := AttachRecordRing(mem); err == nil {
			exerciseRecord(t, r)
		}
	})
}

// checkRingHeader fails the test if parseRing accepted a header that
// does not describe a ring of kind want fitting in mem.
func checkRingHeader(t *testing.T, h *header, mem []byte, want Kind) {
	t.Helper()
	if want == 0 && h.kind != KindRecordRing && h.kind != KindMPSCRing || want != 0 && h.kind != want {
		t.Fatalf("asked for %s, got %s", want, h.kind)
	}
	if h.total > uint64(len(mem)) || !isPow2(h.capacity) || h.hdrSize < ringHeaderSize {
		t.Fatalf("%s: %d bytes, capacity %d, header %d in %d bytes", h.kind, h.total, h.capacity, h.hdrSize, len(mem))
	}
	switch h.kind {
	case KindCellRing:
		if h.capacity > maxCells || !isPow2(uint64(h.cellSize)) || h.cellSize < minCellSize || h.cellSize > maxCellSize ||
			h.maxPayload != h.cellSize-cellHeader || h.total != uint64(h.hdrSize)+h.capacity*uint64(h.cellSize) {
			t.Fatalf("cell ring: %d cells of %d bytes, payload %d, total %d", h.capacity, h.cellSize, h.maxPayload, h.total)
		}
	case KindRecordRing, KindMPSCRing:
		if h.capacity < minRecordBytes || h.capacity > maxRecordBytes || h.cellSize != 0 ||
			uint64(h.maxPayload) > h.capacity/8 || h.total != uint64(h.hdrSize)+h.capacity {
			t.Fatalf("record ring: capacity %d, payload %d, total %d", h.capacity, h.maxPayload, h.total)
		}
	default:
		t.Fatalf("accepted kind %s", h.kind)
	}
}

// exerciseCell sends and receives through a ring whose memory a peer may
// have written anything into.
func exerciseCell(t *testing.T, r *CellRing) {
	t.Helper()
	if p, err := r.Producer(); err == nil {
		for range 3 {
			p.TrySend([]byte("12345678"))
		}
		k := p.Claim(2)
		for i := range k {
			copy(p.Slot(i), "abc")
			p.Commit(i, 3)
		}
		p.Publish(k)
	}
	c, err := r.Consumer()
	if err != nil {
		return
	}
	buf := make([]byte, r.MaxPayload())
	for i := range 2*r.Cells() + 2 {
		before := pvMalformed.Value()
		var err error
		if i%2 == 0 {
			var n int
			n, err = c.TryRecv(buf)
			if err == nil && n > r.MaxPayload() {
				t.Fatalf("TryRecv: %d bytes, payload %d", n, r.MaxPayload())
			}
		} else {
			var k int
			k, err = c.Peek(4)
			for j := range k {
				if len(c.Message(j)) > r.MaxPayload() {
					t.Fatalf("Message: %d bytes, payload %d", len(c.Message(j)), r.MaxPayload())
				}
			}
			c.Release(k)
		}
		checkCorruptCounted(t, err, before, false)
	}
}

// exerciseRecord writes and reads through a record ring whose memory a
// peer may have written anything into.
func exerciseRecord(t *testing.T, r *RecordRing) {
	t.Helper()
	if w, err := r.Writer(); err == nil {
		w.TryWrite(1, []byte("abcdefgh"))
		if b, err := w.Claim(20); err == nil {
			copy(b, "claimed")
			w.Commit(2)
		}
	}
	rd, err := r.Reader()
	if err != nil {
		return
	}
	fn := checkedHandler(t, rd)
	for range 4 {
		before, broken := pvMalformed.Value(), rd.broken
		_, err := rd.Poll(fn, 16)
		if err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrPeerDead) {
			t.Fatalf("Poll: %v", err)
		}
		checkCorruptCounted(t, err, before, broken)
	}
}

// checkedHandler returns a handler that fails the test if a record's
// payload is not inside the ring's data area or exceeds MaxPayload.
func checkedHandler(t *testing.T, rd *RecordReader) Handler {
	lo := uintptr(rd.data)
	hi := lo + uintptr(rd.capacity)
	return func(typ uint32, p []byte) {
		if typ > MaxRecordType || uint64(len(p)) > rd.maxPayload {
			t.Fatalf("record of type %#x, %d bytes (payload %d)", typ, len(p), rd.maxPayload)
		}
		if len(p) > 0 {
			a := uintptr(unsafe.Pointer(&p[0]))
			if a < lo || a+uintptr(len(p)) > hi {
				t.Fatalf("record [%#x, +%d) outside the data area [%#x, %#x)", a, len(p), lo, hi)
			}
		}
	}
}

// checkCorruptCounted fails the test unless an ErrCorrupt result and a
// count of rings_malformed_dropped go together (a reader already broken
// reports ErrCorrupt without counting again).
func checkCorruptCounted(t *testing.T, err error, before uint64, broken bool) {
	t.Helper()
	counted := pvMalformed.Value() - before
	switch {
	case errors.Is(err, ErrCorrupt) && counted == 0 && !broken:
		t.Fatal("ErrCorrupt without counting rings_malformed_dropped")
	case counted != 0 && !errors.Is(err, ErrCorrupt):
		t.Fatalf("counted %d malformed, but returned %v", counted, err)
	case counted > 1:
		t.Fatalf("counted %d malformed in one call", counted)
	}
}

// A malicious or broken peer's writes, each fuzzOpSize bytes: an action
// byte, a selector byte, two argument bytes, then an 8-byte word.
const fuzzOpSize = 12

// deadFuzzPID is a pid no process has: above Linux's PID_MAX_LIMIT.
const deadFuzzPID = 1<<22 + 7

func FuzzRecordLengths(f *testing.F) {
	testcvar.Set(f, "rings_check_spins", "1")
	testcvar.Set(f, "rings_unblock_checks", "1")
	testcvar.Set(f, "rings_unblock_wait", "0s")
	op := func(action, sel byte, arg uint16, word uint64) []byte {
		b := make([]byte, fuzzOpSize)
		b[0], b[1] = action, sel
		binary.LittleEndian.PutUint16(b[2:], arg)
		binary.LittleEndian.PutUint64(b[4:], word)
		return b
	}
	hdr := func(length int32, typ uint32) uint64 { return uint64(uint32(length)) | uint64(typ)<<32 }
	for kind := range uint8(3) {
		f.Add(kind, uint8(5), []byte(nil))
		f.Add(kind, uint8(3), op(0, 0, 2, hdr(5000, 1)))                                 // a length beyond the ring
		f.Add(kind, uint8(3), op(0, 0, 2, hdr(-24, 0)))                                  // a claim tagged with slot 0
		f.Add(kind, uint8(3), op(0, 0, 2, hdr(3, 1)))                                    // shorter than a header
		f.Add(kind, uint8(2), op(0, 0, 127, hdr(64, typePadding)))                       // padding across the end
		f.Add(kind, uint8(1), append(op(2, 0, 0, 1<<40), op(0, 0, 1, hdr(1<<30, 1))...)) // an impossible tail
		f.Add(kind, uint8(1), append(op(3, 1, 1, deadFuzzPID|slotReady), op(0, 1, 1, hdr(-24, 1<<8|1))...))
		f.Add(kind, uint8(4), op(0, 3, 0, 0x0000_0004_0000_ffff))      // a cell of this lap with a huge length
		f.Add(kind, uint8(0), op(0, 2, 0xff00, 0x0000_0001_0000_0009)) // a stale lap's stamp
		f.Add(kind, uint8(2), op(1, 0, 77, 0xffff_ffff_ffff_ffff))
	}
	f.Fuzz(func(t *testing.T, kind uint8, valid uint8, ops []byte) {
		defer hangGuard()()
		if kind%3 == 2 {
			fuzzCells(t, int(valid%8), ops)
		} else {
			fuzzRecords(t, kind%3 == 1, int(valid%24), ops)
		}
	})
}

// fuzzRecords writes valid records of 8..47 bytes into a 1 KiB record
// ring, applies the peer's writes in ops, and polls. Without ops every
// record must arrive intact and in order.
func fuzzRecords(t *testing.T, multi bool, valid int, ops []byte) {
	r, w, rd := newRecordPair(t, multi, 1024)
	msg := make([]byte, 48)
	wrote := 0
	for i := range valid {
		m := msg[:8+i*13%40]
		pattern(m, uint64(i))
		if w.TryWrite(uint32(i), m) != nil {
			break
		}
		wrote++
	}
	data := unsafe.Slice((*byte)(rd.data), rd.capacity)
	clean := len(ops) < fuzzOpSize
	for ; len(ops) >= fuzzOpSize; ops = ops[fuzzOpSize:] {
		sel, arg, word := ops[1], binary.LittleEndian.Uint16(ops[2:]), binary.LittleEndian.Uint64(ops[4:])
		switch ops[0] % 4 {
		case 0: // a record header
			off := uint64(arg) % (rd.capacity / recordAlign) * recordAlign
			binary.LittleEndian.PutUint64(data[off:], word)
		case 1: // any eight bytes of the data area
			binary.LittleEndian.PutUint64(data[uint64(arg)%(rd.capacity-7):], word)
		case 2: // the tail
			*word64(r.h.base, offTail) = word
		case 3: // a producer slot: held by this process, a dead one, or empty
			off := uintptr(offProducerSlot)
			if multi {
				off = uintptr(offSlots + int(sel)%MaxProducers*slotSize)
			}
			pid := [...]uint64{0, uint64(deadFuzzPID), uint64(uint32(selfPID()))}[arg%3]
			*word64(r.h.base, off) = word&^slotPIDMask | pid
		}
	}
	fn := checkedHandler(t, rd)
	seq := 0
	check := func(typ uint32, p []byte) {
		fn(typ, p)
		if clean && (typ != uint32(seq) || len(p) != 8+seq*13%40 || !checkPattern(p, uint64(seq))) {
			t.Fatalf("record %d: type %d, %d bytes", seq, typ, len(p))
		}
		seq++
	}
	for i := range 8 {
		before, broken := pvMalformed.Value(), rd.broken
		var err error
		if !multi && i%2 == 1 {
			// The zero-copy reader: the same checks without the type.
			var k int
			k, err = rd.Peek(1 + i*7%64)
			for j := range k {
				p := rd.Record(j)
				fn(0, p)
				if clean && (len(p) != 8+seq*13%40 || !checkPattern(p, uint64(seq))) {
					t.Fatalf("record %d: %d bytes", seq, len(p))
				}
				seq++
			}
			rd.Release(k)
		} else {
			_, err = rd.Poll(check, 64)
		}
		if err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrPeerDead) {
			t.Fatalf("Poll: %v", err)
		}
		checkCorruptCounted(t, err, before, broken)
	}
	if clean && seq != wrote {
		t.Fatalf("read %d records of %d", seq, wrote)
	}
	// The writer goes on without faulting, whatever the reader did.
	for range 4 {
		w.TryWrite(9, msg[:20])
	}
	rd.Poll(fn, 64)
}

// fuzzCells sends valid messages through an 8-cell ring, applies the
// peer's writes in ops to the cells, and receives. Without ops every
// message must arrive intact and in order.
func fuzzCells(t *testing.T, valid int, ops []byte) {
	r, p, c := newCellPair(t, 8, 64)
	for i := range valid {
		m := make([]byte, 8+i*5%48)
		pattern(m, uint64(i))
		if err := p.TrySend(m); err != nil {
			t.Fatal(err)
		}
	}
	cells := unsafe.Slice((*byte)(r.h.data()), r.h.capacity*uint64(r.h.cellSize))
	clean := len(ops) < fuzzOpSize
	for ; len(ops) >= fuzzOpSize; ops = ops[fuzzOpSize:] {
		sel, arg, word := ops[1], binary.LittleEndian.Uint16(ops[2:]), binary.LittleEndian.Uint64(ops[4:])
		switch ops[0] % 3 {
		case 0: // a cell header with a stamp of a nearby lap
			j := uint64(sel) % r.h.capacity
			stamp := uint32(int64(j) + 1 + int64(int8(arg>>8))*int64(r.h.capacity))
			binary.LittleEndian.PutUint64(cells[j*uint64(r.h.cellSize):], uint64(stamp)<<32|word&0xffff_ffff)
		case 1: // any eight bytes of the cells
			binary.LittleEndian.PutUint64(cells[uint64(arg)%uint64(len(cells)-7):], word)
		case 2: // the tail, which the consumer must not trust
			*word64(r.h.base, offTail) = word
		}
	}
	buf := make([]byte, 64)
	seq := 0
	for i := range 20 {
		before := pvMalformed.Value()
		var err error
		if i%3 == 2 {
			var k int
			k, err = c.Peek(8)
			for j := range k {
				m := c.Message(j)
				if len(m) > c.payload {
					t.Fatalf("Message: %d bytes", len(m))
				}
				if clean && (len(m) != 8+seq*5%48 || !checkPattern(m, uint64(seq))) {
					t.Fatalf("message %d: %d bytes", seq, len(m))
				}
				seq++
			}
			c.Release(k)
		} else {
			var n int
			n, err = c.TryRecv(buf[:8+i%57])
			switch {
			case err == ErrShortBuffer && (n <= 8+i%57 || n > c.payload):
				t.Fatalf("ErrShortBuffer with length %d for a %d-byte buffer", n, 8+i%57)
			case err == nil && n > c.payload:
				t.Fatalf("TryRecv: %d bytes", n)
			case err == nil && clean && (n != 8+seq*5%48 || !checkPattern(buf[:n], uint64(seq))):
				t.Fatalf("message %d: %d bytes", seq, n)
			case err == nil:
				seq++
			}
		}
		if err != nil && err != ErrEmpty && err != ErrShortBuffer && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("receive: %v", err)
		}
		checkCorruptCounted(t, err, before, false)
	}
	if clean && seq != valid {
		t.Fatalf("received %d messages of %d", seq, valid)
	}
}

func selfPID() int {
	pid, _ := selfID()
	return pid
}

// hangGuard crashes the test process if the fuzzed call has not returned
// within ten seconds, so that the fuzzer records an input that makes a
// ring operation spin forever as a failure instead of stalling.
func hangGuard() (stop func() bool) {
	return time.AfterFunc(10*time.Second, func() { panic("rings: fuzzed call still running after 10s") }).Stop
}
