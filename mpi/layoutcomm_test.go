package mpi

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// testLayouts returns the layouts the scenarios send and receive: every
// other 3-byte block of a 24-byte row, and four 3-byte blocks scattered
// over 40 bytes.
func testLayouts() (sl, gl Layout, err error) {
	if sl, err = Strided(4, 3, 6); err != nil {
		return sl, gl, err
	}
	gl, err = Blocks([]int{20, 0, 10, 30}, []int{3, 3, 3, 3})
	return sl, gl, err
}

var scLayout = scenario("layout", func(c *Comm) error {
	// Rank 0 sends every other 3-byte block of a matrix row; rank 1
	// receives it into a general layout, then contiguously.
	sl, gl, err := testLayouts()
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

// Layout messages in every mode (the 1993 MPI1 proposal's GSEND and GRECV):
// rank 0 sends the same strided layout of a row in each blocking and
// nonblocking mode, and rank 1 receives each with IrecvLayout into a general
// layout, completing them in other orders through Waitall, Wait and Test; a
// truncated and a cancelled nonblocking layout receive; the buffer a send
// packed may change once the call returns.
var scLayoutModes = scenario("layout-modes", func(c *Comm) error {
	sl, gl, err := testLayouts()
	if err != nil {
		return err
	}
	const modes = 8
	if c.Rank() == 0 {
		if err := c.BufferAttach(make([]byte, 1<<16)); err != nil {
			return err
		}
		if _, err := c.Recv(nil, 1, 99); err != nil { // rank 1's receives are posted: ready mode may go
			return err
		}
		var reqs []*Request
		for tag := range modes {
			src := pattern(24, tag)
			var r *Request
			var err error
			switch tag {
			case 0:
				err = c.SendLayout(src, sl, 1, tag)
			case 1:
				err = c.SsendLayout(src, sl, 1, tag)
			case 2:
				err = c.RsendLayout(src, sl, 1, tag)
			case 3:
				err = c.BsendLayout(src, sl, 1, tag)
			case 4:
				r, err = c.IsendLayout(src, sl, 1, tag)
			case 5:
				r, err = c.IssendLayout(src, sl, 1, tag)
			case 6:
				r, err = c.IrsendLayout(src, sl, 1, tag)
			case 7:
				r, err = c.IbsendLayout(src, sl, 1, tag)
			}
			if err != nil {
				return fmt.Errorf("mode %d: %v", tag, err)
			}
			if r != nil {
				reqs = append(reqs, r)
			}
		}
		if _, err := Waitall(reqs); err != nil {
			return err
		}
		if err := c.SendLayout(pattern(24, 50), sl, 1, 50); err != nil { // truncated there
			return err
		}
		if _, err := c.BufferDetach(); err != nil {
			return err
		}
		return c.Barrier()
	}
	dsts := make([][]byte, modes)
	reqs := make([]*Request, modes)
	for tag := range modes {
		dsts[tag] = make([]byte, 40)
		if reqs[tag], err = c.IrecvLayout(dsts[tag], gl, 0, tag); err != nil {
			return err
		}
	}
	// One receive no one sends to, cancelled: its buffer stays untouched.
	never := make([]byte, 40)
	rc, err := c.IrecvLayout(never, gl, 0, 77)
	if err != nil {
		return err
	}
	if err := c.Send(nil, 0, 99); err != nil {
		return err
	}
	// Complete them three ways.
	for tag := range 2 {
		for {
			if _, done, err := reqs[tag].Test(); err != nil {
				return err
			} else if done {
				break
			}
		}
	}
	if st, err := reqs[2].Wait(); err != nil || st.Count != 12 {
		return fmt.Errorf("Wait: %+v %v", st, err)
	}
	if _, err := Waitall(reqs[3:]); err != nil {
		return err
	}
	for tag, dst := range dsts {
		want := make([]byte, 40)
		src := pattern(24, tag)
		for i, off := range []int{20, 0, 10, 30} {
			copy(want[off:off+3], src[i*6:i*6+3])
		}
		if !bytes.Equal(dst, want) {
			return fmt.Errorf("mode %d: scattered %v, want %v", tag, dst, want)
		}
	}
	small, _ := Strided(2, 3, 6)
	tb := make([]byte, 12)
	rt, err := c.IrecvLayout(tb, small, 0, 50)
	if err != nil {
		return err
	}
	if st, err := rt.Wait(); !errors.Is(err, ErrTruncate) || st.Count != 6 || !bytes.Equal(tb[:3], pattern(24, 50)[:3]) || !bytes.Equal(tb[6:9], pattern(24, 50)[6:9]) {
		return fmt.Errorf("truncated nonblocking layout receive: %+v %v %v", st, err, tb)
	}
	if err := rc.Cancel(); err != nil {
		return err
	}
	if st, err := rc.Wait(); err != nil || !st.Cancelled || !bytes.Equal(never, make([]byte, 40)) {
		return fmt.Errorf("cancelled layout receive: %+v %v", st, err)
	}
	return c.Barrier()
})

func TestLayoutModes(t *testing.T) { both(t, 2, scLayoutModes) }

// TestLayoutSendBufferReusable: IsendLayout of a noncontiguous layout
// packs at once, so the buffer may change before the request completes
// and the message is what it held at the call.
func TestLayoutSendBufferReusable(t *testing.T) {
	if err := Run(1, func(c *Comm) error {
		sl, _ := Strided(4, 3, 6)
		src := pattern(24, 3)
		want := append([]byte(nil), src...)
		r, err := c.IsendLayout(src, sl, 0, 1)
		if err != nil {
			return err
		}
		clear(src)
		got := make([]byte, 24)
		if _, err := c.RecvLayout(got, sl, 0, 1); err != nil {
			return err
		}
		if _, err := r.Wait(); err != nil {
			return err
		}
		for i := range 4 {
			if !bytes.Equal(got[i*6:i*6+3], want[i*6:i*6+3]) {
				return fmt.Errorf("block %d: %v, want %v", i, got[i*6:i*6+3], want[i*6:i*6+3])
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
