package mpi

import (
	"errors"
	"time"
	"unsafe"

	"github.com/tachyon-hpc/tachyon/asm"
	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/engine"
	"github.com/tachyon-hpc/tachyon/progress"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// Shared-memory collectives. A communicator whose ranks all share one host
// (the ranks of a shared-memory job, the goroutine ranks of Run) runs its
// blocking Barrier, Bcast, Reduce and Allreduce (and, on a host with more
// ranks than CPUs, its small Allgather and Alltoall) through a collective area
// of the host's shared memory (engine.HostColl) rather than by messages:
//
//   - Each rank owns, in the area, Lines() flag lines and Slots() data
//     slots (Lines() >= Slots()). Collective number q of the communicator
//     (every rank counts them alike) uses line q mod Lines() and slot q mod
//     Slots(): a rank writes its data
//     (a message of up to shmInline bytes in the line itself, beside the
//     flag, a larger one in the slot), then the call's descriptor, then q
//     in the line's first word with a release store; a rank that reads it
//     loads the flag with acquire and takes the data. Every rank publishes
//     q as it enters collective q, data or none (a broadcast's receivers).
//   - A rank writes line q mod Lines() only once every other rank has
//     entered collective q-Lines()+1, so has finished reading what it
//     wrote there for q-Lines(), and slot q mod Slots() once they have
//     entered q-Slots()+1 (free): a broadcast's root leaves as soon as its
//     data is out, and waits for its receivers only when it would reuse a
//     line or slot they may still read; a reduction's contributors alike.
//     Lines are cheap (a cache line each), so that small collectives run
//     far ahead; slots are not.
//   - A message larger than a flag line's goes in chunks of a slot, one
//     collective number each: a pipeline of Slots() chunks.
//   - Barrier: every rank publishes and waits for every other's flag.
//     Bcast: the root publishes the data, the others take it. Reduce and
//     Allreduce: every rank publishes its vector; the root (every rank)
//     combines them in rank order, the same on every rank, so that every
//     rank of an Allreduce gets the same bits. Allgather and Alltoall:
//     every rank publishes its block (its whole send) in its line, and
//     copies the others' (its block of each).
//   - A rank takes its own part from its own buffer, never back from its
//     line or slot: once another CPU has read a line, reading it back
//     costs a miss (about 40 ns a call in a loop of two ranks' 8-byte
//     allreduces).
//   - An Allreduce of up to a line's data, with a predefined operation,
//     runs the same protocol on a path of its own (collshm_small.go).
//
// A rank waits for a flag as the engine waits for a message
// (engine.HostWaiter): a spin on the flag alone (mpi_coll_shm_spin),
// then the progress engine's back-off (spin, yield, park) with its polls,
// so that point-to-point traffic moves meanwhile and a dead rank is found; a
// publisher wakes the ranks parked on its flags. A rank whose wait fails
// (the rank it waits for is gone, or failed itself) poisons its flag lines
// with errBit: whoever waits on it fails in turn, ErrProcFailed, so an
// error travels as far as the data it spoils, and no rank hangs on a rank
// that has given up. The communicator's later collectives then fail at
// once: its ranks' counts are out of step.
//
// The world communicator takes area 0; another communicator agrees on one
// at its first collective (its rank 0 claims a free area and the ranks
// learn it from an Allreduce by messages, which either every rank
// completes or none), and gives it back when freed. Without a free area,
// or above mpi_coll_shm_max bytes, the collectives run by messages, but
// for an Allreduce of up to mpi_coll_shm_allreduce_small bytes (1 KiB) and
// one from mpi_coll_shm_allreduce_long bytes, which goes
// through the area by reduce-scatter (collshm_allreduce.go), and, on an
// oversubscribed host, for an Allreduce, Reduce, Allgather or Alltoall
// whose rank publishes up to mpi_coll_shm_over_max bytes (at most a
// line's, for the last three).

// Control variables.
var (
	collShmOn = cvar.NewBool("mpi_coll_shm", true,
		"Whether the blocking Barrier, Bcast, Reduce and Allreduce of a communicator whose ranks all share one host run through a collective area of the host's shared memory (flags and data slots) rather than by messages. Every rank must have the same setting.",
		cvar.WithCategory("mpi"))
	collShmMax = cvar.NewInt("mpi_coll_shm_max", 0,
		"Largest message, in bytes, of a Bcast, Reduce or Allreduce through the shared-memory collective area (mpi_coll_shm); larger ones run by messages (Barrier always goes through the area, an Allreduce up to mpi_coll_shm_allreduce_small, and one from mpi_coll_shm_allreduce_long by reduce-scatter). 0, the default: data by messages, as on this project's VM a flag line per call (one cache-line transfer each way) costs more than the rings, which pack several small messages in a line (docs/collectives.md has the figures). Above a data slot (engine_coll_shm_slot_bytes) a message goes in chunks, every rank in step at every chunk. Every rank must have the same.",
		cvar.WithCategory("mpi"), cvar.WithRange(0, 1<<40), cvar.WithUnit("bytes"))
	collShmSpin = cvar.NewDuration("mpi_coll_shm_spin", time.Microsecond,
		"How long a rank waiting for another's flag in a shared-memory collective area looks at the flag alone before it waits as the engine does (polling point-to-point traffic, then spinning, yielding, parking: progress_spin): a flag seen at once is a call sooner than one seen between two polls. On a host with more ranks than CPUs it looks 64 times, so that the rank it waits for gets the CPU. 0: 64 times everywhere.",
		cvar.WithCategory("mpi"), cvar.WithRange(0, int64(time.Millisecond)))
	collShmOverMax = cvar.NewInt("mpi_coll_shm_over_max", 64<<10,
		"Largest Allreduce, Reduce (at most 48 bytes, a flag line's), and largest part a rank publishes of an Allgather (its block) or Alltoall (its send; these two at most a line's too), in bytes, that go through the shared-memory collective area, whatever mpi_coll_shm_max, when the host runs more ranks than it has CPUs: each rank publishes its data and waits once for the others', where by messages it waits for a peer at each step, every wait a trip through the scheduler to a rank that may share its CPU (four ranks on two vCPUs: an 8 KiB allreduce in 9 us against 48 by messages; docs/collectives.md has the figures). 0: mpi_coll_shm_max and mpi_coll_shm_allreduce_small decide the Allreduce, and the others go by messages. Every rank must have the same.",
		cvar.WithCategory("mpi"), cvar.WithRange(0, 1<<40), cvar.WithUnit("bytes"))
)

// Which path ran (performance variables).
var (
	pvShmBarrier = pvar.NewCounter("mpi_coll_shm_barrier",
		"Barriers run through a shared-memory collective area.", pvar.WithUnit("calls"))
	pvShmBcast = pvar.NewCounter("mpi_coll_shm_bcast",
		"Broadcasts run through a shared-memory collective area.", pvar.WithUnit("calls"))
	pvShmReduce = pvar.NewCounter("mpi_coll_shm_reduce",
		"Reduces run through a shared-memory collective area.", pvar.WithUnit("calls"))
	pvShmAllreduce = pvar.NewCounter("mpi_coll_shm_allreduce",
		"Allreduces run through a shared-memory collective area.", pvar.WithUnit("calls"))
	pvShmAllgather = pvar.NewCounter("mpi_coll_shm_allgather",
		"Allgathers run through a shared-memory collective area (an oversubscribed host's, up to mpi_coll_shm_over_max bytes a rank).", pvar.WithUnit("calls"))
	pvShmAlltoall = pvar.NewCounter("mpi_coll_shm_alltoall",
		"All-to-alls run through a shared-memory collective area (an oversubscribed host's, up to mpi_coll_shm_over_max bytes a rank).", pvar.WithUnit("calls"))
	pvShmNoArea = pvar.NewCounter("mpi_coll_shm_no_area",
		"Communicators of one host's ranks that found no free collective area (engine_coll_shm_areas), whose collectives run by messages.", pvar.WithUnit("communicators"))
)

// The states of a communicator's shared-memory collectives (Comm.shmState).
const (
	shmUnknown uint8 = iota // not decided: the first collective decides
	shmOn                   // Comm.shm runs them
	shmOff                  // messages run them
)

// The words of a flag line.
const (
	wSeq      = 0  // the collective number published; once the rank failed, errBit | the number it failed in
	wDesc     = 1  // the call's descriptor (shmDesc)
	wInline   = 2  // first word of the data carried in the line
	shmInline = 48 // bytes of data a line carries
	errBit    = uint64(1) << 63
)

// shmSpin is how many times a rank looks at a flag between two readings
// of the clock while it spins (mpi_coll_shm_spin), and in all on an
// oversubscribed host.
const shmSpin = 64

// collShm is one rank's side of a communicator's collective area.
type collShm struct {
	c         *Comm
	h         *engine.HostColl
	area      int
	n, r      int
	nlines    int
	slots     int
	slotBytes int
	seq       uint64         // collectives run through the area
	lines     [][]*[8]uint64 // by rank and line
	data      [][][]byte     // by rank and slot
	world     []int          // world rank of each rank
	known     []uint64       // by rank: the highest collective it is known to have entered
	minKnown  uint64         // the least of known, other ranks'
	broken    error          // the first failure: every later call fails with it

	spinD time.Duration // mpi_coll_shm_spin, as last read
	spinC uint64        // spinD in clock counts

	waitFlag *uint64 // what the waiter waits for: *waitFlag >= waitSeq
	waitSeq  uint64
	waiter   *engine.HostWaiter
}

// newCollShm returns c's side of area a of h.
func newCollShm(c *Comm, h *engine.HostColl, a int) *collShm {
	s := &collShm{c: c, h: h, area: a, n: c.size, r: c.rank, nlines: h.Lines(), slots: h.Slots(), slotBytes: h.SlotBytes(),
		lines: make([][]*[8]uint64, c.size), data: make([][][]byte, c.size), world: make([]int, c.size),
		known: make([]uint64, c.size)}
	for j := range s.lines {
		s.world[j] = c.group.worldRank(j)
		s.lines[j] = make([]*[8]uint64, s.nlines)
		s.data[j] = make([][]byte, s.slots)
		for k := range s.nlines {
			s.lines[j][k] = h.Line(a, j, k)
		}
		for k := range s.slots {
			s.data[j][k] = h.Slot(a, j, k)
		}
	}
	s.waiter = c.p.ep.NewHostWaiter(s.ready)
	return s
}

// ready is the waiter's condition.
func (s *collShm) ready() bool { return asm.LoadAcquire64(s.waitFlag) >= s.waitSeq }

// shmDesc is the descriptor of a call: its kind, root and bytes, which
// the ranks compare to find mismatched calls.
func shmDesc(kind collKind, root, nb int) uint64 {
	return uint64(kind)<<56 | uint64(uint16(root))<<40 | uint64(nb)&(1<<40-1)
}

// shmFor returns c's shared-memory side if a's collective runs through
// it (deciding, at c's first collective, whether c has one), nil if it
// runs by messages, or the error of that decision.
func (c *Comm) shmFor(name string, kind collKind, nb int) (*collShm, error) {
	switch c.shmState {
	case shmOff:
		return nil, nil
	case shmUnknown:
		if err := c.shmAttach(name); err != nil {
			return nil, err
		}
		if c.shmState != shmOn {
			return nil, nil
		}
	}
	switch kind {
	case collBarrier:
	case collAllgather, collAlltoall:
		if nb > shmInline || !c.shm.overSmall(nb) {
			return nil, nil
		}
	default:
		over := (kind == collAllreduce || kind == collReduce && nb <= shmInline) && c.shm.overSmall(nb) ||
			kind == collAllreduce && c.shm.small(nb)
		if int64(nb) > collShmMax.Get() && !over && (kind != collAllreduce || !c.shm.rsag(nb)) {
			return nil, nil
		}
	}
	return c.shm, nil
}

// overSmall reports whether an Allreduce, Allgather or Alltoall whose
// rank publishes nb bytes goes through the area because the host is
// oversubscribed (mpi_coll_shm_over_max).
func (s *collShm) overSmall(nb int) bool {
	return int64(nb) <= collShmOverMax.Get() && s.h.Oversubscribed()
}

// shmAttach decides whether c runs its collectives through a collective
// area, and takes one if so.
func (c *Comm) shmAttach(name string) error {
	c.shmState = shmOff
	if !collShmOn.Get() || c.size < 2 || c.coll != c {
		return nil
	}
	h := c.p.ep.HostColl()
	if h == nil || c.size > h.Ranks() {
		return nil
	}
	for j := range c.size {
		if !h.OnHost(c.group.worldRank(j)) {
			return nil
		}
	}
	area := 0 // the world's
	if c != c.p.world {
		mine := []uint64{0}
		if c.rank == 0 {
			if a := h.Claim(c.size, 1); a >= 0 {
				mine[0] = uint64(a) + 1
			}
		}
		got := []uint64{0}
		a := typed(collAllreduce, mine, got)
		a.op = Max
		if err := c.collReady(name, &a); err != nil {
			c.shmUnclaim(h, mine[0])
			return err
		}
		if err := c.msgCollective(&a); err != nil {
			c.shmUnclaim(h, mine[0])
			return err
		}
		if got[0] == 0 {
			pvShmNoArea.Add(1)
			return nil
		}
		area = int(got[0]) - 1
	}
	c.shm = newCollShm(c, h, area)
	c.shmState = shmOn
	return nil
}

// shmUnclaim gives back the area rank 0 claimed (claimed+1, 0 for none)
// when the ranks could not agree on it.
func (c *Comm) shmUnclaim(h *engine.HostColl, claimed uint64) {
	for range c.size * int(min(claimed, 1)) {
		h.Release(int(claimed) - 1)
	}
}

// shmFree gives c's area back, for one rank, when c is freed.
func (c *Comm) shmFree() {
	if c.shmState == shmOn && c.shm.area != 0 {
		c.shm.h.Release(c.shm.area)
	}
	c.shm, c.shmState = nil, shmOff
}

// line returns rank j's flag line for collective q.
func (s *collShm) line(j int, q uint64) *[8]uint64 { return s.lines[j][q%uint64(s.nlines)] }

// inline returns the data bytes of line l.
func inline(l *[8]uint64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&l[wInline])), shmInline)
}

