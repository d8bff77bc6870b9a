package mpi

import (
	"cmp"
	"math"
	"slices"
)

// Noncontiguous messages (the 1993 MPI1 proposal's strided and general
// gather/scatter: MPI_SSEND/SRECV and MPI_SPACK/SUNPACK for constant-stride
// blocks, MPI_GSEND/GRECV and MPI_GPACK/GUNPACK for arbitrary blocks).
//
// A Layout says which bytes of a buffer a message carries, and in what
// order. Sending with a layout gathers those bytes into one contiguous
// message (Pack); receiving scatters a contiguous message back into them
// (Unpack). The message on the wire is always contiguous, so the two sides
// may use different layouts of the same size, as MPI allows different
// datatypes with the same type signature.

// Layout describes the bytes of a buffer that a message carries: a
// sequence of blocks, each a run of contiguous bytes at an offset from the
// start of the buffer, taken in order. It plays the part of an MPI derived
// datatype over bytes (MPI_TYPE_VECTOR for Strided, MPI_TYPE_INDEXED for
// Blocks). Build one with Strided, Blocks or Contiguous; the zero Layout
// carries no bytes.
//
// A Layout is a small value that can be copied and used from several
// goroutines at once: nothing changes it after it is built.
type Layout struct {
	// Strided form, when offs is nil: n blocks of blen bytes, block i at
	// offset i*stride. Never blen == 0 unless n == 0.
	n, blen, stride int

	// General form: block i is lens[i] bytes at offs[i]. Empty blocks are
	// dropped, and blocks that continue one another merged, when the
	// layout is built; both slices are the layout's own.
	offs, lens []int

	size    int   // bytes carried
	extent  int   // smallest buffer holding every block
	overlap bool  // two blocks share a byte: Unpack refuses the layout
	err     error // set by Contiguous(n < 0); Pack and Unpack return it
}

// Contiguous returns the layout of the first n bytes of a buffer, the layout
// of an ordinary message (MPI_TYPE_CONTIGUOUS over bytes; the 1993 MPI1
// proposal's MPI_CSEND). A negative n gives a layout whose Pack and Unpack
// return ErrCount.
func Contiguous(n int) Layout {
	switch {
	case n < 0:
		return Layout{err: errorf(ErrCount, "Contiguous", "negative length %d", n)}
	case n == 0:
		return Layout{}
	}
	return Layout{n: 1, blen: n, stride: n, size: n, extent: n}
}

// Strided returns the layout of blocks blocks of blockLen bytes whose starts
// lie stride bytes apart, the first at the start of the buffer: block i is
// buf[i*stride : i*stride+blockLen]. It is the 1993 MPI1 proposal's
// constant-stride gather and scatter (MPI_SSEND, MPI_SRECV, MPI_SPACK,
// MPI_SUNPACK; MPI_TYPE_VECTOR over bytes), as used to send a row of a
// matrix stored by columns.
//
// A stride smaller than blockLen makes blocks overlap: such a layout may
// be packed (sent), which repeats the shared bytes, but not unpacked
// (received into), which MPI calls erroneous; see Overlaps.
//
// A negative blocks returns ErrCount; a negative blockLen or stride, or a
// layout whose extent does not fit in an int, returns ErrArg.
func Strided(blocks, blockLen, stride int) (_ Layout, err error) {
	defer selfHandles(&err)
	const op = "Strided"
	switch {
	case blocks < 0:
		return Layout{}, errorf(ErrCount, op, "negative block count %d", blocks)
	case blockLen < 0:
		return Layout{}, errorf(ErrArg, op, "negative block length %d", blockLen)
	case stride < 0:
		return Layout{}, errorf(ErrArg, op, "negative stride %d", stride)
	case blocks == 0 || blockLen == 0:
		return Layout{}, nil
	case blockLen > math.MaxInt/blocks || stride > 0 && blocks-1 > (math.MaxInt-blockLen)/stride:
		return Layout{}, errorf(ErrArg, op, "%d blocks of %d bytes %d apart do not fit in an int", blocks, blockLen, stride)
	case blocks == 1 || stride == blockLen:
		return Contiguous(blocks * blockLen), nil
	}
	return Layout{
		n: blocks, blen: blockLen, stride: stride,
		size:    blocks * blockLen,
		extent:  (blocks-1)*stride + blockLen,
		overlap: stride < blockLen,
	}, nil
}

