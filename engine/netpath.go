package engine

import (
	"log/slog"
	"sync/atomic"

	"github.com/tachyon-hpc/tachyon/nic"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// The path of a rank's frames to a network peer, chosen at Join (OpenNetLink
// opens the rank's link, AF_XDP where it can be had, and each peer's card
// says how the peer receives): the slower of the two ends' links.
//
// Values of the state performance variable engine_net_path, ordered from
// the slowest: a rank's worst path over its peers.
const (
	pathNone        = 0 // no network peer
	pathUDP         = 1 // an end's link is a kernel UDP socket
	pathXDPCopy     = 2 // both on AF_XDP, this end in copy mode
	pathXDPZeroCopy = 3 // both on AF_XDP, this end in zero-copy mode
)

var pathNames = [...]string{"none", "udp", "xdp-copy", "xdp-zerocopy"}

// netPath is the worst path any endpoint of the process has to a network
// peer.
var netPath atomic.Int64

func init() {
	pvar.NewFunc("engine_net_path",
		"The slowest path of this process's frames to a network peer, chosen at Join: 0 none (no network peer), 1 udp (either end's link is a kernel UDP socket), 2 xdp-copy (both on AF_XDP, this end in copy mode), 3 xdp-zerocopy. A rank falls back to UDP only where its host cannot give it AF_XDP (the log says why, nic's Status.Fallback too); a peer that fell back makes the path to it udp.",
		pvar.ClassState, netPath.Load)
}

// linkPath is the path a link gives: how it receives.
func linkPath(l nic.Link) int {
	s := l.Status()
	switch {
	case s.Mode != nic.ModeXDP:
		return pathUDP
	case s.ZeroCopy:
		return pathXDPZeroCopy
	}
	return pathXDPCopy
}

// peerPath is the path to a peer whose card is c over link l.
func peerPath(l nic.Link, c nic.Card) int {
	if c.Mode != nic.ModeXDP {
		return pathUDP
	}
	return linkPath(l)
}

// PathName returns the name of an engine_net_path value: "none", "udp",
// "xdp-copy" or "xdp-zerocopy".
func PathName(v int64) string {
	if v >= 0 && int(v) < len(pathNames) {
		return pathNames[v]
	}
	return "unknown"
}

// NetPath returns the path of this endpoint's frames to rank peer, by
// PathName's names: "none" for a rank on this host or this one.
func (ep *Endpoint) NetPath(peer int) string {
	ep.lock()
	defer ep.unlock()
	if ep.net == nil || peer < 0 || peer >= len(ep.net.paths) {
		return pathNames[pathNone]
	}
	return pathNames[ep.net.paths[peer]]
}

// NetLink returns the status and the card of this endpoint's network
// link (nic.Link's Status and Card: its mode, interface, driver, hook,
// zero-copy, queues, address and MTU); ok is false where the endpoint
// has no network peer, and so no link.
func (ep *Endpoint) NetLink() (st nic.Status, card nic.Card, ok bool) {
	ep.lock()
	defer ep.unlock()
	if ep.net == nil {
		return nic.Status{}, nic.Card{}, false
	}
	return ep.net.link.Status(), ep.net.link.Card(), true
}

// notePath returns the path to the peer of card and makes the process's
// path no better than it.
func (d *netDev) notePath(card nic.Card) int {
	p := peerPath(d.link, card)
	for {
		old := netPath.Load()
		if old != pathNone && old <= int64(p) || netPath.CompareAndSwap(old, int64(p)) {
			return p
		}
	}
}

// logLinkPath says which path a newly opened link gives, and why not
// AF_XDP where it fell back.
func logLinkPath(l nic.Link) {
	s := l.Status()
	if s.Fallback != "" {
		slog.Info("engine: this rank's network link is a UDP socket, not AF_XDP", "path", pathNames[pathUDP], "interface", s.Interface, "why", s.Fallback)
		return
	}
	slog.Debug("engine: this rank's network link", "path", pathNames[linkPath(l)], "interface", s.Interface,
		"attach", s.Attach, "queues", s.Queues, "of", s.InterfaceQueues)
}
