package engine

// Link carries packets from this endpoint to one peer, reliably and in
// order. Shared-memory and in-process links are rings; a NIC link provides
// the same contract over unreliable frames with its own sequence numbers,
// acknowledgements and retransmission, so protocols and matching never
// depend on the medium.
type Link interface {
	// Reserve returns space for one packet of n bytes (at most
	// MaxPacket), or nil if the link has no room for it now.
	Reserve(n int) []byte
	// Commit publishes the reserved packet's first n bytes.
	Commit(n int)
	// Put sends one packet made of the words h0 and h1 (little-endian)
	// and payload, or reports false if the link has no room for it now:
	// Reserve, the copy and Commit in one call, for short packets.
	Put(h0, h1 uint64, payload []byte) bool
	// MaxPacket returns the largest packet the link carries.
	MaxPacket() int
	// Check reports whether the peer still takes packets: nil, or an
	// error (the peer died or closed).
	Check() error
	// Wake tells a parked peer that packets are waiting. The endpoint
	// calls it once per operation that committed packets, after
	// progress.WakeFence, which orders those commits before Wake's check
	// for a sleeping peer.
	Wake()
	// WantRoom tells the peer that this rank is about to park with packets
	// waiting for room on the link: the peer's Inbox reports RoomWanted
	// once it has freed space, and the peer then wakes this rank. The
	// endpoint calls it before it parks (progress.Parker), for the links
	// that have packets waiting.
	WantRoom()
}

// Inbox delivers the packets one peer sent to this endpoint, in order.
type Inbox interface {
	// Peek returns how many packets, up to max, are ready; Packet returns
	// each and Release frees them. An error reports a malformed packet
	// that was dropped.
	Peek(max int) (int, error)
	Packet(i int) []byte
	Release(k int)
	// Check reports whether the peer can still send: nil, or an error
	// (it died or closed). Packets it sent before stay readable.
	Check() error
	// RoomWanted reports whether the peer asked for room (Link.WantRoom)
	// since the last call. The endpoint calls it after each Release,
	// after progress.WakeFence (which orders the Release before its
	// check), and wakes the peer if it reports true.
	RoomWanted() bool
}

// remoteReader copies a rendezvous message straight from the sender's
// buffer: a plain copy between goroutines of one process, process_vm_readv
// between processes. It returns an error if it cannot, and the protocol
// falls back to streaming the data through the link.
//
// Between processes it may also split a large message's copy between the
// two ranks (engine_rndv_split_min): the receiver reads the first part
// while the sender writes the rest with process_vm_writev, so that both
// cores copy at once.
type remoteReader interface {
	readRemote(peer int, sreq, addr uint64, dst []byte) error
	// splitAt returns where to split a rendezvous message of n bytes
	// from peer: the receiver reads before it, the sender writes from
	// it on. n means no split.
	splitAt(peer, n int) int
	// readPart copies dst from peer's address addr; writeRemote copies
	// src to it.
	readPart(peer int, addr uint64, dst []byte) error
	writeRemote(peer int, addr uint64, src []byte) error
}
