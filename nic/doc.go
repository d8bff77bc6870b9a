// Package nic is Tachyon's data plane to the network: Tachyon frames in
// and out of a NIC queue in batches, polled, with no kernel network stack
// on the path where the machine allows it.
//
// A Link is one endpoint's queue. Open makes one of two kinds:
//
//   - ModeXDP: AF_XDP sockets, one on each receive queue of an interface
//     the link takes, sharing one UMEM, fed by an XDP program (built in
//     Go with cilium/ebpf's asm package) that redirects the UDP datagrams
//     for the link's address and port carrying its job's cookie to the
//     link's socket on their queue and passes everything else to the
//     kernel. One program serves every link on the interface, of this
//     process and the host's others (xdpshare_linux.go); links of one
//     host divide the queues (Config.Share), and frames that arrive where
//     a link has no socket reach it through its UDP socket. Frame buffers
//     live in the UMEM, sized to frames of the interface's MTU (up to
//     nic_max_mtu): past a page, the kernel's largest chunk, a frame
//     spans several chunks (multi-buffer AF_XDP, XDP_USE_SG). The rings
//     are driven with cached indices and asm's acquire loads and release
//     stores, and the kernel is woken only when it asks
//     (XDP_USE_NEED_WAKEUP). Zero-copy and the driver's
//     hook are tried first, copy mode and the generic hook after.
//   - ModeUDP: a non-blocking kernel UDP socket carrying the same payloads,
//     with recvmmsg and sendmmsg batches, for machines without the
//     privilege or the kernel for AF_XDP. ModeAuto falls back to it.
//
// Both kinds speak the same wire format (frame.go, docs/nic.md): a real
// Ethernet + IPv4 + UDP datagram whose payload starts with a 40-byte
// Tachyon header, so either kind talks to the other. Receive drops and
// counts frames that are short, malformed, of another version or of
// another job (the cookie).
//
// A link never blocks and runs no goroutine (the process that serves an
// interface's program to the host's other links runs one, blocked in
// accept): the progress engine polls it
// (a Link is a progress.Poller), and in steady state no call allocates.
// Every frame buffer has exactly one owner at a time (owner.go), which
// each call checks and the tests audit. Tunables are the control
// variables nic_*, counters the performance variables nic_*.
//
// Beside a link, a Stream is the bulk lane: a non-blocking kernel TCP
// connection, polled the same way, that the engine uses for the data of
// large messages, which the kernel moves in 64 KiB segments where frames
// would cost it one packet each (stream_linux.go).
//
// The reliable, ordered transport on top of it is the engine's.
package nic