// fail records err as s's failure and poisons this rank's lines, so
// that every rank that waits on it fails too.
func (s *collShm) fail(err error) error {
	if s.broken == nil {
		s.broken = err
		for _, l := range s.lines[s.r] {
			asm.StoreRelease64(&l[wSeq], errBit|s.seq)
		}
		s.wakeAll()
	}
	return err
}

// wakeAll wakes the other ranks, if parked, after this one published.
func (s *collShm) wakeAll() {
	engine.WakeFence()
	ep := s.c.p.ep
	for j, w := range s.world {
		if j != s.r {
			ep.WakeHost(w)
		}
	}
}

// wait returns once rank j has published collective q (or a later one).
func (s *collShm) wait(name string, j int, q uint64) error {
	f := &s.line(j, q)[wSeq]
	v := asm.LoadAcquire64(f)
	if v < q {
		v = s.spin(f, q)
	}
	if v < q {
		s.waitFlag, s.waitSeq = f, q
		err := s.waiter.Wait(s.world[j])
		s.waitFlag = nil
		if err != nil {
			return s.fail(s.c.engineErr(name, err))
		}
		v = asm.LoadAcquire64(f)
	}
	if v&errBit != 0 {
		if v&^errBit <= q {
			return s.fail(errorf(ErrProcFailed, name, "rank %d's part of a collective on %s failed (a rank it waited for is gone)", j, s.c.label()))
		}
		v = q // it failed in a later one, after it published q
	}
	if v > s.known[j] {
		s.known[j] = v
	}
	return nil
}

