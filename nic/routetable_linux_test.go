package nic

import (
	"errors"
	"net/netip"
	"testing"
)

// A routing table as /proc/net/route gives it: a default route through
// 198.18.1.1 on eth0 (metric 100) and on eth9 (metric 50), eth0's subnet,
// a /16 through 198.18.1.254, a host route on eth1, and a route that is
// down.
const routeText = `Iface	Destination	Gateway 	Flags	RefCnt	Use	Metric	Mask		MTU	Window	IRTT
eth0	00000000	010112C6	0003	0	0	100	00000000	0	0	0
eth9	00000000	010112C6	0003	0	0	50	00000000	0	0	0
eth0	000112C6	00000000	0001	0	0	0	00FFFFFF	0	0	0
eth0	000013C6	FE0112C6	0003	0	0	0	0000FFFF	0	0	0
eth1	020213C6	00000000	0005	0	0	0	FFFFFFFF	0	0	0
eth2	000014C6	00000000	0000	0	0	0	0000FFFF	0	0	0
`

func TestBestRoute(t *testing.T) {
	for _, c := range []struct{ dst, hop, iface string }{
		{"198.18.1.7", "198.18.1.7", "eth0"},   // on the subnet: itself
		{"198.19.5.5", "198.18.1.254", "eth0"}, // the /16 beats the default
		{"198.19.2.2", "198.19.2.2", "eth1"},   // the host route beats the /16
		{"198.20.1.1", "198.18.1.1", "eth9"},   // the down route is skipped; the default of lower metric wins
		{"10.0.0.1", "198.18.1.1", "eth9"},
	} {
		hop, iface, err := bestRoute([]byte(routeText), netip.MustParseAddr(c.dst))
		if err != nil || hop.String() != c.hop || iface != c.iface {
			t.Errorf("to %s: %v on %q, %v; want %s on %s", c.dst, hop, iface, err, c.hop, c.iface)
		}
	}
	noDefault := routeText[:len("Iface")] + "\n" + "eth0	000112C6	00000000	0001	0	0	0	00FFFFFF	0	0	0\n"
	if _, _, err := bestRoute([]byte(noDefault), netip.MustParseAddr("10.0.0.1")); !errors.Is(err, ErrPeer) {
		t.Errorf("no route: %v, want ErrPeer", err)
	}
}

func TestFindNeighbour(t *testing.T) {
	const arp = `IP address       HW type     Flags       HW address            Mask     Device
198.18.1.1       0x1         0x2         02:00:c6:12:01:01     *        eth0
198.18.1.2       0x1         0x0         00:00:00:00:00:00     *        eth0
198.18.1.3       0x1         0x6         02:00:c6:12:01:03     *        eth1
`
	if mac, ok := findNeighbour([]byte(arp), "eth0", netip.MustParseAddr("198.18.1.1")); !ok || mac != [6]byte{2, 0, 0xc6, 0x12, 1, 1} {
		t.Errorf("complete entry: %x, %v", mac, ok)
	}
	if _, ok := findNeighbour([]byte(arp), "eth0", netip.MustParseAddr("198.18.1.2")); ok {
		t.Error("an incomplete entry was taken")
	}
	if _, ok := findNeighbour([]byte(arp), "eth0", netip.MustParseAddr("198.18.1.3")); ok {
		t.Error("another interface's entry was taken")
	}
	if _, ok := findNeighbour([]byte(arp), "eth1", netip.MustParseAddr("198.18.1.3")); !ok {
		t.Error("a permanent entry was not taken")
	}
}
