package nic

import (
	"errors"
	"net/netip"
)

// Link is one endpoint's queue on a network interface: Tachyon frames out
// to peers and in from them, in batches, through frame buffers the link
// owns. Two kinds implement it: an AF_XDP socket fed by Tachyon's XDP
// program (ModeXDP), and a non-blocking UDP socket (ModeUDP), which carry
// the same frames, so that either kind talks to the other.
//
// A link is driven by polling, from the progress engine's loop: no call
// blocks and no goroutine runs behind it. It is not safe for concurrent
// use: one goroutine at a time calls its methods (the engine's polling
// flag gives that), except Stats and Status, which any goroutine may call.
// In steady state no method allocates.
//
// Every frame buffer has exactly one owner at a time: the link's free
// list, the kernel's receive side (posted for receive), the caller
// (received and not yet released, or allocated and not yet sent, or kept
// after a send for retransmission), or the kernel's transmit side (queued
// and not yet completed). Each method below says which moves it makes; a
// call naming a frame its caller does not own fails with ErrNotOwned and
// changes nothing.
type Link interface {
	// Card returns what a peer needs to send to this link.
	Card() Card
	// MTU returns the largest Tachyon frame (header and payload, without
	// FrameOverhead) that this link sends and receives.
	MTU() int
	// AddPeer makes a peer known to the link and returns the index that
	// TxDesc.Peer names it by. Adding the same address again returns the
	// same index; a card of another IP family, or one that an XDP link
	// cannot address (no MAC), fails with ErrPeer.
	AddPeer(c Card) (Peer, error)

	// Alloc first takes back the frames whose sends completed, then
	// moves up to len(fs) free frames to the caller, writes their names
	// to fs and returns how many: fewer when the free list runs short.
	Alloc(fs []Frame) int
	// Bytes returns the Tachyon area of a frame the caller owns, MTU
	// bytes long: where it writes a frame to send.
	Bytes(f Frame) []byte
	// Send queues tx in order and returns how many it took. It stops
	// early, with a nil error, when the transmit queue is full (Poll and
	// call again); with ErrNotOwned for a frame the caller does not own,
	// ErrInFlight for a kept frame whose previous send has not completed,
	// ErrPeer for an unknown peer, and ErrTooLong for a length over MTU.
	// A taken frame belongs to the kernel until its send completes; then
	// it goes back to the free list, or, if Keep was set, to the caller.
	Send(tx []TxDesc) (int, error)

	// Receive moves up to len(rx) received frames to the caller and
	// describes them in rx, returning how many. Frames that fail the
	// receive checks (ErrShort, ErrLength, ErrVersion, ErrCookie) are
	// dropped and counted, never returned.
	Receive(rx []RxDesc) int
	// Release gives frames back: received ones to the receive side,
	// allocated or kept ones to the free list. A kept frame whose send is
	// still in flight is freed when the send completes. It stops at the
	// first frame the caller does not own, with ErrNotOwned.
	Release(fs []Frame) error

	// Poll does the link's background work without blocking: it takes
	// back completed sends, keeps the receive side stocked and wakes the
	// kernel where it asked to be woken. It returns how many frames it
	// moved. Alloc takes sends back and Receive and Release restock the
	// receive side too, so a caller that keeps calling them needs Poll
	// only while it waits.
	Poll() int

	// SetDropRate sets the probability in [0, 1] that the link drops a
	// received frame of its own on purpose, for loss tests (the control
	// variable nic_drop_rate sets it at Open).
	SetDropRate(p float64) error

	// Status reports how the link was set up.
	Status() Status
	// Stats returns the link's counters.
	Stats() Stats
	// Close releases the socket, the frame memory and, for XDP, detaches
	// the program. Frames the caller holds are invalid after it; later
	// calls move nothing (Send and Release fail with ErrClosed) and a
	// second Close fails with ErrClosed.
	Close() error
}

// Frame names one frame buffer of a link.
type Frame uint32

// Peer names a peer added to a link with AddPeer.
type Peer uint16

// TxDesc is one frame to send.
type TxDesc struct {
	Frame Frame
	Len   uint16 // bytes of the Tachyon frame written at Bytes(Frame)
	Peer  Peer
	Keep  bool // after the send, the frame comes back to the caller (for retransmission)
}

// RxDesc is one received frame.
type RxDesc struct {
	Frame Frame
	Data  []byte // the Tachyon frame, header first; valid until Release
	From  netip.AddrPort
}

// Errors of the Link methods.
var (
	ErrNotOwned = errors.New("nic: frame not owned by the caller")
	ErrInFlight = errors.New("nic: kept frame still being sent")
	ErrPeer     = errors.New("nic: unknown or unusable peer")
	ErrTooLong  = errors.New("nic: frame longer than the link's MTU")
	ErrClosed   = errors.New("nic: link closed")
)