// spin looks at flag f until it reaches q, for up to mpi_coll_shm_spin
// (64 looks on an oversubscribed host), and returns its last value.
func (s *collShm) spin(f *uint64, q uint64) uint64 {
	var end uint64
	for {
		for range shmSpin {
			if v := asm.LoadAcquire64(f); v >= q {
				return v
			}
		}
		if s.h.Oversubscribed() {
			return asm.LoadAcquire64(f)
		}
		now := progress.Now()
		if end == 0 {
			if d := collShmSpin.Get(); d != s.spinD {
				s.spinD, s.spinC = d, progress.SecondsToCounts(d.Seconds())
			}
			end = now + s.spinC
		}
		if now >= end {
			return asm.LoadAcquire64(f)
		}
	}
}

// check compares rank j's descriptor of collective q with this rank's
// and returns the bytes j's call has. Another kind of call, or another
// root, is an error (ErrCount) after which the ranks' counts of
// collectives may be out of step: s fails. Another length is for the
// caller to judge: the calls still take the same collective numbers.
func (s *collShm) check(name string, j int, q, desc uint64) (int, error) {
	d := s.line(j, q)[wDesc]
	if d>>40 == shmDescMsgs>>40 && desc>>56 == uint64(collAllreduce) {
		return 0, errShmByMessages
	}
	if d>>40 != desc>>40 {
		return 0, s.fail(errorf(ErrCount, name, "rank %d called %s with root %d where this rank calls %s with root %d: the ranks' calls differ",
			j, collNames[min(d>>56, uint64(collKinds-1))], int16(d>>40), name, int16(desc>>40)))
	}
	return int(d & (1<<40 - 1)), nil
}

