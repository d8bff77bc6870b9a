package mpi

import (
	"unsafe"

	"github.com/tachyon-hpc/tachyon/cvar"
)

// Small allreduces through the shared-memory collective area: up to
// mpi_coll_shm_allreduce_small bytes on any host, and those of up to a flag
// line's data on a path of their own. Two ranks' allreduce loop is as fast
// as one rank learns that the other published: every instruction between
// seeing the last flag of one call and publishing the next call's lies on
// that path. So an Allreduce of up to a line's data skips the general
// call's layers (its argument record, its kernel lookup by type, its byte
// copies) and runs collshm.go's protocol on the caller's elements: each
// rank writes its vector into its line of the collective and publishes;
// once every rank has, each combines the vectors in rank order, its own
// read from its vector rather than its line, Sum and Prod in line in the
// caller's type.
//
// The lines, numbers and descriptors are those of collshm.go, so that a
// call on this path and one on the general path (a user operation, a
// MaxLoc, an intercepted call) meet as any two calls through the area do.

// collShmSmall bounds the Allreduces that take this path.
var collShmSmall = cvar.NewInt("mpi_coll_shm_allreduce_small", 1024,
	"Largest Allreduce, in bytes, that runs through the shared-memory collective area (mpi_coll_shm) on any host, whatever mpi_coll_shm_max says: each rank publishes its vector (in its flag line, or a data slot) and combines every rank's, in rank order, once all have published, where by messages it waits for a peer at each step; up to a flag line's data (48 bytes), with a predefined operation other than MaxLoc and MinLoc, outside interception, by a path of its own without the general call's layers. On this project's VM two ranks' 64 B to 1 KiB allreduces took 0.31-0.66 us through the area against 0.34-0.91 by messages, 2 and 4 KiB about as long, and 8 KiB longer (docs/collectives.md). 0: only mpi_coll_shm_max and mpi_coll_shm_over_max decide. Every rank must have the same.",
	cvar.WithCategory("mpi"), cvar.WithRange(0, 1<<40), cvar.WithUnit("bytes"))

// small reports whether an Allreduce of nb bytes goes through the area as
// a small one (mpi_coll_shm_allreduce_small).
func (s *collShm) small(nb int) bool { return int64(nb) <= collShmSmall.Get() }

// allreduceSmall runs Allreduce on c's collective area if the call may take
// the small path, and reports whether it did.
func allreduceSmall[T Numeric](c *Comm, send, recv []T, op ReduceOp) (bool, error) {
	var zero T
	nb := len(recv) * int(unsafe.Sizeof(zero))
	if c == nil || c.shmState != shmOn || intercepted() || len(recv) == 0 || nb > shmInline ||
		send != nil && len(send) != len(recv) || op.kind == opNone || op.kind >= opMaxLoc || !c.shm.small(nb) {
		return false, nil
	}
	const name = "Allreduce"
	if err := c.check(name); err != nil {
		return true, err
	}
	if err := c.collectiveLive(name); err != nil {
		return true, c.fail(err)
	}
	var k kernel // Sum and Prod apply to every Numeric type, in line
	if op.kind != opSum && op.kind != opProd {
		var err error
		if k, err = kernelFor(name, op, dtypeOf[T]()); err != nil {
			return true, c.fail(err)
		}
	}
	err := shmAllreduceSmall(c.shm, send, recv, op.kind, k)
	if err == errShmByMessages { // another rank's count is over the threshold
		a := typed(collAllreduce, send, recv)
		a.op = op
		err = c.msgCollective(&a)
	}
	return true, c.fail(err)
}

// shmAllreduceSmall is collShm.reduce's Allreduce of one line's data on
// elements of T; send nil works in place.
func shmAllreduceSmall[T Numeric](s *collShm, send, recv []T, kind opKind, k kernel) error {
	const name = "Allreduce"
	if err := s.start(); err != nil {
		return err
	}
	mine := send
	if mine == nil {
		mine = recv
	}
	var zero T
	desc := shmDesc(collAllreduce, -1, len(mine)*int(unsafe.Sizeof(zero)))
	s.seq++
	q := s.seq
	if err := s.free(name, q, false); err != nil {
		return err
	}
	line := lineOf[T](s.line(s.r, q), len(mine))
	for i := range mine { // in line: a call to copy costs more for a few elements
		line[i] = mine[i]
	}
	s.publish(q, desc)
	pvShmAllreduce.Add(1) // after: the others wait for the publication, not for this
	odd, err := s.waitAll(name, q, desc)
	if err != nil {
		return err
	}
	if odd >= 0 {
		return s.lengthErr(name, odd, int(s.line(odd, q)[wDesc]&(1<<40-1)), int(desc&(1<<40-1)))
	}
	// In place, recv is overwritten by the last rank's vector first: this
	// rank's own then comes from its line, unless it is that last rank.
	own := mine
	if send == nil && s.r != s.n-1 {
		own = lineOf[T](s.line(s.r, q), len(mine))
	}
	for j := s.n - 1; j >= 0; j-- {
		in := own
		if j != s.r {
			in = lineOf[T](s.line(j, q), len(recv))
		}
		if j == s.n-1 {
			for i := range recv {
				recv[i] = in[i]
			}
			continue
		}
		combineInto(kind, k, in, recv)
	}
	return nil
}

// lineOf returns the data of flag line l as n elements of T (n elements
// fit: the caller checked).
func lineOf[T Numeric](l *[8]uint64, n int) []T {
	return unsafe.Slice((*T)(unsafe.Pointer(&l[wInline])), n)
}

// combineInto sets out to in op out element by element: Sum and Prod in
// line, the others through their kernel k, which gives the same results.
func combineInto[T Numeric](kind opKind, k kernel, in, out []T) {
	in = in[:len(out)]
	switch kind {
	case opSum:
		for i := range out {
			out[i] += in[i]
		}
	case opProd:
		for i := range out {
			out[i] *= in[i]
		}
	default:
		k(AsBytes(in), AsBytes(out))
	}
}
