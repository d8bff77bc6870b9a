//go:build linux

package mpi

import (
	"fmt"
	"testing"

	"github.com/tachyon-hpc/tachyon/engine"
	"github.com/tachyon-hpc/tachyon/nic"
)

// TestCollHierAcrossFakeHosts: goroutine ranks that joinJob puts on three
// hosts of two ranks each (shared memory within a host, UDP on the
// loopback interface across) run every collective (collCheck) and the
// nonblocking and persistent forms, with the right results, the
// broadcasts hierarchically.
func TestCollHierAcrossFakeHosts(t *testing.T) {
	const n = 6
	j := newFakeJob(n, func(rank int, key string, vals []string) []string {
		if key == pmiKeyHost {
			for r := range vals {
				if r/2 == rank/2 {
					vals[r] = vals[rank]
				} else {
					vals[r] = fmt.Sprintf("fake-host-%d", r/2)
				}
			}
		}
		return vals
	})
	before := pvHierBcast.Value()
	errs := make([]error, n)
	joinErrs := runFakeJobWith(t, j, engine.NetLinkConfig{Interface: "lo", Mode: nic.ModeUDP}, func(r int, p *proc) {
		c := p.world
		if c.hier() == nil {
			errs[r] = fmt.Errorf("rank %d: no hierarchy on three hosts of two ranks", r)
			return
		}
		for _, m := range []int{4, 1000} {
			if err := collCheck(c, m); err != nil {
				errs[r] = fmt.Errorf("rank %d: %w", r, err)
				return
			}
		}
		errs[r] = hierForms(c)
	})
	for r := range n {
		if joinErrs[r] != nil {
			t.Fatalf("rank %d: %v", r, joinErrs[r])
		}
		if errs[r] != nil {
			t.Error(errs[r])
		}
	}
	if pvHierBcast.Value() == before {
		t.Error("no Bcast ran hierarchically")
	}
}