// An Allreduce on a communicator with an area that goes by messages (its
// count is over what goes through the area) still publishes its
// collective number, with shmDescMsgs: a rank whose count put its call
// through the area finds it among the others' descriptors
// (errShmByMessages) and runs its call by messages too, so that ranks
// whose counts differ across the threshold get the messages' error
// rather than wait for each other on two paths.
var (
	shmDescMsgs      = shmDesc(collAllreduce, -2, 0)
	errShmByMessages = errors.New("mpi: a rank runs this Allreduce by messages")
)

// announce publishes, as this rank's part of its next collective, that it
// runs an Allreduce of nb bytes by messages.
func (s *collShm) announce(name string, nb int) error {
	if s.broken != nil {
		return nil // its lines are poisoned: nobody waits on them
	}
	s.seq++
	q := s.seq
	if err := s.free(name, q, false); err != nil {
		return err
	}
	s.publish(q, shmDescMsgs|uint64(nb)&(1<<40-1))
	return nil
}

// lengthErr is the error of a call of nb bytes whose root, or another
// rank, j has got bytes.
func (s *collShm) lengthErr(name string, j, got, nb int) error {
	if got > nb {
		return errorf(ErrTruncate, name, "rank %d has %d bytes for this rank's %d: the ranks' counts differ", j, got, nb)
	}
	return errorf(ErrCount, name, "rank %d has %d bytes where this rank has %d: the ranks' counts differ", j, got, nb)
}

