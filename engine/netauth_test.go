package engine

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/testcvar"
	"github.com/tachyon-hpc/tachyon/nic"
)

// TestNetAuthStream: with engine_net_auth every frame carries a tag, and
// the stream test passes clean and at 5% loss with duplicates and
// reorders (retransmissions are tagged afresh); no frame fails.
func TestNetAuthStream(t *testing.T) {
	for _, lossy := range []bool{false, true} {
		vars := []string{"engine_net_auth", "true"}
		if lossy {
			skipOnLossyNetwork(t)
			vars = append(vars, "nic_drop_rate", "0.05", "nic_dup_rate", "0.05", "nic_reorder_rate", "0.05")
		}
		fails, replays := pvNetAuthFail.Value(), pvNetReplays.Value()
		w := netWorld(t, 2, vars...)
		if w.Endpoint(0).net.sealer == nil {
			t.Fatal("engine_net_auth on, and no sealer")
		}
		stream(t, w, 600)
		if w.Endpoint(1).net.conns[0].opener == nil { // made with the connection's first frame
			t.Fatal("engine_net_auth on, and no opener")
		}
		closeWorld(t, w)
		if n := pvNetAuthFail.Value() - fails; n != 0 {
			t.Errorf("lossy %v: %d frames of the job failed authentication", lossy, n)
		}
		if n := pvNetReplays.Value() - replays; lossy && n == 0 {
			t.Errorf("lossy: the duplicates injected were not dropped as replays")
		}
	}
}

// TestNetAuthHostile: with engine_net_auth, frames that pass every other
// check (cookie, endpoints, epoch, the next seq) but carry no tag, a
// wrong tag, or a tag made under another key are dropped and counted as
// authentication failures; a frame tagged right but replayed, or too old
// to tell, is dropped as a replay; none is delivered, and traffic goes
// on in order.
func TestNetAuthHostile(t *testing.T) {
	// No injected loss, whatever the environment says: the counts below
	// are of frames that must all arrive (CI runs ./engine at 5% loss too).
	w := netWorld(t, 2, "engine_net_auth", "true", "nic_drop_rate", "0")
	b := w.Endpoint(1)
	defer closeWorld(t, w)
	stream(t, w, 40)
	dev := b.net
	conn := dev.conns[0]
	c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(dev.link.Card().AddrPort()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// A data frame at the next seq rank 1 expects from rank 0, holding one
	// packet of junk that would break the stream if it were delivered.
	frame := func(trailer bool) []byte {
		payload := pktLen + 16
		if trailer {
			payload += authTrailer
		}
		f := make([]byte, nic.HeaderLen+payload)
		h := nic.Header{Type: nic.TypeData, Length: uint16(payload), Cookie: dev.cookie, Src: 0, Dst: 1,
			Epoch: conn.epoch, Seq: conn.rcvNxt, Credit: 16}
		h.Put(f)
		f[nic.HeaderLen] = 16
		for i := range 16 {
			f[nic.HeaderLen+pktLen+i] = 0xee
		}
		return f
	}
	sealed := func(key []byte, ctr uint64) []byte {
		aead, err := frameAEAD(key, 0, conn.epoch)
		if err != nil {
			t.Fatal(err)
		}
		s := &frameSealer{aead: aead, ctr: ctr - 1}
		f := frame(true)
		s.seal(f)
		return f
	}
	other := make([]byte, JobKeyLen)
	wrongTag := sealed(dev.job, 1<<40)
	wrongTag[len(wrongTag)-1] ^= 1
	hostile := []struct {
		frame  []byte
		replay bool
	}{
		{frame(false), false},         // no trailer at all
		{frame(true), false},          // a trailer of zeros
		{wrongTag, false},             // a tag off by one bit
		{sealed(other, 1<<40), false}, // another job's key
		{sealed(dev.job, 1), true},    // the right key, a counter long gone
	}
	fails, replays := pvNetAuthFail.Value(), pvNetReplays.Value()
	for _, x := range hostile {
		if _, err := c.Write(x.frame); err != nil {
			t.Fatal(err)
		}
	}
	wantFails, wantReplays := uint64(0), uint64(0)
	for _, x := range hostile {
		if x.replay {
			wantReplays++
		} else {
			wantFails++
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for pvNetAuthFail.Value()-fails < wantFails || pvNetReplays.Value()-replays < wantReplays {
		b.Poll()
		if time.Now().After(deadline) {
			t.Fatalf("%d authentication failures and %d replays counted, want %d and %d",
				pvNetAuthFail.Value()-fails, pvNetReplays.Value()-replays, wantFails, wantReplays)
		}
	}
	if conn.dead != nil {
		t.Fatalf("a hostile frame killed the connection: %v", conn.dead)
	}
	stream(t, w, 40) // nothing was delivered: the stream's bytes and order hold
}

// TestNetAuthReplayFilter: the filter takes each counter once, in any
// order within its window, refuses what it cannot tell, and forgets
// nothing it should keep when the highest counter jumps.
func TestNetAuthReplayFilter(t *testing.T) {
	var o frameOpener
	for _, x := range []struct {
		ctr uint64
		ok  bool
	}{
		{0, false}, // never sent
		{1, true}, {1, false}, {3, true}, {2, true}, {3, false},
		{500, true}, {100, true}, {100, false}, {499, true},
		{500 + replayWindow, true}, {500, false}, // 500 still in the window: seen
		{499, false}, // just below it: too old
		{5000, true}, {4100, true}, {4100, false}, {5000 - replayWindow - 1, false},
		{1 << 50, true}, {5000, false}, {1<<50 - 1, true}, {1 << 50, false},
	} {
		if got := o.accept(x.ctr); got != x.ok {
			t.Errorf("counter %d: accepted %v, want %v", x.ctr, got, x.ok)
		}
	}
}

// TestJobKeyAgreement: a device whose job key disagrees with
// engine_net_auth here is refused, with an error that says to set it
// alike everywhere.
func TestJobKeyAgreement(t *testing.T) {
	testcvar.Set(t, "engine_net_auth", "false")
	if err := checkJobKey(make([]byte, JobKeyLen)); !errors.Is(err, ErrConfig) {
		t.Errorf("a key with engine_net_auth off: %v", err)
	}
	if k, err := NewJobKey(); k != nil || err != nil {
		t.Errorf("NewJobKey with engine_net_auth off: %x, %v", k, err)
	}
	testcvar.Set(t, "engine_net_auth", "true")
	if err := checkJobKey(nil); !errors.Is(err, ErrConfig) {
		t.Errorf("no key with engine_net_auth on: %v", err)
	}
	if err := checkJobKey(make([]byte, 7)); !errors.Is(err, ErrConfig) {
		t.Errorf("a 7-byte key: %v", err)
	}
	k, err := NewJobKey()
	if err != nil || len(k) != JobKeyLen {
		t.Fatalf("NewJobKey: %x, %v", k, err)
	}
	if err := checkJobKey(k); err != nil {
		t.Errorf("a good key: %v", err)
	}
}
