package engine

import (
	"testing"

	"github.com/tachyon-hpc/tachyon/nic"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// TestNetPath: ranks joined over UDP links report the path udp to each
// other and none to themselves, and engine_net_path says udp (1) at
// most; rank 0's NetLink is its UDP link; the names of the state's values are PathName's.
func TestNetPath(t *testing.T) {
	w, err := newNetWorld(2, nil)
	if err != nil {
		t.Fatal(err)
	}
	e0 := w.Endpoint(0)
	defer e0.Close()
	defer w.Endpoint(1).Close()
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
	if !ok || v.Class() != pvar.ClassState {
		t.Fatalf("engine_net_path: %v, %v", v, ok)
	}
	if got := v.Read(); got != pathUDP {
		t.Errorf("engine_net_path %d (%s), want %d (udp)", got, PathName(got), pathUDP)
	}
	for v, want := range map[int64]string{0: "none", 1: "udp", 2: "xdp-copy", 3: "xdp-zerocopy", 4: "unknown", -1: "unknown"} {
		if got := PathName(v); got != want {
			t.Errorf("PathName(%d) = %q, want %q", v, got, want)
		}
	}
}