// free returns once this rank may write its line of collective q, and its
// slot if slot: every other rank has entered collective q-Lines()+1
// (q-Slots()+1).
func (s *collShm) free(name string, q uint64, slot bool) error {
	depth := uint64(s.nlines)
	if slot {
		depth = uint64(s.slots)
	}
	if q < depth {
		return nil
	}
	need := q - depth + 1
	if s.minKnown >= need {
		return nil
	}
	least := ^uint64(0)
	for j := range s.n {
		if j == s.r {
			continue
		}
		if s.known[j] < need {
			// Its line of q-1 holds q-1 or later once it has entered
			// q-1: one line to read, where it may be a whole depth
			// ahead of what this rank needs.
			if v := asm.LoadAcquire64(&s.line(j, q-1)[wSeq]); v > s.known[j] && v&errBit == 0 {
				s.known[j] = v
			}
			if s.known[j] < need {
				if err := s.wait(name, j, need); err != nil {
					return err
				}
			}
		}
		least = min(least, s.known[j])
	}
	s.minKnown = least
	return nil
}

// publish makes this rank's line of collective q, with its descriptor
// (and data written before), visible, and wakes whoever waits for it.
func (s *collShm) publish(q, desc uint64) {
	l := s.line(s.r, q)
	l[wDesc] = desc
	asm.StoreRelease64(&l[wSeq], q)
	s.wakeAll()
}

// chunk returns the bytes each collective number of a message of nb
// bytes carries (the whole of one up to shmInline bytes), and how many
// collective numbers it takes.
func (s *collShm) chunk(nb int) (int, int) {
	if nb <= shmInline {
		return nb, 1
	}
	return s.slotBytes, (nb + s.slotBytes - 1) / s.slotBytes
}

// buf returns where rank j's data of collective q, of nb bytes, lies.
func (s *collShm) buf(j int, q uint64, nb int) []byte {
	if nb <= shmInline {
		return inline(s.line(j, q))[:nb]
	}
	return s.data[j][q%uint64(s.slots)][:nb]
}

// start begins a call on s: its failure, if an earlier one failed.
func (s *collShm) start() error { return s.broken }

