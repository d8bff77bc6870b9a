package mpi

import (
	"errors"
	"fmt"
	"testing"

	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/nic"
)

// TestNetPath: the ranks of a Run world reach each other in memory
// (path none, no link), or with engine_net_force over UDP links on the
// loopback; a connection's intercommunicator names the remote group's
// ranks, on this host through shared memory; a rank c has not is ErrRank.
func TestNetPath(t *testing.T) {
	forced := false
	if v, ok := cvar.Lookup("engine_net_force"); ok && v.String() == "true" {
		forced = true
	}
	check := func(c *Comm, rank int) error {
		p, err := c.NetPath(rank)
		if err != nil {
			return err
		}
		if forced && rank != c.Rank() {
			if p.Path != "udp" || !p.HasLink || p.Link.Mode != nic.ModeUDP || p.Card.MTU == 0 {
				return fmt.Errorf("path to %d over forced UDP links: %+v", rank, p)
			}
			return nil
		}
		if p.Path != "none" || p.HasLink != forced {
			return fmt.Errorf("path to %d: %+v, want none (a link: %v)", rank, p, forced)
		}
		return nil
	}
	err := Run(2, func(w *Comm) error {
		for r := range 2 {
			if err := check(w, r); err != nil {
				return err
			}
		}
		for _, r := range []int{-1, 2} {
			if _, err := w.NetPath(r); !errors.Is(err, ErrRank) {
				return fmt.Errorf("NetPath(%d): %v, want ErrRank", r, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	side := func(inter *Comm) error {
		if _, err := inter.NetPath(1); !errors.Is(err, ErrRank) {
			return fmt.Errorf("NetPath(1) of a remote group of 1: %v, want ErrRank", err)
		}
		p, err := inter.NetPath(0)
		if err != nil {
			return err
		}
		// A connection's two processes are on one host: shared memory
		// (engine_net_force makes only Run's worlds network ones).
		if p.Path != "none" || p.HasLink {
			return fmt.Errorf("path to the other side: %+v, want none", p)
		}
		return nil
	}
	twoWorlds(t, 1, 1, side, side)
}
