package engine

import (
	"bytes"
	"github.com/tachyon-hpc/tachyon/internal/testcvar"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
	"strings"
	"testing"
)

// ringConfigs are ring setups other than the default (record rings of
// engine_ring_bytes): cell rings, and record rings so small that packets
// are a few hundred bytes, so eager messages go in fragments and the
// rings wrap all the time.
var ringConfigs = []struct {
	name string
	vars []string // name=value of control variables
}{
	{"cells", []string{"engine_rings=cells"}},
	{"small-records", []string{"engine_rings=records", "engine_ring_bytes=4096"}},
	{"unpadded-records", []string{"engine_line_padding=false"}},
}

// TestRingConfigs runs the protocol tests, in-process and across
// processes, over each other ring setup.
func TestRingConfigs(t *testing.T) {
	tests := []struct {
		name string
		fn   func(*testing.T)
	}{
		{"SendRecvSizes", TestSendRecvSizes},
		{"UnexpectedAndOrder", TestUnexpectedAndOrder},
		{"WildcardOrder", TestWildcardOrder},
		{"ProbeAndCancel", TestProbeAndCancel},
		{"Buffered", TestBuffered},
		{"CancelDeliveredEager", TestCancelDeliveredEager},
		{"IsendNow", TestIsendNow},
		{"CancelSent", TestCancelSent},
		{"SerialSendRecv", TestSerialSendRecv},
		{"EagerAllocs", TestEagerAllocs},
		{"ShmEcho", TestShmEcho},
		{"ShmManyRanks", TestShmManyRanks},
	}
	for _, cfg := range ringConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			for _, v := range cfg.vars {
				name, value, _ := strings.Cut(v, "=")
				testcvar.Set(t, name, value)
				// Child ranks take their settings from the environment.
				t.Setenv("TACHYON_"+strings.ToUpper(name), value)
			}
			for _, tc := range tests {
				t.Run(tc.name, tc.fn)
			}
		})
	}
}

// TestRecordLinkStreams: a record link prefetches the next line for a
// packet that follows another with no poll in between, and not for the
// first packet after a poll (a ping-pong's); line padding goes the other
// way round.
func TestRecordLinkStreams(t *testing.T) {
	testcvar.Set(t, "rings_prefetch_record_bytes", "64")
	ep := rankZero(t)
	l, ok := ep.peers[1].out.(*recordLink)
	if !ok {
		if netForce.Get() {
			testskip.Skipf(t, testskip.NetForce, "links are %T, not record rings", ep.peers[1].out)
		}
		t.Fatalf("links are %T, not record rings", ep.peers[1].out)
	}
	buf := make([]byte, 8)
	send := func(want bool) {
		t.Helper()
		if err := ep.Send(buf, 1, 1, 0, Standard); err != nil {
			t.Fatal(err)
		}
		if got := l.w.Prefetching(); got != want {
			t.Fatalf("prefetching %v, want %v", got, want)
		}
		if got := l.w.LinePadding(); got == want {
			t.Fatalf("line padding %v in a stream %v", got, want)
		}
	}
	for range 3 {
		ep.Poll()
		send(false)
		send(true)
		send(true)
	}
}

// TestRecordLinkWarm: each empty poll within engine_warm_polls of a stream
// of sends warms engine_warm_lines lines of the link, counted in
// engine_lines_warmed; a packet sent after a poll (a ping-pong's) leaves
// the link cold, and so does engine_warm_lines=0.
func TestRecordLinkWarm(t *testing.T) {
	testcvar.Set(t, "engine_warm_lines", "4")
	testcvar.Set(t, "engine_warm_polls", "3")
	ep := rankZero(t)
	if _, ok := ep.peers[1].out.(*recordLink); !ok {
		if netForce.Get() {
			testskip.Skipf(t, testskip.NetForce, "links are %T, not record rings", ep.peers[1].out)
		}
		t.Fatalf("links are %T, not record rings", ep.peers[1].out)
	}
	buf := make([]byte, 8)
	send := func(n int) {
		t.Helper()
		ep.Poll()
		for range n {
			if err := ep.Send(buf, 1, 1, 0, Standard); err != nil {
				t.Fatal(err)
			}
		}
	}
	polls := func(want ...uint64) {
		t.Helper()
		for i, w := range want {
			before := ep.warmed.Load()
			ep.Poll()
			if got := ep.warmed.Load() - before; got != w {
				t.Fatalf("poll %d after the sends warmed %d lines, want %d", i+1, got, w)
			}
		}
	}
	send(1)
	polls(0, 0, 0, 0)
	send(3)
	polls(4, 4, 4, 0, 0)
	send(1) // the stream ended: a lone packet again
	polls(0, 0)
	testcvar.Set(t, "engine_warm_lines", "0")
	send(3)
	polls(0, 0)
}

