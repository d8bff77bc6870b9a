package rings

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/tachyon-hpc/tachyon/asm"
)

// header is a process-local view of a ring header in memory that may be
// shared with other processes. Its fields are copies of the validated
// configuration line: the hot paths never reread shared configuration.
type header struct {
	base       unsafe.Pointer
	mem        []byte // keeps heap memory alive; bounds every access
	kind       Kind
	capacity   uint64 // cells, or data bytes
	cellSize   uint32
	maxPayload uint32
	hdrSize    uint32
	total      uint64
}

// geometry returns the header size, largest payload and total size of a
// ring of the given kind, or an error naming what is out of range.
func geometry(kind Kind, capacity uint64, cellSize uint32) (hdrSize, maxPayload uint32, total uint64, err error) {
	switch kind {
	case KindCellRing:
		if !isPow2(capacity) || capacity < 2 || capacity > maxCells {
			return 0, 0, 0, fmt.Errorf("cell count %d is not a power of two in [2, %d]", capacity, uint64(maxCells))
		}
		if !isPow2(uint64(cellSize)) || cellSize < minCellSize || cellSize > maxCellSize {
			return 0, 0, 0, fmt.Errorf("cell size %d is not a power of two in [%d, %d]", cellSize, minCellSize, maxCellSize)
		}
		return ringHeaderSize, cellSize - cellHeader, ringHeaderSize + capacity*uint64(cellSize), nil
	case KindRecordRing, KindMPSCRing:
		if !isPow2(capacity) || capacity < minRecordBytes || capacity > maxRecordBytes {
			return 0, 0, 0, fmt.Errorf("capacity %d is not a power of two in [%d, %d]", capacity, minRecordBytes, maxRecordBytes)
		}
		if cellSize != 0 {
			return 0, 0, 0, fmt.Errorf("record ring with cell size %d", cellSize)
		}
		hs := uint32(ringHeaderSize)
		if kind == KindMPSCRing {
			hs = mpscHeaderSize
		}
		return hs, uint32(capacity/8 - recordHeader), uint64(hs) + capacity, nil
	}
	return 0, 0, 0, fmt.Errorf("unknown ring kind %d", uint32(kind))
}

// initRing zeroes mem and writes a ring header into it, the magic last, so
// that an attacher never sees a half-written configuration.
func initRing(mem []byte, kind Kind, capacity uint64, cellSize uint32) (*header, error) {
	hs, mp, total, err := geometry(kind, capacity, cellSize)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if uint64(len(mem)) < total {
		return nil, fmt.Errorf("%w: %s needs %d bytes, memory has %d", ErrInvalid, kind, total, len(mem))
	}
	if !aligned(mem) {
		return nil, fmt.Errorf("%w: ring memory must start on a %d-byte boundary (use AlignedBytes or a Segment)", ErrInvalid, CacheLine)
	}
	clear(mem[:total])
	h := &header{base: unsafe.Pointer(&mem[0]), mem: mem[:total:total], kind: kind,
		capacity: capacity, cellSize: cellSize, maxPayload: mp, hdrSize: hs, total: total}
	*word32(h.base, offKind) = uint32(kind)
	*word32(h.base, offVersion) = ringVersion
	*word32(h.base, offCellSize) = cellSize
	*word64(h.base, offCapacity) = capacity
	*word32(h.base, offMaxPayload) = mp
	*word32(h.base, offHdrSize) = hs
	asm.StoreRelease32(word32(h.base, offMagic), ringMagic)
	return h, nil
}

// attachRing validates the ring header at the start of mem. want is the
// kind expected, or 0 to accept either record kind.
func attachRing(mem []byte, want Kind) (*header, error) {
	h, err := parseRing(mem, want)
	if err != nil {
		pvRejected.Add(1)
		return nil, err
	}
	return h, nil
}

func parseRing(mem []byte, want Kind) (*header, error) {
	if len(mem) < ringHeaderSize {
		return nil, fmt.Errorf("%w: %d bytes is too small for a ring header", ErrBadSegment, len(mem))
	}
	if !aligned(mem) {
		return nil, fmt.Errorf("%w: ring memory must start on a %d-byte boundary", ErrInvalid, CacheLine)
	}
	base := unsafe.Pointer(&mem[0])
	if m := asm.LoadAcquire32(word32(base, offMagic)); m != ringMagic {
		return nil, fmt.Errorf("%w: ring magic %#x, want %#x (not a ring, or not yet initialized)", ErrBadSegment, m, ringMagic)
	}
	if v := *word32(base, offVersion); v != ringVersion {
		return nil, fmt.Errorf("%w: ring version %d, this build reads version %d", ErrBadSegment, v, ringVersion)
	}
	kind := Kind(*word32(base, offKind))
	switch {
	case want == 0 && kind != KindRecordRing && kind != KindMPSCRing:
		return nil, fmt.Errorf("%w: ring is a %s, want a record ring", ErrBadSegment, kind)
	case want != 0 && kind != want:
		return nil, fmt.Errorf("%w: ring is a %s, want a %s", ErrBadSegment, kind, want)
	}
	capacity, cellSize := *word64(base, offCapacity), *word32(base, offCellSize)
	hs, mp, total, err := geometry(kind, capacity, cellSize)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSegment, err)
	}
	if got := *word32(base, offHdrSize); got != hs {
		return nil, fmt.Errorf("%w: header size %d, want %d", ErrBadSegment, got, hs)
	}
	if got := *word32(base, offMaxPayload); got != mp {
		return nil, fmt.Errorf("%w: max payload %d, want %d", ErrBadSegment, got, mp)
	}
	if uint64(len(mem)) < total {
		return nil, fmt.Errorf("%w: %s needs %d bytes, memory has %d", ErrBadSegment, kind, total, len(mem))
	}
	return &header{base: base, mem: mem[:total:total], kind: kind, capacity: capacity,
		cellSize: cellSize, maxPayload: mp, hdrSize: hs, total: total}, nil
}