// Blocks returns the layout of arbitrary blocks: block i is the lengths[i]
// bytes at offsets[i] from the start of the buffer, and the blocks are taken
// in the order listed, whatever their offsets. It is the 1993 MPI1
// proposal's general gather and scatter (MPI_GSEND, MPI_GRECV, MPI_GPACK,
// MPI_GUNPACK; MPI_TYPE_INDEXED over bytes), as used to send the records of
// a list of particles that migrate to another process. The slices are
// copied.
//
// Blocks that share bytes may be packed but not unpacked; see Overlaps.
// Slices of different lengths, a negative offset or length, or a block
// or total size beyond an int return ErrArg.
func Blocks(offsets, lengths []int) (_ Layout, err error) {
	defer selfHandles(&err)
	const op = "Blocks"
	if len(offsets) != len(lengths) {
		return Layout{}, errorf(ErrArg, op, "%d offsets but %d lengths", len(offsets), len(lengths))
	}
	var l Layout
	for i, off := range offsets {
		n := lengths[i]
		switch {
		case off < 0:
			return Layout{}, errorf(ErrArg, op, "block %d: negative offset %d", i, off)
		case n < 0:
			return Layout{}, errorf(ErrArg, op, "block %d: negative length %d", i, n)
		case n > math.MaxInt-off || n > math.MaxInt-l.size:
			return Layout{}, errorf(ErrArg, op, "block %d: %d bytes at %d overflow an int", i, n, off)
		case n == 0:
			continue
		}
		l.size += n
		l.extent = max(l.extent, off+n)
		if k := len(l.offs) - 1; k >= 0 && l.offs[k]+l.lens[k] == off {
			l.lens[k] += n // continues the previous block
			continue
		}
		l.offs = append(l.offs, off)
		l.lens = append(l.lens, n)
	}
	switch {
	case len(l.offs) == 0:
		return Layout{}, nil
	case len(l.offs) == 1 && l.offs[0] == 0:
		return Contiguous(l.size), nil
	}
	l.overlap = overlapping(l.offs, l.lens)
	return l, nil
}

// overlapping reports whether two of the non-empty blocks share a byte.
func overlapping(offs, lens []int) bool {
	ascending := true
	for i := 1; i < len(offs) && ascending; i++ {
		ascending = offs[i] >= offs[i-1]+lens[i-1]
	}
	if ascending {
		return false // the common case: no sort
	}
	order := make([]int, len(offs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(offs[a], offs[b]) })
	for i := 1; i < len(order); i++ {
		prev, cur := order[i-1], order[i]
		if offs[cur] < offs[prev]+lens[prev] {
			return true
		}
	}
	return false
}

// Size returns the number of bytes the layout carries: the length of the
// packed message.
func (l Layout) Size() int { return l.size }

// Extent returns the length of the smallest buffer that holds every block
// of the layout: the end of the block that ends last (empty blocks do not
// count). Pack and Unpack need a layout buffer at least this long.
func (l Layout) Extent() int { return l.extent }

// Overlaps reports whether two blocks of the layout share a byte. Such a
// layout can describe what to send, but receiving into it is erroneous in
// MPI (the order in which the shared bytes are written is unspecified), so
// Unpack rejects it with ErrArg.
func (l Layout) Overlaps() bool { return l.overlap }

// Pack gathers the blocks of src, in layout order, into dst contiguously,
// and returns the number of bytes written, Size (the 1993 MPI1 proposal's
// MPI_SPACK and MPI_GPACK; MPI_PACK). The result is the message a send with
// the layout carries. src and dst must not share memory.
//
// A src shorter than Extent returns ErrBuffer. A dst shorter than Size
// returns ErrTruncate, the class Open MPI's MPI_PACK reports for a pack
// buffer too small: the packed message would be cut short. Nothing is
// written on error. Pack does not allocate.
func (l Layout) Pack(dst, src []byte) (_ int, err error) {
	defer selfHandles(&err)
	if intercepted() {
		return packTooled(OpPack, l, src, dst)
	}
	return l.pack(dst, src)
}

