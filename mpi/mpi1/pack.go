package mpi1

import "github.com/tachyon-hpc/tachyon/mpi"

// strided returns the layout of nblk blocks of lenblk bytes whose starts
// lie stride bytes apart, or the error status of bad arguments: a
// negative stride 7, a negative block length 8, a negative block count 9;
// and, for a scatter (scatter true), blocks that overlap 7, since the
// bytes they share would have two values.
func strided(lenblk, stride, nblk int, scatter bool) (mpi.Layout, int) {
	switch {
	case stride < 0:
		return mpi.Layout{}, ErrStride
	case lenblk < 0:
		return mpi.Layout{}, ErrBlockSize
	case nblk < 0:
		return mpi.Layout{}, ErrItemSize
	case scatter && nblk > 1 && stride < lenblk:
		return mpi.Layout{}, ErrStride
	}
	l, err := mpi.Strided(nblk, lenblk, stride)
	if err != nil {
		return mpi.Layout{}, ErrBufSize // an extent beyond an int
	}
	return l, NoError
}

// blocks returns the layout of the first nblk blocks that nlist and ilist
// describe (block i: nlist[i] bytes at ilist[i]), or the error status of
// bad arguments: a block count that is negative or beyond either list 9,
// a negative block length 8, a negative offset 6 (a block outside the
// buffer); and, for a scatter, blocks that overlap 9.
func blocks(nlist, ilist []int, nblk int, scatter bool) (mpi.Layout, int) {
	if nblk < 0 || nblk > len(nlist) || nblk > len(ilist) {
		return mpi.Layout{}, ErrItemSize
	}
	for i := range nblk {
		if nlist[i] < 0 {
			return mpi.Layout{}, ErrBlockSize
		}
		if ilist[i] < 0 {
			return mpi.Layout{}, ErrBufSize
		}
	}
	l, err := mpi.Blocks(ilist[:nblk], nlist[:nblk])
	if err != nil {
		return mpi.Layout{}, ErrBufSize // a block or size beyond an int
	}
	if scatter && l.Overlaps() {
		return mpi.Layout{}, ErrItemSize
	}
	return l, NoError
}

// SPACK packs nblk blocks of lenblk bytes of buf, whose starts lie stride
// bytes apart, contiguously into msg (MPI_SPACK), and returns the
// length packed, lenblk*nblk. Blocks may overlap. A buf shorter than the
// blocks' extent, or a msg shorter than their length, is error status 6.
func (p *Proc) SPACK(buf []byte, lenblk, stride, nblk int, msg []byte) int {
	l, code := strided(lenblk, stride, nblk, false)
	if code != NoError {
		return p.fail(code)
	}
	return p.pack(l, buf, msg)
}

// SUNPACK unpacks the first lenblk*nblk bytes of msg into nblk blocks of
// lenblk bytes of buf whose starts lie stride bytes apart, the first at
// the start of buf (MPI_SUNPACK), and returns the length unpacked. The
// blocks must not overlap (error status 7). A buf shorter than the
// blocks' extent, or a msg shorter than their length, is error status 6.
func (p *Proc) SUNPACK(buf []byte, lenblk, stride, nblk int, msg []byte) int {
	l, code := strided(lenblk, stride, nblk, true)
	if code != NoError {
		return p.fail(code)
	}
	return p.unpack(l, buf, msg)
}

// GPACK packs the nblk blocks of buf that nlist and ilist describe
// (block i: nlist[i] bytes at ilist[i], counted from 0) contiguously
// into msg, in list order (MPI_GPACK), and returns the length packed.
func (p *Proc) GPACK(buf []byte, nlist, ilist []int, nblk int, msg []byte) int {
	l, code := blocks(nlist, ilist, nblk, false)
	if code != NoError {
		return p.fail(code)
	}
	return p.pack(l, buf, msg)
}

// GUNPACK unpacks msg's first bytes into the nblk blocks of buf that
// nlist and ilist describe, in list order (MPI_GUNPACK), and returns the
// length unpacked. The blocks must not overlap (error status 9).
func (p *Proc) GUNPACK(buf []byte, nlist, ilist []int, nblk int, msg []byte) int {
	l, code := blocks(nlist, ilist, nblk, true)
	if code != NoError {
		return p.fail(code)
	}
	return p.unpack(l, buf, msg)
}

// pack gathers l's bytes of buf into msg.
func (p *Proc) pack(l mpi.Layout, buf, msg []byte) int {
	if l.Extent() > len(buf) || l.Size() > len(msg) {
		return p.fail(ErrBufSize)
	}
	n, err := l.Pack(msg, buf)
	if err != nil {
		return p.failed(err)
	}
	return p.ok(n)
}

// unpack scatters msg's first l.Size() bytes into l's bytes of buf.
func (p *Proc) unpack(l mpi.Layout, buf, msg []byte) int {
	if l.Extent() > len(buf) || l.Size() > len(msg) {
		return p.fail(ErrBufSize)
	}
	n, err := l.Unpack(buf, msg[:l.Size()])
	if err != nil {
		return p.failed(err)
	}
	return p.ok(n)
}
