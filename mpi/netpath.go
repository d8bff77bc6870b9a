package mpi

import "github.com/tachyon-hpc/tachyon/nic"

// NetPath is how this process's messages reach one rank of a
// communicator: the path the engine chose at Init or at the connection's
// handshake, and the network link it goes through.
type NetPath struct {
	// Path is "none" (a rank on this host, or this process: shared
	// memory or its own rings), "udp" (either end's link is a kernel UDP
	// socket), "xdp-copy" (both on AF_XDP, this end in copy mode) or
	// "xdp-zerocopy" (the engine's engine_net_path names).
	Path string
	// Link is this process's network link, as nic.Link.Status reads it
	// (mode, interface, driver, the XDP hook, zero-copy, the receive
	// queues it has sockets on, the flow rule, why it fell back to UDP),
	// and Card its address and MTU: zero values where the process has no
	// network peer in c's job (HasLink false).
	Link    nic.Status
	Card    nic.Card
	HasLink bool
}

// NetPath returns the path of this process's messages to rank (of c's
// remote group for an intercommunicator, as point-to-point names ranks),
// for a tool or a benchmark to say what it measures: ErrRank for a rank
// that c has not.
func (c *Comm) NetPath(rank int) (NetPath, error) {
	const op = "NetPath"
	if err := c.check(op); err != nil {
		return NetPath{}, err
	}
	if rank < 0 || rank >= c.psize {
		return NetPath{}, c.fail(errorf(ErrRank, op, "rank %d is not in %s, whose point-to-point peers number %d", rank, c.label(), c.psize))
	}
	ep := c.p.ep
	p := NetPath{Path: ep.NetPath(c.peers.worldRank(rank))}
	p.Link, p.Card, p.HasLink = ep.NetLink()
	return p, nil
}