// barrier: every rank publishes and waits for every other.
func (s *collShm) barrier(name string) error {
	if err := s.start(); err != nil {
		return err
	}
	s.seq++
	q := s.seq
	desc := shmDesc(collBarrier, 0, 0)
	if err := s.free(name, q, false); err != nil {
		return err
	}
	s.publish(q, desc)
	pvShmBarrier.Add(1) // after: the others wait for the publication, not for this
	_, err := s.waitAll(name, q, desc)
	return err
}

// waitAll waits for every other rank's collective q and checks its
// descriptor; it returns the first rank whose length differs from this
// one's (-1 if none), after waiting for them all.
func (s *collShm) waitAll(name string, q, desc uint64) (int, error) {
	odd := -1
	for j := range s.n {
		if j == s.r {
			continue
		}
		if err := s.wait(name, j, q); err != nil {
			return -1, err
		}
		nb, err := s.check(name, j, q, desc)
		if err != nil {
			return -1, err
		}
		if odd < 0 && uint64(nb) != desc&(1<<40-1) {
			odd = j
		}
	}
	s.minKnown = max(s.minKnown, q)
	return odd, nil
}

// bcast sends root's buf to every rank, a chunk per collective number.
// A rank whose buf's length differs from root's follows root's chunks,
// takes what fits, and returns ErrTruncate or ErrCount.
func (s *collShm) bcast(name string, buf []byte, root int) error {
	if err := s.start(); err != nil {
		return err
	}
	pvShmBcast.Add(1)
	desc := shmDesc(collBcast, root, len(buf))
	total := len(buf) // root's
	size, count := s.chunk(total)
	for k := 0; k < count; k++ {
		lo, hi := k*size, min((k+1)*size, total)
		s.seq++
		q := s.seq
		if err := s.free(name, q, s.r == root && total > shmInline); err != nil {
			return err
		}
		if s.r == root {
			copy(s.buf(s.r, q, hi-lo), buf[lo:hi])
			s.publish(q, desc)
			continue
		}
		s.publish(q, desc)
		if err := s.wait(name, root, q); err != nil {
			return err
		}
		if k == 0 {
			got, err := s.check(name, root, q, desc)
			if err != nil {
				return err
			}
			if got != total {
				total = got
				size, count = s.chunk(total)
				hi = min(size, total)
			}
		}
		if lo < len(buf) {
			copy(buf[lo:min(hi, len(buf))], s.buf(root, q, hi-lo))
		}
	}
	if total != len(buf) {
		return s.lengthErr(name, root, total, len(buf))
	}
	return nil
}

// reduce combines every rank's vector in rank order, into recv at root
// (root < 0: at every rank, Allreduce); mine is this rank's vector. Ranks
// whose vectors' lengths differ stop after the first chunk, which every
// rank's call takes, with ErrCount or ErrTruncate: the root (every rank
// of an Allreduce) sees the lengths in it, and a rank with more chunks
// to send looks at the root's before its second.
func (s *collShm) reduce(name string, a *collArgs, mine []byte, root int) error {
	if err := s.start(); err != nil {
		return err
	}
	all := root < 0
	kind := collReduce
	if all {
		kind = collAllreduce
		pvShmAllreduce.Add(1)
	} else {
		pvShmReduce.Add(1)
	}
	desc := shmDesc(kind, root, len(mine))
	size, count := s.chunk(len(mine))
	first := s.seq + 1
	for k := range count {
		lo, hi := k*size, min((k+1)*size, len(mine))
		if k == 1 && !all && s.r != root {
			if err := s.wait(name, root, first); err != nil {
				return err
			}
			got, err := s.check(name, root, first, desc)
			if err != nil {
				return err
			}
			if got != len(mine) {
				return s.lengthErr(name, root, got, len(mine))
			}
		}
		s.seq++
		q := s.seq
		if err := s.free(name, q, len(mine) > shmInline); err != nil {
			return err
		}
		copy(s.buf(s.r, q, hi-lo), mine[lo:hi])
		s.publish(q, desc)
		if !all && s.r != root {
			continue
		}
		odd, err := s.waitAll(name, q, desc)
		if err == errShmByMessages && k > 0 { // only a first chunk may go by messages
			return s.fail(errorf(ErrCount, name, "a rank ran an Allreduce by messages where this rank's was in its chunk at %d bytes: the ranks' calls differ", lo))
		}
		if err != nil {
			return err
		}
		if odd >= 0 {
			return s.lengthErr(name, odd, int(s.line(odd, q)[wDesc]&(1<<40-1)), len(mine))
		}
		out := a.recv[lo:hi]
		for j := s.n - 1; j >= 0; j-- {
			in := s.buf(j, q, hi-lo)
			if j == s.r && (!a.inPlace || j == s.n-1) {
				in = mine[lo:hi] // its own part: see the top of this file
			}
			if j == s.n-1 {
				copy(out, in)
				continue
			}
			a.k(in, out)
		}
	}
	return nil
}

