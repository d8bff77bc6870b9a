package mpi

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// refBlock is one block of a reference layout: n bytes at off.
type refBlock struct{ off, n int }

// stridedBlocks is the reference form of Strided(blocks, blockLen, stride).
func stridedBlocks(blocks, blockLen, stride int) []refBlock {
	var bs []refBlock
	for i := range blocks {
		bs = append(bs, refBlock{i * stride, blockLen})
	}
	return bs
}

// refPack gathers the blocks of src, the plain way.
func refPack(bs []refBlock, src []byte) []byte {
	out := []byte{}
	for _, b := range bs {
		if b.n == 0 {
			continue // an empty block may lie past the end of src
		}
		out = append(out, src[b.off:b.off+b.n]...)
	}
	return out
}

// refUnpack scatters src into the blocks of dst, byte by byte, until src
// runs out.
func refUnpack(bs []refBlock, dst, src []byte) int {
	k := 0
	for _, b := range bs {
		for j := range b.n {
			if k == len(src) {
				return k
			}
			dst[b.off+j] = src[k]
			k++
		}
	}
	return k
}

// refFacts returns the size and extent of the blocks, and whether two of
// them share a byte.
func refFacts(bs []refBlock) (size, extent int, overlap bool) {
	owner := map[int]bool{}
	for _, b := range bs {
		size += b.n
		if b.n > 0 {
			extent = max(extent, b.off+b.n)
		}
		for j := range b.n {
			if owner[b.off+j] {
				overlap = true
			}
			owner[b.off+j] = true
		}
	}
	return size, extent, overlap
}

// layoutPattern returns n bytes that differ from their neighbours and from 0.
func layoutPattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i%251 + 1)
	}
	return b
}

// checkLayout checks every operation of l against the reference blocks bs.
func checkLayout(t *testing.T, l Layout, bs []refBlock) {
	t.Helper()
	size, extent, overlap := refFacts(bs)
	if l.Size() != size || PackSize(l) != size || l.Extent() != extent || l.Overlaps() != overlap {
		t.Fatalf("%v: size %d extent %d overlap %v, want %d %d %v", bs, l.Size(), l.Extent(), l.Overlaps(), size, extent, overlap)
	}
	src := layoutPattern(extent)
	want := refPack(bs, src)

	// Pack, by method and by function, into a buffer with room to spare.
	for _, pack := range []func(dst []byte) (int, error){
		func(dst []byte) (int, error) { return l.Pack(dst, src) },
		func(dst []byte) (int, error) { return Pack(l, src, dst) },
	} {
		dst := make([]byte, size+3)
		n, err := pack(dst)
		if err != nil || n != size || !bytes.Equal(dst[:n], want) || !bytes.Equal(dst[n:], []byte{0, 0, 0}) {
			t.Fatalf("%v: Pack = %d, %v: %v, want %v", bs, n, err, dst, want)
		}
	}
	// Pack errors, with nothing written.
	if extent > 0 {
		dst := make([]byte, size)
		_, err := l.Pack(dst, src[:extent-1])
		mustClass(t, err, ErrBuffer)
		if !bytes.Equal(dst, make([]byte, size)) {
			t.Fatalf("%v: failed Pack wrote", bs)
		}
	}
	if size > 0 {
		dst := make([]byte, size-1)
		_, err := l.Pack(dst, src)
		mustClass(t, err, ErrTruncate)
		if !bytes.Equal(dst, make([]byte, size-1)) {
			t.Fatalf("%v: failed Pack wrote", bs)
		}
	}

	if overlap {
		_, err := l.Unpack(make([]byte, extent), want)
		mustClass(t, err, ErrArg)
		return
	}
	// Unpack of the whole message, of every short prefix, and of a longer
	// one, into a zeroed buffer with room to spare: exactly the covered
	// bytes change.
	lengths := []int{0, 1, size / 2, size - 1, size, size + 1, size + 2}
	if size <= 64 {
		lengths = lengths[:0]
		for m := 0; m <= size+2; m++ {
			lengths = append(lengths, m)
		}
	}
	for _, m := range lengths {
		if m < 0 {
			continue
		}
		msg := append(bytes.Clone(want), 0xEE, 0xEE)[:m]
		got := make([]byte, extent+2)
		ref := make([]byte, extent+2)
		var n int
		var err error
		if m%2 == 0 {
			n, err = l.Unpack(got, msg)
		} else {
			n, err = Unpack(l, msg, got)
		}
		refN := refUnpack(bs, ref, msg)
		if err != nil || n != refN || n != min(m, size) || !bytes.Equal(got, ref) {
			t.Fatalf("%v: Unpack of %d bytes = %d, %v: %v, want %d %v", bs, m, n, err, got, refN, ref)
		}
	}
	if extent > 0 {
		dst := make([]byte, extent-1)
		_, err := l.Unpack(dst, want)
		mustClass(t, err, ErrBuffer)
		if !bytes.Equal(dst, make([]byte, extent-1)) {
			t.Fatalf("%v: failed Unpack wrote", bs)
		}
	}
}

