package engine

import (
	"log/slog"

	"github.com/tachyon-hpc/tachyon/nic"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// The path of a rank's frames to a network peer, chosen at Join (OpenNetLink
// opens the rank's link, AF_XDP where it can be had, and each peer's card
// says how the peer receives): the slower of the two ends' links.
//
// A path is named as a link's mode is (linkModes, fastest first), and
// the state performance variable engine_net_path reads a rank's slowest
// path over its network peers as engine_net_link_mode reads its slowest
// link: the two differ where a peer's link is slower than the rank's own
// (a peer that fell back to UDP makes the path to it udp, whatever this
// end's link is).
const (
	pathNone        = -1 // no network peer
	pathXDPZeroCopy = 0  // both on AF_XDP, this end in zero-copy mode
	pathXDPCopy     = 1  // both on AF_XDP, this end in copy mode
	pathUDP         = 2  // an end's link is a kernel UDP socket
)

var pvNetPath = pvar.NewState("engine_net_path",
	"The slowest path of a rank's frames to its network peers, chosen at Join: 0 xdp-zerocopy (both ends on AF_XDP, this end zero-copy), 1 xdp-copy (both on AF_XDP, this end copying), 2 udp (either end's link is a kernel UDP socket); -1 with no network peer; the process's value is the slowest of its ranks'. engine_net_link_mode is this end's link alone: the path is slower where the peer's link is (a peer that fell back to UDP). A rank falls back to UDP only where its host cannot give it AF_XDP (the log says why, nic's Status.Fallback too).",
	linkModes, pvar.WithBind(pvar.BindComm))

// linkPath is the path a link gives: how it receives.
func linkPath(l nic.Link) int { return linkMode(l.Status()) }

// peerPath is the path to a peer whose card is c over link l.
func peerPath(l nic.Link, c nic.Card) int {
	if c.Mode != nic.ModeXDP {
		return pathUDP
	}
	return linkPath(l)
}

// PathName returns the name of an engine_net_path value: "xdp-zerocopy",
// "xdp-copy", "udp", or "none" for -1 (no network peer).
func PathName(v int64) string {
	switch {
	case v == pathNone:
		return "none"
	case v >= 0 && int(v) < len(linkModes):
		return linkModes[v]
	}
	return "unknown"
}

// NetPath returns the path of this endpoint's frames to rank peer, by
// PathName's names: "none" for a rank on this host or this one.
func (ep *Endpoint) NetPath(peer int) string {
	ep.lock()
	defer ep.unlock()
	if ep.net == nil || peer < 0 || peer >= len(ep.net.paths) {
		return PathName(pathNone)
	}
	return PathName(int64(ep.net.paths[peer]))
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

// notePath returns the path to the peer of card and makes the rank's
// path (its shard of engine_net_path, taken at its first network peer)
// no better than it.
func (d *netDev) notePath(card nic.Card) int {
	p := peerPath(d.link, card)
	if d.path == nil {
		d.path = pvNetPath.Shard()
		d.path.Set(p)
	} else if int64(p) > d.path.Load() {
		d.path.Set(p)
	}
	return p
}

// logLinkPath says which path a newly opened link gives, and why not
// AF_XDP where it fell back.
func logLinkPath(l nic.Link) {
	s := l.Status()
	if s.Fallback != "" {
		slog.Info("engine: this rank's network link is a UDP socket, not AF_XDP", "path", PathName(pathUDP), "interface", s.Interface, "chosen", s.Chosen, "why", s.Fallback)
		return
	}
	slog.Debug("engine: this rank's network link", "path", PathName(int64(linkPath(l))), "interface", s.Interface,
		"chosen", s.Chosen, "attach", s.Attach, "queues", s.Queues, "of", s.InterfaceQueues)
}
