//go:build linux

package hwtests

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/nethost"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
	"github.com/tachyon-hpc/tachyon/mpi"
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
	mpiexec, err := exec.LookPath("mpiexec.mpich")
	if err != nil {
		testskip.Skip(t, testskip.NoMPICH, "mpiexec.mpich is not installed (CI installs MPICH)")
	}
	if err := nethost.Available(); err != nil {
		testskip.Skip(t, testskip.NoNamespaces, err)
	}
	const ranks = 3
	nw, err := nethost.New(nethost.Config{Hosts: ranks, Management: true})
	if err != nil {
		t.Fatal(err)
	}
	defer nw.Close()
	for _, c := range []struct {
		name string
		set  bool // nic_interface names the management interface
	}{{"fabric", false}, {"nic_interface", true}} {
		t.Run(c.name, func(t *testing.T) {
			args := hostsJob(t, nw, "iface", func(i int) []string {
				env := []string{"TACHYON_NIC_MODE=xdp", "TACHYON_HWTEST_MESSAGES=2000"}
				if c.set {
					env = append(env, "TACHYON_NIC_INTERFACE="+nw.Hosts[i].Mgmt)
				}
				return env
			})
			start := time.Now()
			ctx, cmd := jobCommand(t, 2*time.Minute, mpiexec, args...)
			out, err := cmd.CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("killed after %v:\n%s", time.Since(start).Round(time.Millisecond), out)
			}
			if err != nil {
				t.Fatalf("%v after %v:\n%s", err, time.Since(start).Round(time.Millisecond), out)
			}
			for r, h := range nw.Hosts {
				want := fmt.Sprintf("iface rank %d link on %s (%d of %d peers on its subnet %s)", r, h.Iface, ranks-1, ranks-1, nw.Subnet)
				if c.set {
					want = fmt.Sprintf("iface rank %d link on %s (nic_interface)", r, h.Mgmt)
				}
				if !strings.Contains(string(out), want) {
					t.Fatalf("rank %d: no %q:\n%s", r, want, out)
				}
			}
			t.Logf("%v:\n%s", time.Since(start).Round(time.Millisecond), out)
		})
	}
}
