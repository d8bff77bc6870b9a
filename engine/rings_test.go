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
