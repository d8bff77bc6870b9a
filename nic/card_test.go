package nic

import (
	"net/netip"
	"testing"
)

func TestCardText(t *testing.T) {
	c := Card{Mode: ModeXDP, IP: netip.MustParseAddr("198.18.0.1"), Port: 7000,
		MAC: [6]byte{0x02, 0xfc, 0, 0, 0, 1}, Queue: 3, MTU: 1472}
	s := c.String()
	if s != "xdp/198.18.0.1:7000/02:fc:00:00:00:01/3/1472" {
		t.Fatalf("String = %q", s)
	}
	got, err := ParseCard(s)
	if err != nil || got != c {
		t.Fatalf("ParseCard(%q) = %+v, %v", s, got, err)
	}
	var u Card
	if err := u.UnmarshalText([]byte(s)); err != nil || u != c {
		t.Fatalf("UnmarshalText = %+v, %v", u, err)
	}
	for _, bad := range []string{
		"", "xdp", "auto/198.18.0.1:7000/02:fc:00:00:00:01/0/1472",
		"tcp/198.18.0.1:7000/02:fc:00:00:00:01/0/1472",
		"udp/[::1]:7000/02:fc:00:00:00:01/0/1472",
		"udp/198.18.0.1/02:fc:00:00:00:01/0/1472",
		"udp/198.18.0.1:7000/02:fc:00:00:00/0/1472",
		"udp/198.18.0.1:7000/02:fc:00:00:00:01/-1/1472",
		"udp/198.18.0.1:7000/02:fc:00:00:00:01/0/10",
		"udp/198.18.0.1:7000/02:fc:00:00:00:01/0/70000",
		"udp/198.18.0.1:7000/02:fc:00:00:00:01/0/1472/x",
	} {
		if c, err := ParseCard(bad); err == nil {
			t.Errorf("ParseCard(%q) = %+v, want an error", bad, c)
		}
	}
}

func TestParseMode(t *testing.T) {
	for _, m := range []Mode{ModeAuto, ModeXDP, ModeUDP} {
		if got, err := ParseMode(m.String()); err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v", m.String(), got, err)
		}
	}
	if _, err := ParseMode("dpdk"); err == nil {
		t.Error("ParseMode(dpdk) succeeded")
	}
	if Mode(7).String() != "Mode(7)" {
		t.Error(Mode(7).String())
	}
}