// packTooled is Pack (OpPack) or Unpack (OpUnpack) through the
// interceptors: buf the bytes l describes, packed the contiguous ones.
func packTooled(op Op, l Layout, buf, packed []byte) (int, error) {
	call := newCall(op, nil)
	if p := current(); p != nil {
		call.Rank = p.ep.Rank()
	}
	call.Bytes, call.layout, call.buf, call.buf2 = l.Size(), l, buf, packed
	r, err := call.runResult()
	return r.Count, err
}

// pack is Pack with errors left to the caller's handler.
func (l Layout) pack(dst, src []byte) (int, error) {
	const op = "Pack"
	if l.err != nil {
		return 0, l.err
	}
	if len(src) < l.extent {
		return 0, errorf(ErrBuffer, op, "buffer of %d bytes is shorter than the layout's extent of %d", len(src), l.extent)
	}
	if len(dst) < l.size {
		return 0, errorf(ErrTruncate, op, "pack buffer of %d bytes is shorter than the layout's size of %d", len(dst), l.size)
	}
	k := 0
	if l.offs == nil {
		for i := range l.n {
			off := i * l.stride
			k += copy(dst[k:k+l.blen], src[off:off+l.blen])
		}
		return k, nil
	}
	for i, off := range l.offs {
		k += copy(dst[k:k+l.lens[i]], src[off:off+l.lens[i]])
	}
	return k, nil
}

// Unpack scatters the contiguous bytes of src into the blocks of dst, in
// layout order, and returns the number of bytes used (the 1993 MPI1
// proposal's MPI_SUNPACK and MPI_GUNPACK; MPI_UNPACK). It is what a receive
// with the layout does with the message that arrived. src and dst must not
// share memory.
//
// A src shorter than Size is a short message: its bytes fill the blocks
// in order, the last one partly, the rest of dst is left as it was, and
// the count says how far it went. A src longer than Size has only its
// first Size bytes used; the rest may be the next packed item, as with
// MPI_UNPACK's position (a receive reports such a message as
// ErrTruncate).
//
// A dst shorter than Extent returns ErrBuffer, and a layout whose blocks
// overlap returns ErrArg. Nothing is written on error. Unpack does not
// allocate.
func (l Layout) Unpack(dst, src []byte) (_ int, err error) {
	defer selfHandles(&err)
	if intercepted() {
		return packTooled(OpUnpack, l, dst, src)
	}
	return l.unpack(dst, src)
}

// unpack is Unpack with errors left to the caller's handler.
func (l Layout) unpack(dst, src []byte) (int, error) {
	const op = "Unpack"
	if l.err != nil {
		return 0, l.err
	}
	if l.overlap {
		return 0, errorf(ErrArg, op, "the layout's blocks overlap; receiving into it is erroneous")
	}
	if len(dst) < l.extent {
		return 0, errorf(ErrBuffer, op, "buffer of %d bytes is shorter than the layout's extent of %d", len(dst), l.extent)
	}
	n := min(len(src), l.size)
	k := 0
	if l.offs == nil {
		for i := 0; k < n; i++ {
			off := i * l.stride
			k += copy(dst[off:off+l.blen], src[k:n])
		}
		return k, nil
	}
	for i := 0; k < n; i++ {
		off := l.offs[i]
		k += copy(dst[off:off+l.lens[i]], src[k:n])
	}
	return k, nil
}

// Pack is l.Pack(dst, src) with the arguments in MPI_PACK's order: the
// buffer the layout describes, then the pack buffer.
func Pack(l Layout, src, dst []byte) (int, error) { return l.Pack(dst, src) }

// Unpack is l.Unpack(dst, src) with the arguments in MPI_UNPACK's order:
// the pack buffer, then the buffer the layout describes.
func Unpack(l Layout, src, dst []byte) (int, error) { return l.Unpack(dst, src) }

// PackSize returns the number of bytes Pack writes for l (MPI_PACK_SIZE):
// the length of pack buffer to allocate. It is l.Size().
func PackSize(l Layout) int { return l.size }