func (h *header) data() unsafe.Pointer { return unsafe.Add(h.base, h.hdrSize) }

// Peer slots. The word holds the pid, a generation that changes each time
// the slot is taken, and a ready bit set once the start time beside it is
// valid; a reader that sees the pid without the ready bit treats the
// process as alive (it is attaching right now).
const (
	slotPIDMask  = 1<<32 - 1
	slotGenShift = 32
	slotGenMask  = 1<<24 - 1
	slotReady    = 1 << 63
)

func slotPID(w uint64) int    { return int(w & slotPIDMask) }
func slotGen(w uint64) uint32 { return uint32(w>>slotGenShift) & slotGenMask }

// takeSlot attaches the calling process to the slot at off. A slot held by
// a live process gives ErrBusy; one held by a dead process is taken over
// only if reclaim is set (many-to-one producers), else reported. It
// returns the slot's new generation.
func (h *header) takeSlot(off uintptr, reclaim bool) (uint32, error) {
	w, st := word64(h.base, off), word64(h.base, off+8)
	me, start := selfID()
	for {
		old := atomic.LoadUint64(w)
		if pid := slotPID(old); pid != 0 {
			if old&slotReady == 0 || peerAlive(pid, atomic.LoadUint64(st)) {
				return 0, ErrBusy
			}
			if !reclaim {
				return 0, fmt.Errorf("%w: this side was attached by pid %d, now dead; make a new ring", ErrPeerDead, pid)
			}
		}
		gen := (slotGen(old) + 1) & slotGenMask
		nw := uint64(gen)<<slotGenShift | uint64(uint32(me))
		if atomic.CompareAndSwapUint64(w, old, nw) {
			if pid := slotPID(old); pid != 0 {
				// Taken over from a dead producer whose death the
				// reader may not have seen: leave it for the reader
				// to report (RecordReader.reapProducers).
				atomic.StoreUint64(word64(h.base, offReclaimedPID), uint64(pid))
				atomic.AddUint64(word64(h.base, offReclaimed), 1)
			}
			atomic.StoreUint64(st, start)
			atomic.StoreUint64(w, nw|slotReady)
			return gen, nil
		}
	}
}

// freeSlot empties the slot if it still holds generation gen, and reports
// whether it did.
func (h *header) freeSlot(off uintptr, gen uint32) bool {
	w := word64(h.base, off)
	old := atomic.LoadUint64(w)
	return slotGen(old) == gen && slotPID(old) != 0 &&
		atomic.CompareAndSwapUint64(w, old, uint64(gen)<<slotGenShift)
}

// slotDead reports the pid of the slot's holder if it holds one and that
// process is dead.
func (h *header) slotDead(off uintptr) (pid int, dead bool) {
	w := atomic.LoadUint64(word64(h.base, off))
	pid = slotPID(w)
	if pid == 0 || w&slotReady == 0 {
		return pid, false
	}
	return pid, !peerAlive(pid, atomic.LoadUint64(word64(h.base, off+8)))
}

// roomWanted is the ring's count of requests for room (WantRoom).
func (h *header) roomWanted() *uint64 { return word64(h.base, offRoomWanted) }

func (h *header) flags() uint32 { return asm.LoadAcquire32(word32(h.base, offFlags)) }

func (h *header) setFlag(f uint32) { atomic.OrUint32(word32(h.base, offFlags), f) }

// attach takes the one-to-one ring's side whose slot is at off for the
// calling process; ErrClosed if that side closed (it cannot be attached
// again).
func (h *header) attach(off uintptr, closed uint32) error {
	if _, err := h.takeSlot(off, false); err != nil {
		if h.flags()&closed != 0 {
			return ErrClosed
		}
		return err
	}
	return nil
}

// peerState reports the other side of a one-to-one ring: ErrClosed if it
// closed, ErrPeerDead if its process died, nil if it is alive or has not
// attached yet.
func (h *header) peerState(slot uintptr, closed uint32) error {
	if h.flags()&closed != 0 {
		return ErrClosed
	}
	if pid, dead := h.slotDead(slot); dead {
		return deadErr(pid)
	}
	return nil
}

// checkPeer is peerState for a side's Check: the first time it finds the
// peer's process dead it sets *dead and counts it (rings_dead_peers).
func (h *header) checkPeer(slot uintptr, closed uint32, dead *bool) error {
	err := h.peerState(slot, closed)
	if err != nil && err != ErrClosed && !*dead {
		*dead = true
		pvDead.Add(1)
	}
	return err
}

func deadErr(pid int) error { return fmt.Errorf("%w: pid %d", ErrPeerDead, pid) }

// pad keeps a handle's hot fields off the cache lines of neighbouring heap
// objects, such as the handle of the other side in the same process.
type pad [CacheLine]byte
