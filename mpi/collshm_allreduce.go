package mpi

import (
	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// Large allreduces through the shared-memory collective area: a
// reduce-scatter and an allgather, chunk by chunk, in which every CPU
// reduces a part of the vector at once.
//
// The vector goes in chunks of a data slot (engine_coll_shm_slot_bytes),
// each chunk cut in one segment per rank (evenly, at multiples of 64
// bytes). A chunk takes two collective numbers, q and q+1; rank j:
//
//  1. copies its vector's part of the chunk, all but segment j, into its
//     slot of q, and publishes q;
//  2. once every other rank has published q, combines segment j of every
//     rank's part in rank order (its own from its vector, the others'
//     from their slots of q) into its slot of q+1, copies that into its
//     result, and publishes q+1;
//  3. once every other rank has published q+1, copies their segments of
//     the result from their slots of q+1.
//
// A rank reads the slots of a collective number only before it publishes
// the next, as collshm.go's protocol wants, so that the slots are reused
// as there. Each element is combined once, by one rank, in rank order: a
// non-commutative operation keeps its order and every rank gets the same
// bits. Per rank and byte of the vector it moves (n-1)/n of a copy in,
// 1/n of a reduction and its copy, and (n-1)/n of a copy out, where
// collshm.go's reduce has every rank combine all of it; and all the ranks
// work at once.

// Control variable.
var collShmAllreduceLong = cvar.NewInt("mpi_coll_shm_allreduce_long", 64<<10,
	"Smallest Allreduce, in bytes, run through the shared-memory collective area (mpi_coll_shm) by reduce-scatter and allgather, a chunk of a data slot at a time (each rank combines a segment of every chunk, the others copy it out), whatever mpi_coll_shm_max says; smaller ones follow mpi_coll_shm_max. Every rank must have the same.",
	cvar.WithCategory("mpi"), cvar.WithRange(0, 1<<40), cvar.WithUnit("bytes"))

// collShmAllreduceOver lets the reduce-scatter run on an oversubscribed
// host.
var collShmAllreduceOver = cvar.NewBool("mpi_coll_shm_allreduce_oversubscribed", false,
	"Whether a large Allreduce (mpi_coll_shm_allreduce_long) runs through the shared-memory collective area also where the host's ranks outnumber its CPUs. Off, the default, such a host's allreduces run by messages: each chunk of the area's takes two steps in which every rank waits for every other, and with more ranks than CPUs each such step waits for the scheduler to run them all. Every rank must have the same.",
	cvar.WithCategory("mpi"))

// rsag reports whether an Allreduce of nb bytes runs by the reduce-scatter
// through the area (the same on every rank of the host).
func (s *collShm) rsag(nb int) bool {
	return int64(nb) >= collShmAllreduceLong.Get() && (collShmAllreduceOver.Get() || !s.h.Oversubscribed())
}

// Which path ran (performance variable).
var pvShmAllreduceRSAG = pvar.NewCounter("mpi_coll_shm_allreduce_scatter",
	"Allreduces run through a shared-memory collective area by reduce-scatter and allgather (mpi_coll_shm_allreduce_long); mpi_coll_shm_allreduce counts them too.", pvar.WithUnit("calls"))

// shmSubBlock is the piece of a segment reduced and copied out at once,
// so that the reduction's result is still in the cache when it is copied.
const shmSubBlock = 16 << 10

// segment returns the bounds, in bytes, of segment i of n of a chunk of
// nb bytes: multiples of 64 (the units of any type divide it), the last
// ending at nb.
func segment(i, n, nb int) (int, int) {
	at := func(i int) int {
		if i >= n {
			return nb
		}
		return i * nb / n &^ 63
	}
	return at(i), at(i + 1)
}

// allreduceRSAG combines every rank's vector mine into every rank's
// a.recv (see above). Ranks whose vectors' lengths differ see it in the
// first chunk, which every rank's call takes, and stop after it with
// ErrCount or ErrTruncate.
func (s *collShm) allreduceRSAG(name string, a *collArgs, mine []byte) error {
	if err := s.start(); err != nil {
		return err
	}
	pvShmAllreduce.Add(1)
	pvShmAllreduceRSAG.Add(1)
	nb := len(mine)
	desc := shmDesc(collAllreduce, -1, nb)
	size := s.slotBytes
	k3 := kernel3For(a.op, a.dt)
	for lo := 0; lo == 0 || lo < nb; lo += size {
		hi := min(lo+size, nb)
		cb := hi - lo
		part, out := mine[lo:hi], a.recv[lo:hi]
		myLo, myHi := segment(s.r, s.n, cb)

		// 1. This rank's part of the chunk, but for its own segment.
		q := s.seq + 1
		s.seq = q + 1
		if err := s.free(name, q, true); err != nil {
			return err
		}
		slot := s.buf(s.r, q, cb)
		copy(slot[:myLo], part[:myLo])
		copy(slot[myHi:], part[myHi:])
		s.publish(q, desc)
		odd, err := s.waitAll(name, q, desc)
		if err == errShmByMessages {
			if lo > 0 { // a later chunk: the ranks' calls are out of step
				return s.fail(errorf(ErrCount, name, "a rank ran an Allreduce by messages where this rank's was in its chunk at %d bytes: the ranks' calls differ", lo))
			}
			s.seq = q // as the rank that runs it by messages: one number
		}
		if err != nil {
			return err
		}
		if odd >= 0 {
			return s.lengthErr(name, odd, int(s.line(odd, q)[wDesc]&(1<<40-1)), nb)
		}

		// 2. Its segment of the result, in rank order.
		if err := s.free(name, q+1, true); err != nil {
			return err
		}
		res := s.buf(s.r, q+1, cb)
		for b := myLo; b < myHi; b += shmSubBlock {
			e := min(b+shmSubBlock, myHi)
			dst := res[b:e]
			j := s.n - 2
			if k3 != nil {
				k3(s.segOf(q, j, part, b, e, cb), s.segOf(q, j+1, part, b, e, cb), dst)
				j--
			} else {
				copy(dst, s.segOf(q, s.n-1, part, b, e, cb))
			}
			for ; j >= 0; j-- {
				a.k(s.segOf(q, j, part, b, e, cb), dst)
			}
			copy(out[b:e], dst)
		}
		s.publish(q+1, desc)

		// 3. The others' segments of the result.
		if _, err := s.waitAll(name, q+1, desc); err != nil {
			return err
		}
		for j := range s.n {
			if j != s.r {
				jLo, jHi := segment(j, s.n, cb)
				copy(out[jLo:jHi], s.buf(j, q+1, cb)[jLo:jHi])
			}
		}
	}
	return nil
}

// segOf returns bytes [b, e) of rank j's part of the chunk of collective
// q, of cb bytes: this rank's own from part, another's from its slot.
func (s *collShm) segOf(q uint64, j int, part []byte, b, e, cb int) []byte {
	if j == s.r {
		return part[b:e]
	}
	return s.buf(j, q, cb)[b:e]
}
