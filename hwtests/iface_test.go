//go:build linux

package hwtests

import (
	"fmt"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/nethost"
	"github.com/tachyon-hpc/tachyon/mpi"
	"github.com/tachyon-hpc/tachyon/nic/nictest"
)

// ifaceJob is netJob (role "iface") that then says which interface the
// rank's link opened on and why (mpi.NetPath).
func ifaceJob(w *mpi.Comm) error {
	if err := netJob(w); err != nil {
		return err
	}
	p, err := w.NetPath((w.Rank() + 1) % w.Size())
	if err != nil {
		return err
	}
	if !p.HasLink {
		return fmt.Errorf("rank %d has no network link", w.Rank())
	}
	fmt.Printf("iface rank %d link on %s (%s), path %s\n", w.Rank(), p.Link.Interface, p.Link.Chosen, p.Path)
	return nil
}

// TestNetnsInterface: on hosts with a management interface that carries
// the default route, each on a subnet of its own, and a fabric that joins
// them all on one (nethost.Config.Management), a job's ranks open their
// links on the fabric, where every peer is; nic_interface set to the
// management interface wins, and the job runs there, through the router.
func TestNetnsInterface(t *testing.T) {
	mpiexec := needHostJobs(t)
	const ranks = 3
	nw := nictest.Network(t, nethost.Config{Hosts: ranks, Management: true})
	for _, c := range []struct {
		name string
		set  bool // nic_interface names the management interface
	}{{"fabric", false}, {"nic_interface", true}} {
		t.Run(c.name, func(t *testing.T) {
			job := hostJob{role: "iface", env: []string{"TACHYON_NIC_MODE=xdp", "TACHYON_HWTEST_MESSAGES=2000"}}
			if c.set {
				job.hostEnv = func(i int) []string { return []string{"TACHYON_NIC_INTERFACE=" + nw.Hosts[i].Mgmt} }
			}
			out, took := job.run(t, mpiexec, nw, 2*time.Minute, func(r int, _ string) string {
				h := nw.Hosts[r]
				if c.set {
					return fmt.Sprintf("iface rank %d link on %s (nic_interface)", r, h.Mgmt)
				}
				return fmt.Sprintf("iface rank %d link on %s (%d of %d peers on its subnet %s)", r, h.Iface, ranks-1, ranks-1, nw.Subnet)
			})
			t.Logf("%v:\n%s", took, out)
		})
	}
}
