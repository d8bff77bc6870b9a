package nic_test

import (
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/testcvar"
	"github.com/tachyon-hpc/tachyon/nic"
	"github.com/tachyon-hpc/tachyon/nic/nictest"
)

// TestXDPRouted: XDP links on two subnets joined by a router talk. One
// side finds the router's MAC address by ARP and sends through it on its
// AF_XDP socket (GatewayPeers); the other, given no time to wait for ARP
// (nic_neigh_timeout 0), sends through the kernel's UDP stack
// (KernelPeers, TxKernel); both receive on their AF_XDP sockets.
func TestXDPRouted(t *testing.T) {
	nw := nictest.RoutedHosts(t)
	a := nictest.OpenOn(t, nw.Hosts[0], nic.ModeXDP, testCookie)
	b := nictest.OpenOn(t, nw.Hosts[1], nic.ModeXDP, testCookie)
	testcvar.Set(t, "nic_neigh_timeout", "0s")
	if _, err := a.AddPeer(b.Card()); err != nil {
		t.Fatal(err)
	}
	testcvar.Set(t, "nic_neigh_timeout", "2s")
	if _, err := b.AddPeer(a.Card()); err != nil {
		t.Fatal(err)
	}
	if s := a.Status(); s.KernelPeers != 1 || s.GatewayPeers != 0 {
		t.Errorf("a, given no time for ARP: %d peers through the kernel, %d through the gateway; want 1 and 0", s.KernelPeers, s.GatewayPeers)
	}
	if s := b.Status(); s.KernelPeers != 0 || s.GatewayPeers != 1 {
		t.Errorf("b: %d peers through the kernel, %d through the gateway; want 0 and 1", s.KernelPeers, s.GatewayPeers)
	}
	if err := nictest.Exchange(a, b, testCookie, 2000, 64, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	sa, sb := a.Stats(), b.Stats()
	if sa.TxKernel == 0 || sa.TxKernel != sa.TxFrames || sb.TxKernel != 0 {
		t.Errorf("frames sent through the kernel: a %d of %d, b %d; want all of a's and none of b's", sa.TxKernel, sa.TxFrames, sb.TxKernel)
	}
	if sa.Program.Redirected == 0 || sb.Program.Redirected == 0 {
		t.Errorf("frames the XDP programs redirected to the sockets: a %d, b %d; want both", sa.Program.Redirected, sb.Program.Redirected)
	}
	checkAudit(t, a, b)
}
