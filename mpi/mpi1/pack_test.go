package mpi1

import (
	"fmt"
	"testing"
)

// TestPack: SPACK and SUNPACK, GPACK and GUNPACK round trips, with the
// seed's conventions (block i of GPACK is nlist(i) bytes at ilist(i),
// counted from 0), overlapping blocks packed but not unpacked, and every
// argument error.
func TestPack(t *testing.T) { both(t, 1, scPack) }

var scPack = scenario("pack", func(p *Proc) error {
	buf := []byte("abcdefghij")
	msg := make([]byte, 6)
	if err := expect(p, "SPACK", p.SPACK(buf, 2, 3, 3, msg), 6, 0); err != nil {
		return err
	}
	if string(msg) != "abdegh" {
		return fmt.Errorf("SPACK packed %q", msg)
	}
	out := []byte("..........")
	if err := expect(p, "SUNPACK", p.SUNPACK(out, 2, 3, 3, msg), 6, 0); err != nil {
		return err
	}
	if string(out) != "ab.de.gh.." {
		return fmt.Errorf("SUNPACK stored %q", out)
	}
	if err := expect(p, "SPACK overlapping", p.SPACK(buf, 3, 1, 2, msg), 6, 0); err != nil {
		return err
	}
	if string(msg) != "abcbcd" {
		return fmt.Errorf("overlapping SPACK packed %q", msg)
	}
	nl, il := []int{3, 1, 2}, []int{7, 0, 2}
	if err := expect(p, "GPACK", p.GPACK(buf, nl, il, 3, msg), 6, 0); err != nil {
		return err
	}
	if string(msg) != "hijacd" {
		return fmt.Errorf("GPACK packed %q", msg)
	}
	out = []byte("..........")
	if err := expect(p, "GUNPACK", p.GUNPACK(out, nl, il, 3, msg), 6, 0); err != nil {
		return err
	}
	if string(out) != "a.cd...hij" {
		return fmt.Errorf("GUNPACK stored %q", out)
	}
	return first(
		expect(p, "SPACK of no blocks", p.SPACK(nil, 4, 4, 0, nil), 0, 0),
		expect(p, "GPACK of 2 of 3 blocks", p.GPACK(buf, nl, il, 2, msg), 4, 0),
		fails(p, "SPACK stride -1", p.SPACK(buf, 2, -1, 3, msg), ErrStride),
		fails(p, "SUNPACK stride -3", p.SUNPACK(out, 2, -3, 3, msg), ErrStride),
		fails(p, "SUNPACK overlapping", p.SUNPACK(out, 3, 1, 2, msg), ErrStride),
		fails(p, "SPACK lenblk -2", p.SPACK(buf, -2, 3, 3, msg), ErrBlockSize),
		fails(p, "SUNPACK lenblk -2", p.SUNPACK(out, -2, 3, 3, msg), ErrBlockSize),
		fails(p, "SPACK nblk -1", p.SPACK(buf, 2, 3, -1, msg), ErrItemSize),
		fails(p, "SPACK beyond buf", p.SPACK(buf, 2, 5, 3, msg), ErrBufSize),
		fails(p, "SPACK beyond msg", p.SPACK(buf, 2, 3, 3, msg[:5]), ErrBufSize),
		fails(p, "SUNPACK beyond buf", p.SUNPACK(out[:7], 2, 3, 3, msg), ErrBufSize),
		fails(p, "SUNPACK beyond msg", p.SUNPACK(out, 2, 3, 3, msg[:4]), ErrBufSize),
		fails(p, "GPACK nlist -1", p.GPACK(buf, []int{-1}, []int{0}, 1, msg), ErrBlockSize),
		fails(p, "GUNPACK nlist -1", p.GUNPACK(out, []int{-1}, []int{0}, 1, msg), ErrBlockSize),
		fails(p, "GPACK ilist -1", p.GPACK(buf, []int{1}, []int{-1}, 1, msg), ErrBufSize),
		fails(p, "GPACK nblk -1", p.GPACK(buf, nl, il, -1, msg), ErrItemSize),
		fails(p, "GPACK nblk beyond nlist", p.GPACK(buf, nl[:2], il, 3, msg), ErrItemSize),
		fails(p, "GUNPACK nblk beyond ilist", p.GUNPACK(out, nl, il[:1], 2, msg), ErrItemSize),
		fails(p, "GUNPACK overlapping", p.GUNPACK(out, []int{2, 2}, []int{0, 1}, 2, msg), ErrItemSize),
		fails(p, "GPACK beyond buf", p.GPACK(buf, []int{2}, []int{9}, 1, msg), ErrBufSize),
		fails(p, "GPACK beyond msg", p.GPACK(buf, nl, il, 3, msg[:5]), ErrBufSize),
		fails(p, "GUNPACK beyond msg", p.GUNPACK(out, nl, il, 3, msg[:5]), ErrBufSize),
	)
})