// shmCollective runs a's collective through c's collective area and
// reports whether it did; if not, it runs by messages.
func (c *Comm) shmCollective(a *collArgs) (bool, error) {
	name := collNames[a.kind]

	nb := len(a.recv)
	switch a.kind {
	case collReduce:
		nb = len(a.send)
		if a.inPlace {
			nb = len(a.recv)
		}
	case collAllgather:
		nb = len(a.send) // its block
		if a.inPlace {
			nb = len(a.recv) / c.size
		}
	}
	s, err := c.shmFor(name, a.kind, nb)
	if s == nil {
		if err == nil && a.kind == collAllreduce && c.shmState == shmOn {
			if err := c.collReady(name, a); err != nil {
				return true, err
			}
			if err := c.shm.announce(name, nb); err != nil {
				return true, err
			}
		}
		return err != nil, err
	}
	if err := c.collReady(name, a); err != nil {
		return true, err
	}
	switch a.kind {
	case collBcast:
		err = s.bcast(name, a.recv, a.root)
	case collReduce:
		mine := a.send
		if c.rank == a.root && a.inPlace {
			mine = a.recv
		}
		err = s.reduce(name, a, mine, a.root)
	case collAllreduce:
		mine := a.send
		if a.inPlace {
			mine = a.recv
		}
		if s.rsag(nb) {
			err = s.allreduceRSAG(name, a, mine)
		} else {
			err = s.reduce(name, a, mine, -1)
		}
		if err == errShmByMessages { // another rank's count sent it by messages
			return false, nil
		}
	case collAllgather, collAlltoall:
		err = s.exchange(name, a)
	}
	return true, err
}

// exchange runs an Allgather or an Alltoall whose rank's part fits its
// flag line: each rank publishes its part (an Allgather's block, an
// Alltoall's whole send; in place, read from recv before recv is
// written) and copies from every rank's, its own included, block i of
// recv: the Allgather's whole part of rank i, the Alltoall's block of
// it for this rank.
func (s *collShm) exchange(name string, a *collArgs) error {
	if err := s.start(); err != nil {
		return err
	}
	blk := a.count
	mine, off := a.send, 0
	if a.kind == collAllgather {
		pvShmAllgather.Add(1)
		if a.inPlace {
			mine = a.recv[s.r*blk : (s.r+1)*blk]
		}
	} else {
		pvShmAlltoall.Add(1)
		if a.inPlace {
			mine = a.recv
		}
		off = s.r * blk
	}
	q, err := s.publishMine(name, a.kind, mine)
	if err != nil {
		return err
	}
	for j := range s.n {
		if j == s.r { // its own part from mine (see the top of this file); in place, already there
			if !a.inPlace {
				copy(a.recv[j*blk:(j+1)*blk], mine[off:])
			}
			continue
		}
		copy(a.recv[j*blk:(j+1)*blk], s.buf(j, q, len(mine))[off:])
	}
	return nil
}

// publishMine publishes mine (at most shmInline bytes) as this rank's
// data of the next collective, of kind, and waits for every other
// rank's, which must be as long; it returns the collective's number.
func (s *collShm) publishMine(name string, kind collKind, mine []byte) (uint64, error) {
	desc := shmDesc(kind, -1, len(mine))
	s.seq++
	q := s.seq
	if err := s.free(name, q, false); err != nil { // at most a line's
		return 0, err
	}
	copy(s.buf(s.r, q, len(mine)), mine)
	s.publish(q, desc)
	odd, err := s.waitAll(name, q, desc)
	if err != nil {
		return 0, err
	}
	if odd >= 0 {
		return 0, s.lengthErr(name, odd, int(s.line(odd, q)[wDesc]&(1<<40-1)), len(mine))
	}
	return q, nil
}