func TestLayoutContiguous(t *testing.T) {
	for _, n := range []int{0, 1, 7, 4096} {
		checkLayout(t, Contiguous(n), []refBlock{{0, n}})
	}
	var zero Layout
	checkLayout(t, zero, nil)

	l := Contiguous(-1)
	if l.Size() != 0 || l.Extent() != 0 {
		t.Errorf("Contiguous(-1): size %d extent %d", l.Size(), l.Extent())
	}
	_, err := l.Pack(make([]byte, 8), make([]byte, 8))
	mustClass(t, err, ErrCount)
	_, err = l.Unpack(make([]byte, 8), make([]byte, 8))
	mustClass(t, err, ErrCount)
}

func TestLayoutStrided(t *testing.T) {
	for _, tc := range [][3]int{
		{3, 2, 5},   // gaps
		{4, 3, 3},   // touching: one block
		{1, 9, 100}, // one block
		{0, 4, 8},   // nothing
		{5, 0, 8},   // empty blocks
		{3, 4, 2},   // overlapping
		{4, 2, 0},   // one block, repeated
		{2, 1, 1000},
		{100, 1, 2},
	} {
		l, err := Strided(tc[0], tc[1], tc[2])
		if err != nil {
			t.Fatalf("Strided%v: %v", tc, err)
		}
		checkLayout(t, l, stridedBlocks(tc[0], tc[1], tc[2]))
	}
}

func TestLayoutStridedErrors(t *testing.T) {
	for _, tc := range []struct {
		blocks, blockLen, stride int
		cls                      error
	}{
		{-1, 1, 1, ErrCount},
		{1, -1, 1, ErrArg},
		{2, 1, -1, ErrArg},
		{math.MaxInt/2 + 1, 2, 2, ErrArg},     // size overflows
		{3, 2, math.MaxInt / 2, ErrArg},       // extent is MaxInt+1
		{2, math.MaxInt, math.MaxInt, ErrArg}, // size overflows
		{2, 2, math.MaxInt - 1, ErrArg},       // extent is MaxInt+1
	} {
		_, err := Strided(tc.blocks, tc.blockLen, tc.stride)
		mustClass(t, err, tc.cls)
	}
	// The largest extents that fit are accepted.
	for _, tc := range [][3]int{{2, 1, math.MaxInt - 1}, {3, 1, math.MaxInt / 2}} {
		l, err := Strided(tc[0], tc[1], tc[2])
		if err != nil || l.Extent() != math.MaxInt || l.Size() != tc[0] {
			t.Errorf("Strided%v = extent %d size %d, %v", tc, l.Extent(), l.Size(), err)
		}
	}
}

