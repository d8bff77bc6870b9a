package mpi

import (
	"errors"
	"fmt"
	"sync"
	"testing"
)

// scCreateGroup: CreateGroup is collective over the group alone. Ranks
// 0 and 1, and ranks 2 and 3, make communicators at the same time with
// the same tag while no other rank calls; then two overlapping groups
// ({0,1,2} and {1,2,3}) with different tags, rank 0 making its
// communicator while rank 3 makes its own; a message on a group's
// communicator never matches a receive on c; a caller outside the group
// gets nil, nil; errors for a nil group and a group rank not in c.
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
		if d, err := c.CreateGroup(hi, 9); d != nil || err != nil {
			return fmt.Errorf("a caller outside the group: %v, %v; want nil, nil", d, err)
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

// scCreateGroupConcurrent, on 4 ranks: overlapping groups ({0,1,2} with
// tag 1, {3,2,1} with tag 2) made at the same time on two goroutines of
// the ranks in both, each then passing its members' ranks around a ring
// on its communicator; and an intercommunicator is ErrComm.
var scCreateGroupConcurrent = scenario("create-group-concurrent", func(c *Comm) error {
	me := c.Rank()
	world, err := c.Group()
	if err != nil {
		return err
	}
	defer world.Free()
	incl := func(ranks ...int) *Group {
		g, err := world.Incl(ranks)
		if err != nil {
			panic(err)
		}
		return g
	}
	groups := []struct {
		g   *Group
		tag int
	}{{incl(0, 1, 2), 1}, {incl(3, 2, 1), 2}}
	var wg sync.WaitGroup
	errs := make([]error, len(groups))
	for k, x := range groups {
		if x.g.Rank() == Undefined {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := c.CreateGroup(x.g, x.tag)
			if err == nil && (d == nil || d.Size() != 3 || d.Rank() != x.g.Rank()) {
				err = fmt.Errorf("got %v", d)
			}
			if err == nil {
				var got [1]byte
				_, err = d.Sendrecv([]byte{byte(me)}, (d.Rank()+1)%3, 9, got[:], (d.Rank()+2)%3, 9)
				if want := x.g.worldRank((d.Rank() + 2) % 3); err == nil && int(got[0]) != want {
					err = fmt.Errorf("ring: got %d, want %d", got[0], want)
				}
			}
			if err == nil {
				err = d.Free()
			}
			if err != nil {
				errs[k] = fmt.Errorf("group of tag %d: %w", x.tag, err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// An intercommunicator of the pairs {0,1} and {2,3}, never used for a
	// message: CreateGroup refuses it first.
	local, remote := incl(0, 1), incl(2, 3)
	if me >= 2 {
		local, remote = remote, local
	}
	inter := newInterComm(c.p, local, remote, 99)
	if _, err := inter.CreateGroup(local, 3); !errors.Is(err, ErrComm) {
		return fmt.Errorf("intercommunicator: %v", err)
	}
	return c.Barrier()
})

func TestCreateGroupConcurrent(t *testing.T) { both(t, 4, scCreateGroupConcurrent) }
