package engine

import (
	"fmt"
	"testing"
	"time"
)

// TestNetIdleThenLoss: a connection idle for longer than
// engine_net_peer_timeout (a computation phase, or Init's clock
// measurement with the peer never written to yet) and then a send whose
// frame or acknowledgement is lost: the retransmission delivers it. The
// peer is waited on from that send, not from its last acknowledgement
// before the idle spell, which is long past the timeout. (A 32-rank job
// under the race detector failed so: "nothing acknowledged for 30s" at
// the first message between two ranks, 30 s after Join.)
func TestNetIdleThenLoss(t *testing.T) {
	w := netWorld(t, 2, "engine_net_peer_timeout", "600ms", "engine_net_probe_interval", "50ms", "nic_drop_rate", "0.3")
	a, b := w.Endpoint(0), w.Endpoint(1)
	defer a.Close()
	defer b.Close()
	for round := range 6 {
		time.Sleep(700 * time.Millisecond) // idle past the peer timeout; probes keep the pair alive
		errs := make(chan error, 2)
		for rank, ep := range []*Endpoint{a, b} {
			go func() {
				peer := 1 - rank
				if err := ep.Send([]byte{byte(round)}, peer, round, 0, Standard); err != nil {
					errs <- fmt.Errorf("rank %d, round %d: send: %w", rank, round, err)
					return
				}
				buf := make([]byte, 1)
				if _, err := ep.Recv(buf, peer, round, 0); err != nil || buf[0] != byte(round) {
					errs <- fmt.Errorf("rank %d, round %d: receive: %v (%d)", rank, round, err, buf[0])
					return
				}
				errs <- nil
			}()
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	}
}