func TestLayoutBlocks(t *testing.T) {
	for _, bs := range [][]refBlock{
		{{0, 3}, {5, 2}, {9, 1}},
		{{9, 1}, {0, 3}, {5, 2}},         // out of order
		{{0, 2}, {2, 2}, {4, 2}},         // touching: merged
		{{4, 2}, {2, 2}, {0, 2}},         // touching backwards: not merged
		{{3, 0}, {100, 0}, {1, 2}},       // empty blocks ignored, even far ones
		{{7, 5}},                         // one block, not at the start
		{{7, 2}, {9, 3}},                 // merged into one block, not at the start
		{{0, 4}, {2, 4}},                 // overlap
		{{6, 2}, {0, 7}},                 // overlap, out of order
		{{5, 3}, {5, 3}},                 // the same block twice
		{{0, 1}, {10, 1}, {5, 6}},        // overlap with a non-neighbour
		{{8, 2}, {0, 2}, {4, 2}, {2, 2}}, // out of order, no overlap
		{},
	} {
		offs, lens := make([]int, len(bs)), make([]int, len(bs))
		for i, b := range bs {
			offs[i], lens[i] = b.off, b.n
		}
		l, err := Blocks(offs, lens)
		if err != nil {
			t.Fatalf("Blocks%v: %v", bs, err)
		}
		for i := range offs { // the layout keeps its own copy
			offs[i], lens[i] = 1<<20, 1<<20
		}
		checkLayout(t, l, bs)
	}
	l, _ := Blocks([]int{0, 2, 4}, []int{2, 2, 2})
	if l.offs != nil {
		t.Errorf("touching blocks were not merged into one")
	}
}

func TestLayoutBlocksErrors(t *testing.T) {
	for _, tc := range []struct {
		offs, lens []int
	}{
		{[]int{0, 1}, []int{1}},
		{[]int{-1}, []int{1}},
		{[]int{0, 4}, []int{1, -2}},
		{[]int{math.MaxInt}, []int{1}},
		{[]int{0, 0}, []int{math.MaxInt, 1}}, // size overflows
	} {
		_, err := Blocks(tc.offs, tc.lens)
		mustClass(t, err, ErrArg)
	}
}

// TestLayoutModel checks random layouts of both kinds against the
// reference.
func TestLayoutModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		var bs []refBlock
		var l Layout
		var err error
		if rng.IntN(2) == 0 {
			blocks, blockLen, stride := rng.IntN(10), rng.IntN(6), rng.IntN(12)
			bs = stridedBlocks(blocks, blockLen, stride)
			l, err = Strided(blocks, blockLen, stride)
		} else {
			n := rng.IntN(10)
			offs, lens := make([]int, n), make([]int, n)
			for i := range n {
				offs[i], lens[i] = rng.IntN(40), rng.IntN(6)
				if rng.IntN(3) == 0 && i > 0 { // often continue the last block
					offs[i] = offs[i-1] + lens[i-1]
				}
				bs = append(bs, refBlock{offs[i], lens[i]})
			}
			l, err = Blocks(offs, lens)
		}
		if err != nil {
			t.Fatal(err)
		}
		checkLayout(t, l, bs)
	}
}

func TestLayoutPackAllocs(t *testing.T) {
	strided, _ := Strided(64, 8, 24)
	general, _ := Blocks([]int{100, 0, 40, 300}, []int{8, 16, 30, 1})
	for name, l := range map[string]Layout{"strided": strided, "blocks": general} {
		src := layoutPattern(l.Extent())
		msg := make([]byte, l.Size())
		if a := testing.AllocsPerRun(100, func() {
			if _, err := l.Pack(msg, src); err != nil {
				t.Fatal(err)
			}
			if _, err := Pack(l, src, msg); err != nil {
				t.Fatal(err)
			}
		}); a != 0 {
			t.Errorf("%s: Pack allocates %v times", name, a)
		}
		if a := testing.AllocsPerRun(100, func() {
			if _, err := l.Unpack(src, msg); err != nil {
				t.Fatal(err)
			}
			if _, err := Unpack(l, msg, src); err != nil {
				t.Fatal(err)
			}
		}); a != 0 {
			t.Errorf("%s: Unpack allocates %v times", name, a)
		}
	}
}

