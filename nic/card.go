package nic

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Mode is how a link reaches its network interface.
type Mode uint8

const (
	// ModeAuto, in a Config, asks Open for XDP where it can be had and
	// UDP otherwise. A link's own mode is never ModeAuto.
	ModeAuto Mode = iota
	// ModeXDP: an AF_XDP socket fed by Tachyon's XDP program; no kernel
	// network stack on the data path.
	ModeXDP
	// ModeUDP: a non-blocking kernel UDP socket carrying the same frames.
	ModeUDP
)

var modeNames = [...]string{"auto", "xdp", "udp"}

func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

// ParseMode returns the mode named s ("auto", "xdp" or "udp").
func ParseMode(s string) (Mode, error) {
	for i, n := range modeNames {
		if s == n {
			return Mode(i), nil
		}
	}
	return 0, fmt.Errorf("nic: unknown mode %q (want auto, xdp or udp)", s)
}

// Card is a link's address card: everything a peer needs to send to it,
// and what a job publishes for each endpoint. It is a comparable value.
type Card struct {
	Mode  Mode
	IP    netip.Addr // IPv4
	Port  uint16
	MAC   [6]byte // the interface's; zero for a UDP link on no interface
	Queue uint32  // the first NIC receive queue an XDP link is bound to (the one it steers its port to)
	MTU   uint16  // largest Tachyon frame it takes (Link.MTU)
}

// AddrPort returns the card's IP and port.
func (c Card) AddrPort() netip.AddrPort { return netip.AddrPortFrom(c.IP, c.Port) }

// String returns the card in the text form ParseCard reads:
// "mode/ip:port/mac/queue/mtu", as in
// "xdp/198.18.0.1:7000/02:fc:00:00:00:01/0/1472".
func (c Card) String() string {
	b, _ := c.MarshalText()
	return string(b)
}

// MarshalText implements encoding.TextMarshaler with String's form.
func (c Card) MarshalText() ([]byte, error) {
	s := fmt.Sprintf("%s/%s/%s/%d/%d", c.Mode, c.AddrPort(), net.HardwareAddr(c.MAC[:]), c.Queue, c.MTU)
	return []byte(s), nil
}

// UnmarshalText implements encoding.TextUnmarshaler, as ParseCard.
func (c *Card) UnmarshalText(b []byte) error {
	p, err := ParseCard(string(b))
	if err != nil {
		return err
	}
	*c = p
	return nil
}

// ParseCard reads a card in the form String writes.
func ParseCard(s string) (Card, error) {
	var c Card
	f := strings.Split(s, "/")
	if len(f) != 5 {
		return c, fmt.Errorf("nic: card %q: want mode/ip:port/mac/queue/mtu", s)
	}
	m, err := ParseMode(f[0])
	if err != nil || m == ModeAuto {
		return c, fmt.Errorf("nic: card %q: mode %q is not xdp or udp", s, f[0])
	}
	ap, err := netip.ParseAddrPort(f[1])
	if err != nil || !ap.Addr().Is4() {
		return c, fmt.Errorf("nic: card %q: %q is not an IPv4 address and port", s, f[1])
	}
	hw, err := net.ParseMAC(f[2])
	if err != nil || len(hw) != 6 {
		return c, fmt.Errorf("nic: card %q: %q is not an Ethernet address", s, f[2])
	}
	q, err := strconv.ParseUint(f[3], 10, 32)
	if err != nil {
		return c, fmt.Errorf("nic: card %q: queue %q: %w", s, f[3], err)
	}
	mtu, err := strconv.ParseUint(f[4], 10, 16)
	if err != nil || mtu < HeaderLen+MessageLen {
		return c, fmt.Errorf("nic: card %q: MTU %q is not a number from %d to 65535", s, f[4], HeaderLen+MessageLen)
	}
	c.Mode, c.IP, c.Port, c.Queue, c.MTU = m, ap.Addr(), ap.Port(), uint32(q), uint16(mtu)
	copy(c.MAC[:], hw)
	return c, nil
}
