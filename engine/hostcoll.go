package engine

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/progress"
	"github.com/tachyon-hpc/tachyon/rings"
)

// The host's collective areas: memory that the ranks of a job on one host
// share, for the collectives of the layer above (mpi's shared-memory
// collectives), beside the rings. A shared-memory job keeps it in its
// segment's third region, a world of goroutine ranks in ordinary memory.
// It is cut into areas, each held by one communicator at a time; an area
// is a header line, then for each of up to Ranks() ranks Lines() flag
// lines (one cache line each, written by that rank alone) followed by
// Slots() data slots of SlotBytes() bytes. What the lines and slots mean
// is the user's; the engine lays them out, hands the areas out (Claim,
// Release), and waits on them as on its own requests (HostWaiter).

// The areas' geometry (control variables), read when a job's segment or
// world is made: a shared-memory job's ranks take its creator's.
var (
	collShmAreas = cvar.NewInt("engine_coll_shm_areas", 16,
		"Collective areas of a host's shared memory (one per communicator that runs shared-memory collectives at a time; the world's is one of them); 0: none, every collective by messages.",
		cvar.WithCategory("engine"), cvar.WithRange(0, 1<<12), cvar.WithUnit("areas"))
	collShmSlots = cvar.NewInt("engine_coll_shm_slots", 4,
		"Data slots per rank of a collective area: how many collectives whose data goes in a slot (more than a flag line holds) a rank may run ahead of the slowest (a broadcast's root, a reduction's contributors) before it waits for a slot to be read.",
		cvar.WithCategory("engine"), cvar.WithRange(2, 64), cvar.WithUnit("slots"))
	collShmLines = cvar.NewInt("engine_coll_shm_lines", 64,
		"Flag lines per rank of a collective area (at least engine_coll_shm_slots, which it is raised to): how many collectives whose data fits a flag line a rank may run ahead of the slowest before it waits for a line to be read. A line is a cache line; a loop of small reductions on more ranks than CPUs runs ahead as far as the lines allow (docs/collectives.md).",
		cvar.WithCategory("engine"), cvar.WithRange(2, 1024), cvar.WithUnit("lines"))
	collShmSlotBytes = cvar.NewInt("engine_coll_shm_slot_bytes", 64<<10,
		"Bytes of each data slot of a collective area (a multiple of 64): the chunk in which a shared-memory collective moves a message larger than a flag line's, and the chunk of a large Allreduce's reduce-scatter and allgather (mpi_coll_shm_allreduce_long), which takes two slots of each rank a chunk. Larger chunks mean fewer steps in which every rank waits for every other; the areas take engine_coll_shm_areas x ranks x engine_coll_shm_slots slots of the host's shared memory (of a World of goroutine ranks, of its heap), touched only where used.",
		cvar.WithCategory("engine"), cvar.WithRange(64, 1<<24), cvar.WithUnit("bytes"))
)

// collGeom is the layout of a host's collective areas.
type collGeom struct {
	areas, ranks, lines, slots, slotBytes int
}

// currentCollGeom returns the geometry the control variables give for a
// host of n ranks: none for a lone rank.
func currentCollGeom(n int) collGeom {
	g := collGeom{areas: int(collShmAreas.Get()), ranks: n, slots: int(collShmSlots.Get()),
		slotBytes: int(collShmSlotBytes.Get()+rings.CacheLine-1) &^ (rings.CacheLine - 1)}
	g.lines = max(int(collShmLines.Get()), g.slots)
	if n < 2 {
		g.areas = 0
	}
	return g
}

func (g collGeom) rankBytes() int { return g.lines*rings.CacheLine + g.slots*g.slotBytes }
func (g collGeom) areaBytes() int { return rings.CacheLine + g.ranks*g.rankBytes() }

// size returns the bytes the areas take; at least a line, so that the
// region exists whatever the geometry.
func (g collGeom) size() int { return max(g.areas*g.areaBytes(), rings.CacheLine) }

// valid reports whether g is a geometry this build can use on mem.
func (g collGeom) valid(mem int) bool {
	return g.areas >= 0 && g.areas <= 1<<12 && g.slots >= 2 && g.slots <= 64 && g.lines >= g.slots && g.lines <= 1024 && g.slotBytes >= rings.CacheLine &&
		g.slotBytes <= 1<<24 && g.slotBytes%rings.CacheLine == 0 && g.ranks >= 1 && g.ranks <= maxShmRanks &&
		g.size() <= mem
}

// HostColl is the collective areas of the ranks of a job that share this
// rank's host (see above). Its methods are safe for concurrent use; the
// memory it hands out is shared with the other ranks.
type HostColl struct {
	mem   []byte
	g     collGeom
	local []int32 // by world rank: its index among the host's ranks, -1 elsewhere
	over  bool    // more ranks than CPUs
}

// newHostColl returns the areas of geometry g in mem, for the host's
// ranks listed in order in ranks (world ranks of a job of size ranks);
// nil when g has no area.
func newHostColl(mem []byte, g collGeom, ranks []int, size int) *HostColl {
	if g.areas == 0 {
		return nil
	}
	h := &HostColl{mem: mem, g: g, local: make([]int32, size), over: len(ranks) > HostCPUs()}
	for i := range h.local {
		h.local[i] = -1
	}
	for i, r := range ranks {
		h.local[r] = int32(i)
	}
	return h
}