// FuzzLayout builds a layout from the input, checks it against the
// reference, and tries Pack and Unpack on buffers of any length: nothing
// may panic.
func FuzzLayout(f *testing.F) {
	f.Add([]byte{0, 3, 2, 5, 0, 0})
	f.Add([]byte{0, 4, 3, 1, 9, 2})
	f.Add([]byte{1, 3, 0, 3, 5, 2, 9, 1, 4, 4})
	f.Add([]byte{1, 2, 0, 4, 2, 4, 0, 0})
	f.Add([]byte{0, 0x80, 1, 1, 3, 3})
	f.Add([]byte{1, 0xff, 0, 1})
	f.Fuzz(func(t *testing.T, in []byte) {
		next := func() int { // a small signed value
			if len(in) == 0 {
				return 0
			}
			v := int(int8(in[0]))
			in = in[1:]
			return v
		}
		var bs []refBlock
		var l Layout
		var err error
		valid := true
		switch next() & 3 {
		case 0, 2:
			blocks, blockLen, stride := next(), next(), next()
			valid = blocks >= 0 && blockLen >= 0 && stride >= 0
			l, err = Strided(blocks, blockLen, stride)
			if valid {
				bs = stridedBlocks(blocks, blockLen, stride)
			}
		case 1:
			n := next() & 15
			offs, lens := make([]int, n), make([]int, n)
			for i := range n {
				offs[i], lens[i] = next(), next()
				valid = valid && offs[i] >= 0 && lens[i] >= 0
				bs = append(bs, refBlock{offs[i], lens[i]})
			}
			if next() == 1 { // mismatched lengths
				offs = append(offs, 0)
				valid = false
			}
			l, err = Blocks(offs, lens)
		default:
			n := next()
			valid = n >= 0
			l = Contiguous(n)
			bs = []refBlock{{0, n}}
			if !valid {
				_, err = l.Pack(nil, nil)
			}
		}
		if !valid {
			if err == nil {
				t.Fatalf("invalid layout accepted: %v", bs)
			}
			if ErrorClass(err) != ErrArg && ErrorClass(err) != ErrCount {
				t.Fatalf("invalid layout: %v", err)
			}
			return
		}
		if err != nil {
			t.Fatalf("%v: %v", bs, err)
		}
		checkLayout(t, l, bs)
		// Buffers of whatever lengths the rest of the input asks for.
		for len(in) >= 2 {
			a, b := make([]byte, next()&127), make([]byte, next()&127)
			if n, err := l.Pack(a, b); err == nil && n != l.Size() {
				t.Fatalf("Pack returned %d, not the size %d", n, l.Size())
			}
			if n, err := l.Unpack(a, b); err == nil && n != min(len(b), l.Size()) {
				t.Fatalf("Unpack returned %d", n)
			}
		}
	})
}

func BenchmarkLayoutPackStrided(b *testing.B) {
	// A column of a 512x512 matrix of float64 stored by rows.
	l, _ := Strided(512, 8, 512*8)
	src := make([]byte, l.Extent())
	msg := make([]byte, l.Size())
	b.SetBytes(int64(l.Size()))
	for b.Loop() {
		l.Pack(msg, src)
	}
}

func ExampleStrided() {
	// A 3x4 matrix of bytes stored by rows; its column 1 is 3 blocks of
	// one byte, a row's length apart, starting at byte 1.
	m := []byte{
		'a', 'b', 'c', 'd',
		'e', 'f', 'g', 'h',
		'i', 'j', 'k', 'l',
	}
	col, _ := Strided(3, 1, 4)
	msg := make([]byte, col.Size())
	n, _ := col.Pack(msg, m[1:])
	fmt.Printf("packed %d bytes: %s\n", n, msg[:n])

	// Scatter them back into column 3 of a blank matrix.
	blank := bytes.Repeat([]byte{'.'}, 12)
	col.Unpack(blank[3:], msg)
	fmt.Printf("%s\n%s\n%s\n", blank[0:4], blank[4:8], blank[8:12])
	// Output:
	// packed 3 bytes: bfj
	// ...b
	// ...f
	// ...j
}

func ExampleBlocks() {
	// Records of 4 bytes; the ones at indices 5, 1 and 2 migrate, in that
	// order.
	recs := []byte("r0__r1__r2__r3__r4__r5__")
	l, _ := Blocks([]int{5 * 4, 1 * 4, 2 * 4}, []int{4, 4, 4})
	msg := make([]byte, PackSize(l))
	Pack(l, recs, msg)
	fmt.Printf("%s (%d bytes)\n", msg, l.Size())

	// The receiver stores them in slots 3, 0 and 1 of its own array.
	mine := bytes.Repeat([]byte{'.'}, 16)
	into, _ := Blocks([]int{3 * 4, 0, 1 * 4}, []int{4, 4, 4})
	n, _ := Unpack(into, msg, mine)
	fmt.Printf("%s (%d bytes)\n", mine, n)
	// Output:
	// r5__r1__r2__ (12 bytes)
	// r1__r2__....r5__ (12 bytes)
}