// TestRecordLinkWarmTurns: with streams to two ranks, each empty poll
// warms one of the two links, in turn.
func TestRecordLinkWarmTurns(t *testing.T) {
	testcvar.Set(t, "engine_ring_bytes", "4096") // 64 lines
	testcvar.Set(t, "engine_warm_lines", "8")
	testcvar.Set(t, "engine_warm_polls", "100")
	w, err := NewWorld(3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for i := range 3 {
			w.Endpoint(i).Close()
		}
	})
	ep := w.Endpoint(0)
	l1, ok1 := ep.peers[1].out.(*recordLink)
	l2, ok2 := ep.peers[2].out.(*recordLink)
	if !ok1 || !ok2 {
		if netForce.Get() {
			testskip.Skipf(t, testskip.NetForce, "links are %T, not record rings", ep.peers[1].out)
		}
		t.Fatalf("links are %T, not record rings", ep.peers[1].out)
	}
	buf := make([]byte, 8)
	ep.Poll()
	// Nearly fill the ring to rank 1, which never reads: its writer has
	// fewer lines to warm than the one to rank 2.
	for range 124 {
		if err := ep.Send(buf, 1, 1, 0, Standard); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if err := ep.Send(buf, 2, 1, 0, Standard); err != nil {
			t.Fatal(err)
		}
	}
	n1, n2 := uint64(l1.w.Warm(8)), uint64(l2.w.Warm(8))
	if n1 == n2 || n1 == 0 {
		t.Fatalf("the links would warm %d and %d lines: the test needs two different counts", n1, n2)
	}
	var got []uint64
	for range 4 {
		before := ep.warmed.Load()
		ep.Poll()
		got = append(got, ep.warmed.Load()-before)
	}
	if !(got[0] == n1 && got[1] == n2 || got[0] == n2 && got[1] == n1) || got[2] != got[0] || got[3] != got[1] {
		t.Fatalf("lines warmed at four polls: %v, want %d and %d in turn", got, n1, n2)
	}
}

// TestPollReleasesLargePackets: a poll that handles a packet of
// engine_poll_release_bytes or more and finds another ready behind it
// gives the ring space of the packets it handled so far back to the
// writer at once, so that the writer finds room again before the
// reader's next poll; the last packet it handled waits for that poll.
// Smaller packets, and 0, leave it all to that poll. No packet is handled
// twice.
func TestPollReleasesLargePackets(t *testing.T) {
	testcvar.Set(t, "engine_ring_bytes", "65536") // packets up to 8 KiB: eight of 8000 B fill it
	const n, size = 8, 8000
	for _, c := range []struct {
		release, batch string
		room           int // packets that find room before the next poll
	}{
		{"8000", "32", n - 1}, // all but the last packet's space
		{"8000", "5", n - 1},  // releasing does not lift the bound
		{"9000", "32", 0},
		{"0", "32", 0},
	} {
		t.Run("release="+c.release+"/batch="+c.batch, func(t *testing.T) {
			testcvar.Set(t, "engine_poll_release_bytes", c.release)
			testcvar.Set(t, "engine_poll_batch", c.batch)
			ep0, ep1 := twoRanks(t)
			if _, ok := ep1.peers[0].out.(*recordLink); !ok {
				if netForce.Get() {
					testskip.Skipf(t, testskip.NetForce, "links are %T, not record rings", ep1.peers[0].out)
				}
				t.Fatalf("links are %T, not record rings", ep1.peers[0].out)
			}
			sendNow := func(tag int) bool { // a short packet if the ring has room, else nothing
				ep1.lock()
				defer ep1.unlock()
				return ep1.pushShort(0, msg(size, tag), 0, tag, 0)
			}
			for tag := range n {
				if !sendNow(tag) {
					t.Fatalf("message %d found no room in an empty ring", tag)
				}
			}
			if sendNow(n) {
				t.Fatalf("message %d found room in a ring already full", n)
			}
			bufs := make([][]byte, n)
			reqs := make([]*Request, n)
			for tag := range n {
				bufs[tag] = make([]byte, size)
				var err error
				if reqs[tag], err = ep0.Irecv(bufs[tag], 1, tag, 0); err != nil {
					t.Fatal(err)
				}
			}
			for left := n; left > 0; {
				want := min(left, int(pollBatch.Get()))
				if got := ep0.Poll(); got != want {
					t.Fatalf("a poll handled %d packets, want %d", got, want)
				}
				left -= want
			}
			for tag, r := range reqs {
				if !r.Done() || r.Err() != nil || !bytes.Equal(bufs[tag], msg(size, tag)) {
					t.Fatalf("receive %d: done %v, err %v, data intact %v", tag, r.Done(), r.Err(), bytes.Equal(bufs[tag], msg(size, tag)))
				}
				r.Free()
			}
			room := 0
			for room <= n && sendNow(n+room) {
				room++
			}
			if room != c.room {
				t.Fatalf("after the poll, before the next: room for %d messages, want %d", room, c.room)
			}
			if room == 0 {
				ep0.Poll()
				if !sendNow(n) {
					t.Fatal("no room after the next poll")
				}
			}
		})
	}
}
