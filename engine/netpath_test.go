package engine

import (
	"testing"

	"github.com/tachyon-hpc/tachyon/nic"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// TestNetPath: ranks joined over UDP links report the path udp to each
// other and none to themselves; engine_net_path, a state named as
// engine_net_link_mode is, reads udp (2) for each rank and -1 once the
// rank is closed; a peer whose link is UDP makes the path udp over an
// AF_XDP link; PathName names the values; rank 0's NetLink is its UDP
// link.
func TestNetPath(t *testing.T) {
	w, err := newNetWorld(2, nil)
	if err != nil {
		t.Fatal(err)
	}
	e0, e1 := w.Endpoint(0), w.Endpoint(1)
	defer e1.Close()
	if got := e0.NetPath(1); got != "udp" {
		t.Errorf("rank 0's path to rank 1: %q, want udp", got)
	}
	for _, peer := range []int{0, -1, 2} {
		if got := e0.NetPath(peer); got != "none" {
			t.Errorf("rank 0's path to %d: %q, want none", peer, got)
		}
	}
	st, card, ok := e0.NetLink()
	if !ok || st.Mode != nic.ModeUDP || card.IP.String() != "127.0.0.1" || card.MTU <= 0 {
		t.Errorf("rank 0's link: %+v, card %v, ok %v; want a UDP link on 127.0.0.1", st, card, ok)
	}
	v, ok := pvar.Lookup("engine_net_path")
	if !ok || v.Class() != pvar.ClassState || len(v.States()) != 3 {
		t.Fatalf("engine_net_path: %v, %v", v, ok)
	}
	for i, name := range v.States() {
		if got := PathName(int64(i)); got != name {
			t.Errorf("PathName(%d) = %q, the state's name %q", i, got, name)
		}
	}
	k0, k1 := pvar.Key{Owner: e0.owner}, pvar.Key{Owner: e1.owner}
	if got := v.ReadAt(k0); got != pathUDP {
		t.Errorf("rank 0's engine_net_path %d (%s), want %d (udp)", got, PathName(got), pathUDP)
	}
	if got := v.Read(); got != pathUDP {
		t.Errorf("the process's engine_net_path %d (%s), want %d (udp)", got, PathName(got), pathUDP)
	}
	if err := e0.Close(); err != nil {
		t.Fatal(err)
	}
	if got, other := v.ReadAt(k0), v.ReadAt(k1); got != pathNone || other != pathUDP {
		t.Errorf("engine_net_path of rank 0 closed: %d, of rank 1: %d; want -1 and %d", got, other, pathUDP)
	}
	for v, want := range map[int64]string{-1: "none", 0: "xdp-zerocopy", 1: "xdp-copy", 2: "udp", 3: "unknown", -2: "unknown"} {
		if got := PathName(v); got != want {
			t.Errorf("PathName(%d) = %q, want %q", v, got, want)
		}
	}
}

// TestPeerPath: the path to a peer is the slower of the two ends': a
// peer on a UDP socket makes it udp whatever this end's link is.
func TestPeerPath(t *testing.T) {
	for _, c := range []struct {
		link nic.Status
		peer nic.Mode
		want int
	}{
		{nic.Status{Mode: nic.ModeXDP, ZeroCopy: true}, nic.ModeXDP, pathXDPZeroCopy},
		{nic.Status{Mode: nic.ModeXDP}, nic.ModeXDP, pathXDPCopy},
		{nic.Status{Mode: nic.ModeXDP, ZeroCopy: true}, nic.ModeUDP, pathUDP},
		{nic.Status{Mode: nic.ModeUDP}, nic.ModeXDP, pathUDP},
	} {
		if got := peerPath(statusLink{st: c.link}, nic.Card{Mode: c.peer}); got != c.want {
			t.Errorf("link %+v, peer %v: path %s, want %s", c.link, c.peer, PathName(int64(got)), PathName(int64(c.want)))
		}
	}
}

// statusLink is a nic.Link that only says its Status.
type statusLink struct {
	nic.Link
	st nic.Status
}

func (l statusLink) Status() nic.Status { return l.st }
