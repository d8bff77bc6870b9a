package mpi

import (
	"errors"
	"fmt"
	"testing"
)

// scCreateGroup: CreateGroup is collective over the group alone. Ranks
// 0 and 1, and ranks 2 and 3, make communicators at the same time with
// the same tag while no other rank calls; then two overlapping groups
// ({0,1,2} and {1,2,3}) with different tags, rank 0 making its
// communicator while rank 3 makes its own; a message on a group's
// communicator never matches a receive on c; errors for a caller outside
// the group, a nil group and a group rank not in c.
var scCreateGroup = scenario("create-group", func(c *Comm) error {
	me := c.Rank()
	g, err := c.Group()
	if err != nil {
		return err
	}
	defer g.Free()
	incl := func(ranks ...int) *Group {
		s, err := g.Incl(ranks)
		if err != nil {
			panic(err)
		}
		return s
	}
	// Disjoint pairs, in parallel, same tag, in reverse order: plist[i]
	// has rank i.
	pair := incl(me/2*2+1, me/2*2)
	pc, err := c.CreateGroup(pair, 7)
	if err != nil {
		return fmt.Errorf("pair: %w", err)
	}
	if pc.Size() != 2 || pc.Rank() != 1-me%2 {
		return fmt.Errorf("pair communicator: rank %d of %d", pc.Rank(), pc.Size())
	}
	// A message on the pair's communicator, with a receive for the same
	// source and tag posted on c first: it must land on pc's.
	peer := 1 - pc.Rank()
	cr, err := c.Irecv(make([]byte, 1), me^1, 3)
	if err != nil {
		return err
	}
	if err := pc.Send([]byte{byte(me)}, peer, 3); err != nil {
		return err
	}
	got := make([]byte, 1)
	if _, err := pc.Recv(got, peer, 3); err != nil || int(got[0]) != me^1 {
		return fmt.Errorf("pair message: %v %v", got, err)
	}
	if _, done, err := cr.Test(); done || err != nil {
		return fmt.Errorf("a message on the pair's communicator reached c's receive (%v, %v)", done, err)
	}
	if err := cr.Cancel(); err != nil {
		return err
	}
	if _, err := cr.Wait(); err != nil {
		return err
	}
	pc.Free()
	// Overlapping groups with different tags: ranks 1 and 2 are in both
	// and make them in opposite orders.
	lo, hi := incl(0, 1, 2), incl(1, 2, 3)
	defer lo.Free()
	defer hi.Free()
	var mine []*Comm
	for _, o := range []struct {
		grp *Group
		tag int
	}{{lo, 1}, {hi, 2}} {
		if o.grp.Rank() == Undefined {
			continue
		}
		d, err := c.CreateGroup(o.grp, o.tag)
		if err != nil {
			return fmt.Errorf("group of tag %d: %w", o.tag, err)
		}
		if d.Size() != 3 || d.Rank() != o.grp.Rank() {
			return fmt.Errorf("group of tag %d: rank %d of %d", o.tag, d.Rank(), d.Size())
		}
		mine = append(mine, d)
	}
	for _, d := range mine {
		if err := d.Barrier(); err != nil {
			return err
		}
		d.Free()
	}
	// Errors.
	if me == 0 {
		if _, err := c.CreateGroup(hi, 9); !errors.Is(err, ErrGroup) {
			return fmt.Errorf("a caller outside the group: %v", err)
		}
	}
	if _, err := c.CreateGroup(nil, 9); !errors.Is(err, ErrGroup) {
		return fmt.Errorf("nil group: %v", err)
	}
	alone, err := c.Split(me, 0)
	if err != nil {
		return err
	}
	if _, err := alone.CreateGroup(g, 9); c.Size() > 1 && !errors.Is(err, ErrGroup) {
		return fmt.Errorf("a group rank not in the communicator: %v", err)
	}
	alone.Free()
	return c.Barrier()
})

func TestCreateGroup(t *testing.T) { both(t, 4, scCreateGroup) }