// Status is how a link was set up.
type Status struct {
	Mode      Mode
	Interface string // "" for a UDP link bound to no interface
	// Chosen says why the link is on Interface, as Config.Chosen gave
	// it: "nic_interface", "default route", "3 of 3 peers on its
	// subnet 198.18.5.0/24" (ChooseInterface).
	Chosen string
	Driver string // the interface's driver and its version, as ethtool says
	// XDP links only:
	Attach     string // where the program runs: "driver" or "generic"
	ZeroCopy   bool   // the socket is bound in zero-copy mode (XDP_OPTIONS)
	BusyPoll   bool   // the kernel took SO_PREFER_BUSY_POLL and SO_BUSY_POLL_BUDGET
	NAPIPolled bool   // a socket has a NAPI id, so the link drives busy polling
	// Queues are the receive queues the link has a socket on, of the
	// InterfaceQueues the interface has.
	Queues          []int
	InterfaceQueues int
	// Steered: the NIC holds a flow rule that sends the link's frames
	// to its first queue (a link on some of the queues asks for one).
	Steered bool
	// Peers off the interface's subnet (AddPeer): GatewayPeers are sent
	// to through the next hop's MAC address, KernelPeers through the
	// kernel's UDP stack (the route leaves by another interface, or the
	// next hop did not answer ARP; the log says which).
	GatewayPeers, KernelPeers int
	// Fallback says why Open in ModeAuto took UDP, "" if it did not.
	Fallback string
	// MultiBuffer: the link's frames are larger than an AF_XDP UMEM
	// chunk (a page), each spanning several, its sockets bound with
	// XDP_USE_SG (an interface of jumbo frames, kernel 6.6 or later).
	MultiBuffer bool
	// FrameLimit says why the link's MTU is below its interface's (less
	// the IPv4 and UDP headers): the control variable nic_max_mtu, or
	// multi-buffer AF_XDP refused; "" where it is not.
	FrameLimit string
	// RxCapacity is about how many frames the link can take in while its
	// caller releases none and does not call Receive: its fill rings'
	// frames (XDP), or its socket's receive buffer in frames (UDP).
	// A transport sizes the credit it gives its peers by it; 0: unknown.
	RxCapacity int
}

// Stats are a link's counters since Open.
type Stats struct {
	RxFrames, RxBytes uint64 // frames and Tachyon bytes received
	TxFrames, TxBytes uint64 // frames and Tachyon bytes sent

	// Frames dropped by the receive checks, by cause.
	DropShort, DropLength, DropVersion, DropCookie uint64
	// Frames of ours dropped on purpose (nic_drop_rate): in the XDP
	// program for an XDP link, in Receive for a UDP link or one with
	// Faults; and frames duplicated and reordered on purpose (Faults).
	DropInjected, Duplicated, Reordered uint64

	Kicks     uint64 // system calls that woke the kernel's transmit side
	RxWakeups uint64 // system calls that woke (or busy-polled) the receive side
	TxFull    uint64 // Send calls stopped by a full transmit queue
	TxErrors  uint64 // frames the kernel refused for good (UDP links), counted as lost
	// Frames an XDP link read from its UDP socket: the program passed
	// them to the kernel, as they came on a queue where the link has no
	// socket (they count in RxFrames too once they pass the checks).
	RxFallback uint64
	// Frames an XDP link sent through its UDP socket, to KernelPeers
	// (they count in TxFrames too).
	TxKernel uint64

	// The kernel's counts for an XDP socket (XDP_STATISTICS) and the
	// XDP program's, zero for UDP links.
	Kernel  XSKStats
	Program ProgramStats
}

// XSKStats are the kernel's counters of an AF_XDP socket.
type XSKStats struct {
	RxDropped       uint64 // frames dropped for lack of room in the UMEM frame
	RxInvalid       uint64 // invalid descriptors on the fill ring
	TxInvalid       uint64 // invalid descriptors on the transmit ring
	RxRingFull      uint64 // frames dropped because the receive ring was full
	FillRingEmpty   uint64 // times the fill ring was empty when a frame came
	TxRingEmptyDesc uint64 // times the kernel found the transmit ring empty
}

// ProgramStats are the XDP program's counters of the link's port,
// summed over CPUs.
type ProgramStats struct {
	Redirected uint64 // to a socket of the link
	Passed     uint64 // frames no link's on the interface (for every link there)
	Dropped    uint64 // dropped on purpose (nic_drop_rate)
	Foreign    uint64 // to the link's port without its job's cookie: dropped
	Misqueued  uint64 // on a queue without a socket of the link: passed to its UDP socket
}
