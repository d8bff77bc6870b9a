package engine

import (
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
		{"SendNow", TestSendNow},
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
				setVar(t, name, value)
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
	setVar(t, "rings_prefetch_record_bytes", "64")
	ep := rankZero(t)
	l, ok := ep.peers[1].out.(*recordLink)
	if !ok {
		t.Skipf("links are %T, not record rings", ep.peers[1].out)
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
