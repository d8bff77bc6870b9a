package mpi

import (
	"bytes"
	"fmt"
	"testing"
)

// TestCollectiveLayouts: the Layout forms move the bytes a strided
// layout picks (every other 2-byte pair) and leave the others alone.
func TestCollectiveLayouts(t *testing.T) {
	err := Run(3, func(c *Comm) error {
		n, r := c.Size(), c.Rank()
		strided := func(blocks int) Layout {
			l, err := Strided(blocks, 2, 4)
			if err != nil {
				t.Fatal(err)
			}
			return l
		}
		fill := func(blocks int, tag byte) []byte { // picked bytes tag, others 0xee
			b := bytes.Repeat([]byte{0xee}, 4*blocks)
			for i := 0; i < blocks; i++ {
				b[4*i], b[4*i+1] = tag, byte(i)
			}
			return b
		}
		picked := func(b []byte, blocks int) []byte {
			var out []byte
			for i := 0; i < blocks; i++ {
				out = append(out, b[4*i], b[4*i+1])
				if b[4*i+2] != 0xee || b[4*i+3] != 0xee {
					t.Errorf("rank %d: a byte outside the layout changed", r)
				}
			}
			return out
		}
		// Bcast: 3 pairs from root 1.
		b := bytes.Repeat([]byte{0xee}, 12)
		if r == 1 {
			b = fill(3, 7)
		}
		if err := c.BcastLayout(b, strided(3), 1); err != nil {
			return err
		}
		if got := picked(b, 3); !bytes.Equal(got, picked(fill(3, 7), 3)) {
			return fmt.Errorf("BcastLayout: %v", got)
		}
		// Gather to 0 of 2 pairs each, root's receive strided over 2n pairs;
		// the senders' layouts contiguous.
		recv := bytes.Repeat([]byte{0xee}, 4*2*n)
		if err := c.GatherLayout([]byte{byte(r), 1, byte(r), 2}, Contiguous(4), recv, strided(2*n), 0); err != nil {
			return err
		}
		if r == 0 {
			got := picked(recv, 2*n)
			for k := 0; k < n; k++ {
				if !bytes.Equal(got[4*k:4*k+4], []byte{byte(k), 1, byte(k), 2}) {
					return fmt.Errorf("GatherLayout: %v", got)
				}
			}
		}
		// Scatter from 2: each rank gets 1 pair into a strided buffer.
		sc := make([]byte, 2*n)
		for k := 0; k < n; k++ {
			sc[2*k], sc[2*k+1] = byte(10+k), 9
		}
		rb := bytes.Repeat([]byte{0xee}, 4)
		if err := c.ScatterLayout(sc, Contiguous(2*n), rb, strided(1), 2); err != nil {
			return err
		}
		if got := picked(rb, 1); !bytes.Equal(got, []byte{byte(10 + r), 9}) {
			return fmt.Errorf("ScatterLayout: %v", got)
		}
		// Allgather and Alltoall: strided both sides.
		ag := bytes.Repeat([]byte{0xee}, 4*n)
		if err := c.AllgatherLayout(fill(1, byte(r)), strided(1), ag, strided(n)); err != nil {
			return err
		}
		for k, got := 0, picked(ag, n); k < n; k++ {
			if got[2*k] != byte(k) {
				return fmt.Errorf("AllgatherLayout: %v", got)
			}
		}
		a2s, a2r := make([]byte, 4*n), bytes.Repeat([]byte{0xee}, 4*n)
		for k := 0; k < n; k++ {
			a2s[4*k], a2s[4*k+1] = byte(r), byte(k)
		}
		if err := c.AlltoallLayout(a2s, strided(n), a2r, strided(n)); err != nil {
			return err
		}
		for k, got := 0, picked(a2r, n); k < n; k++ {
			if got[2*k] != byte(k) || got[2*k+1] != byte(r) {
				return fmt.Errorf("AlltoallLayout: %v", got)
			}
		}
		return c.Finalize()
	})
	if err != nil {
		t.Fatal(err)
	}
}