// HostColl returns the collective areas this rank shares with the others
// of its host, or nil when it has none (a lone rank on its host, goroutine
// ranks joined over the network, engine_coll_shm_areas 0).
func (ep *Endpoint) HostColl() *HostColl {
	if ep.hostColl == nil {
		return nil
	}
	return ep.hostColl()
}

// OnHost reports whether world rank r shares the areas (is on this host).
func (h *HostColl) OnHost(r int) bool { return uint(r) < uint(len(h.local)) && h.local[r] >= 0 }

// Areas returns the number of areas.
func (h *HostColl) Areas() int { return h.g.areas }

// Ranks returns the most ranks an area serves: the host's ranks.
func (h *HostColl) Ranks() int { return h.g.ranks }

// Lines returns the flag lines per rank of an area.
func (h *HostColl) Lines() int { return h.g.lines }

// Slots returns the data slots per rank of an area.
func (h *HostColl) Slots() int { return h.g.slots }

// SlotBytes returns the size of a data slot.
func (h *HostColl) SlotBytes() int { return h.g.slotBytes }

// Oversubscribed reports whether the host's ranks outnumber its CPUs, so
// that a step in which every rank waits for every other waits for the
// scheduler too.
func (h *HostColl) Oversubscribed() bool { return h.over }

// Line returns flag line s of user j (0 <= j < Ranks()) of area a: a cache
// line, as eight words.
func (h *HostColl) Line(a, j, s int) *[8]uint64 {
	off := a*h.g.areaBytes() + rings.CacheLine + j*h.g.rankBytes() + s*rings.CacheLine
	return (*[8]uint64)(unsafe.Pointer(&h.mem[off]))
}

// Slot returns data slot s of user j of area a.
func (h *HostColl) Slot(a, j, s int) []byte {
	off := a*h.g.areaBytes() + rings.CacheLine + j*h.g.rankBytes() + h.g.lines*rings.CacheLine + s*h.g.slotBytes
	return h.mem[off : off+h.g.slotBytes : off+h.g.slotBytes]
}

// users returns the word of area a's header that counts its users.
func (h *HostColl) users(a int) *int32 {
	return (*int32)(unsafe.Pointer(&h.mem[a*h.g.areaBytes()]))
}

// Claim takes a free area among areas first and above for users users,
// its flag lines zeroed, and returns its index, or -1 when none is free.
// Each user gives it back with Release.
func (h *HostColl) Claim(users, first int) int {
	for a := max(first, 0); a < h.g.areas; a++ {
		if atomic.CompareAndSwapInt32(h.users(a), 0, -1) { // claimed, not yet handed out
			for j := 0; j < users; j++ {
				for s := 0; s < h.g.lines; s++ {
					l := h.Line(a, j, s)
					for w := range l {
						atomic.StoreUint64(&l[w], 0)
					}
				}
			}
			atomic.StoreInt32(h.users(a), int32(users))
			return a
		}
	}
	return -1
}

// Release gives area a back for one of its users; the last one frees it.
func (h *HostColl) Release(a int) {
	if a >= 0 && a < h.g.areas {
		atomic.AddInt32(h.users(a), -1)
	}
}

// HostWaiter waits until a flag in a host's collective area is set, as a
// Probe waits: with the progress engine's back-off (spin, yield, park),
// polling the endpoint meanwhile, so that point-to-point traffic moves and
// dead peers are found. One goroutine uses a waiter at a time.
type HostWaiter struct {
	ep    *Endpoint
	ready func() bool
	peer  int
	cond  func() bool
}

// NewHostWaiter returns a waiter on ready, which reports whether the
// flag awaited is set; it must be cheap and must not wait.
func (ep *Endpoint) NewHostWaiter(ready func() bool) *HostWaiter {
	w := &HostWaiter{ep: ep, ready: ready}
	w.cond = w.met
	return w
}

// met is the waiter's condition: the flag is set, or its setter is gone.
func (w *HostWaiter) met() bool {
	return w.ready() || w.ep.peers[w.peer].gone.Load()
}

// Wait returns nil once ready reports true, or an ErrPeerDead error once
// world rank peer, which is to set the flag, is found gone (or ErrClosed
// if this endpoint closes).
func (w *HostWaiter) Wait(peer int) error {
	if w.ready() {
		return nil
	}
	ep := w.ep
	if uint(peer) >= uint(len(ep.peers)) {
		return fmt.Errorf("%w: rank %d of %d", ErrRank, peer, len(ep.peers))
	}
	ep.lock()
	if ep.closed {
		ep.unlock()
		return ErrClosed
	}
	ep.probing++ // keeps peer checks going while nothing is in flight
	ep.unlock()
	w.peer = peer
	ep.prog.WaitUntil(w.cond)
	ep.lock()
	ep.probing--
	err := ep.peers[peer].dead
	ep.unlock()
	if w.ready() {
		return nil
	}
	return err
}

// WakeHost wakes world rank r if it is parked, after the caller has set a
// flag it may wait on and called progress.WakeFence.
func (ep *Endpoint) WakeHost(r int) {
	if uint(r) < uint(len(ep.peers)) && r != ep.rank {
		ep.peers[r].out.Wake()
	}
}

// WakeFence orders a caller's flag stores before the checks for parked
// ranks of the WakeHost calls that follow (progress.WakeFence).
func WakeFence() { progress.WakeFence() }
