package mpi

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

var scLayout = scenario("layout", func(c *Comm) error {
	// Rank 0 sends every other 3-byte block of a matrix row; rank 1
	// receives it into a general layout, then contiguously.
	sl, err := Strided(4, 3, 6)
	if err != nil {
		return err
	}
	gl, err := Blocks([]int{20, 0, 10, 30}, []int{3, 3, 3, 3})
	if err != nil {
		return err
	}
	src := pattern(24, 9)
	if c.Rank() == 0 {
		if err := c.SendLayout(src, sl, 1, 1); err != nil {
			return err
		}
		return c.SendLayout(src, sl, 1, 2)
	}
	dst := make([]byte, 40)
	st, err := c.RecvLayout(dst, gl, 0, 1)
	if err != nil || st.Count != 12 {
		return fmt.Errorf("recv layout: %+v %v", st, err)
	}
	want := make([]byte, 40)
	for i, off := range []int{20, 0, 10, 30} {
		copy(want[off:off+3], src[i*6:i*6+3])
	}
	if !bytes.Equal(dst, want) {
		return fmt.Errorf("scattered %v, want %v", dst, want)
	}
	// A message longer than the receive layout is truncated.
	small, _ := Strided(2, 3, 6)
	st, err = c.RecvLayout(make([]byte, 12), small, 0, 2)
	if !errors.Is(err, ErrTruncate) || st.Count != 6 {
		return fmt.Errorf("truncated layout receive: %+v %v", st, err)
	}
	return nil
})

func TestLayoutSendRecv(t *testing.T) { both(t, 2, scLayout) }
