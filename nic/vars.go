package nic

import (
	"time"

	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// Control variables. Each is read when a link opens.
var (
	modeVar = cvar.NewEnum("nic_mode", "auto", []string{"auto", "xdp", "udp"},
		"How a link reaches the network when its Config leaves Mode as ModeAuto: auto takes AF_XDP where it can be had (root, or CAP_NET_RAW, CAP_NET_ADMIN and CAP_BPF, a kernel with XDP sockets, an interface that takes an XDP program) and UDP otherwise; xdp fails rather than fall back; udp never tries AF_XDP.",
		cvar.WithCategory("nic"))
	ifaceVar = cvar.NewString("nic_interface", "",
		"Interface a job's ranks open their network links on (ChooseInterface); it wins over the peers' addresses. Empty: each rank takes the interface whose subnet holds the most of its peers' addresses, published at bootstrap (ties to the default route's interface, then by name); where no interface shares a subnet with a peer, or there are no peers, the interface of the default route, or else the first one up that is not loopback and has an IPv4 address. The program's own (mpi.WithNetwork) wins over both.",
		cvar.WithCategory("nic"))
	attachVar = cvar.NewEnum("nic_xdp_attach", "auto", []string{"auto", "driver", "generic"},
		"Where the XDP program runs: auto tries the driver's native hook first and the generic (SKB) one if the driver refuses, except on veth, where the generic hook goes first (a native program there costs every frame a hop through the peer's NAPI, docs/nic.md); driver or generic insist.",
		cvar.WithCategory("nic"))
	bindVar = cvar.NewEnum("nic_xdp_bind", "auto", []string{"auto", "zerocopy", "copy"},
		"How the AF_XDP socket binds: auto tries zero-copy and falls back to copy mode; zerocopy or copy insist.",
		cvar.WithCategory("nic"))
	frameSizeVar = cvar.NewInt("nic_frame_size", 2048,
		"Bytes of each frame buffer at least (an AF_XDP UMEM chunk, or a UDP link's buffer): 2048 or 4096. The kernel keeps 256 of them as headroom on receive, so 2048 carries an Ethernet MTU of 1500 and 4096 one of 3500; on an interface of a larger MTU (up to nic_max_mtu) a link's buffers grow to the power of two that holds its frames, and an AF_XDP link, whose UMEM chunks the kernel keeps to a page, spans each frame over several chunks (XDP_USE_SG, kernel 6.6 or later).",
		cvar.WithCategory("nic"), cvar.WithRange(2048, 4096), cvar.WithUnit("bytes"))
	maxMTUVar = cvar.NewInt("nic_max_mtu", 9000,
		"Largest IP MTU a link uses: the interface's MTU if smaller. A link's largest Tachyon frame is this less 28 bytes of IPv4 and UDP headers, and its frame buffers grow to hold it (nic_frame_size); lower it to keep 4 KiB buffers and one UMEM chunk a frame on a jumbo-frame interface.",
		cvar.WithCategory("nic"), cvar.WithRange(576, 65535), cvar.WithUnit("bytes"))
	framesVar = cvar.NewInt("nic_frames", 4096,
		"Frame buffers a link has in all, for receive and transmit together: at least twice nic_ring_size, since an AF_XDP link keeps its fill ring full.",
		cvar.WithCategory("nic"), cvar.WithRange(64, 1<<20), cvar.WithUnit("frames"))
	ringVar = cvar.NewInt("nic_ring_size", 1024,
		"Entries of each AF_XDP ring (fill, completion, receive, transmit): a power of two; the fill ring is kept this full.",
		cvar.WithCategory("nic"), cvar.WithRange(16, 1<<16), cvar.WithUnit("entries"))
	batchVar = cvar.NewInt("nic_udp_batch", 32,
		"Datagrams a UDP link asks for in one recvmmsg call, and the most it keeps posted for receive.",
		cvar.WithCategory("nic"), cvar.WithRange(1, 1024), cvar.WithUnit("frames"))
	connectedVar = cvar.NewInt("nic_udp_connected_peers", 256,
		"Peers a UDP link sends to through a socket of their own connected to them (one file descriptor each), which spares the kernel a route lookup on every datagram; frames to later peers go through the link's own socket. 0 sends everything through it.",
		cvar.WithCategory("nic"), cvar.WithRange(0, 1<<16), cvar.WithUnit("peers"))
	udpBufVar = cvar.NewInt("nic_udp_socket_buffer", 4<<20,
		"Receive and send buffer of a UDP link's socket (SO_RCVBUFFORCE where permitted, else SO_RCVBUF, capped by net.core.rmem_max): what absorbs a burst while the link is not polled.",
		cvar.WithCategory("nic"), cvar.WithRange(64<<10, 1<<30), cvar.WithUnit("bytes"))
	busyPollVar = cvar.NewBool("nic_busy_poll", true,
		"Ask for busy polling on AF_XDP sockets (SO_PREFER_BUSY_POLL, SO_BUSY_POLL after nic_busy_poll_usecs, SO_BUSY_POLL_BUDGET after nic_busy_poll_budget). The link then drives the receive side with a non-blocking recvfrom when it finds nothing, but only where the socket has a NAPI instance to poll (zero-copy drivers): copy-mode sockets have none, and the call would only cost time.",
		cvar.WithCategory("nic"))
	busyUsecsVar = cvar.NewInt("nic_busy_poll_usecs", 20,
		"How long one busy poll of an AF_XDP socket's NAPI instance may spin in the kernel (SO_BUSY_POLL).",
		cvar.WithCategory("nic"), cvar.WithRange(1, 1000), cvar.WithUnit("microseconds"))
	busyBudgetVar = cvar.NewInt("nic_busy_poll_budget", 64,
		"Frames one busy poll may process (SO_BUSY_POLL_BUDGET).",
		cvar.WithCategory("nic"), cvar.WithRange(1, 1024), cvar.WithUnit("frames"))
	dropRateVar = cvar.NewFloat("nic_drop_rate", 0,
		"Probability in [0, 1] that a link drops a received frame of its own on purpose, for loss tests: in the XDP program (bpf_get_prandom_u32) for an XDP link, in Receive for a UDP link. 0 in production.",
		cvar.WithCategory("nic"))
	dupRateVar = cvar.NewFloat("nic_dup_rate", 0,
		"Probability in [0, 1] that a link delivers a received frame twice, for tests of the transport above it (WithFaults). 0 in production.",
		cvar.WithCategory("nic"))
	reorderRateVar = cvar.NewFloat("nic_reorder_rate", 0,
		"Probability in [0, 1] that a link delivers a received frame after the one behind it, for tests (WithFaults). 0 in production.",
		cvar.WithCategory("nic"))
	rebindVar = cvar.NewDuration("nic_rebind_wait", time.Second,
		"How long Open retries an AF_XDP bind or XDP attach that fails with EBUSY, as one does right after another socket on the same queue closed while the kernel finishes tearing it down.",
		cvar.WithCategory("nic"), cvar.WithRange(0, int64(time.Minute)))
)

// Performance variables: the sums over every link of the process. A link
// counts into shards of its own (Stats reads them).
var (
	pvRxFrames   = pvar.NewCounter("nic_rx_frames", "Frames received by links and handed to their callers.", pvar.WithUnit("frames"))
	pvRxBytes    = pvar.NewCounter("nic_rx_bytes", "Tachyon bytes (header and payload) of the frames received.", pvar.WithUnit("bytes"))
	pvTxFrames   = pvar.NewCounter("nic_tx_frames", "Frames links queued for sending.", pvar.WithUnit("frames"))
	pvTxBytes    = pvar.NewCounter("nic_tx_bytes", "Tachyon bytes of the frames queued for sending.", pvar.WithUnit("bytes"))
	pvShort      = pvar.NewCounter("nic_drop_short", "Received frames dropped as shorter than their headers.", pvar.WithUnit("frames"))
	pvLength     = pvar.NewCounter("nic_drop_length", "Received frames dropped because a length field disagreed with the frame, or the frame was not plain IPv4 UDP.", pvar.WithUnit("frames"))
	pvVersion    = pvar.NewCounter("nic_drop_version", "Received frames of another wire format version, dropped.", pvar.WithUnit("frames"))
	pvCookie     = pvar.NewCounter("nic_drop_cookie", "Received frames with another job's cookie, dropped.", pvar.WithUnit("frames"))
	pvInjected   = pvar.NewCounter("nic_drop_injected", "Frames dropped on purpose in software (nic_drop_rate on a UDP link, WithFaults); the XDP program's are nic_xdp_prog_dropped.", pvar.WithUnit("frames"))
	pvDuplicated = pvar.NewCounter("nic_fault_duplicated", "Frames delivered twice on purpose (nic_dup_rate, WithFaults).", pvar.WithUnit("frames"))
	pvReordered  = pvar.NewCounter("nic_fault_reordered", "Frames delivered after the one behind them on purpose (nic_reorder_rate, WithFaults).", pvar.WithUnit("frames"))
	pvKicks      = pvar.NewCounter("nic_tx_kicks", "System calls that woke the kernel's transmit side of an AF_XDP socket (sendto), or sent a UDP batch (sendmmsg).", pvar.WithUnit("calls"))
	pvWakeups    = pvar.NewCounter("nic_rx_wakeups", "System calls on the receive side: recvmmsg for UDP links, wake-ups and busy polls (recvfrom) for AF_XDP sockets.", pvar.WithUnit("calls"))
	pvTxFull     = pvar.NewCounter("nic_tx_full", "Send calls stopped by a full transmit queue.", pvar.WithUnit("calls"))
	pvFallback   = pvar.NewCounter("nic_rx_fallback_frames", "Frames an AF_XDP link read from its UDP socket, where the kernel put them because they came on a receive queue where the link has no socket (or no XDP program saw them): slower than the link's sockets, but not lost.", pvar.WithUnit("frames"))
	pvTxErrors   = pvar.NewCounter("nic_tx_errors", "Frames a UDP link's kernel refused for good (no route, a firewall) and that count as lost.", pvar.WithUnit("frames"))
	pvTxKernel   = pvar.NewCounter("nic_tx_kernel_frames", "Frames an AF_XDP link sent through its UDP socket, for peers off its subnet whose next hop it cannot address (Status.KernelPeers): routed by the kernel, slower than the link's sockets.", pvar.WithUnit("frames"))
)

// counters is a link's shards of the performance variables.
type counters struct {
	rxFrames, rxBytes, txFrames, txBytes     *pvar.CounterShard
	short, length, version, cookie, injected *pvar.CounterShard
	kicks, wakeups, txFull, txErrors         *pvar.CounterShard
	fallback, kernelFrames                   *pvar.CounterShard
}

func newCounters() counters {
	return counters{
		rxFrames: pvRxFrames.Shard(), rxBytes: pvRxBytes.Shard(),
		txFrames: pvTxFrames.Shard(), txBytes: pvTxBytes.Shard(),
		short: pvShort.Shard(), length: pvLength.Shard(), version: pvVersion.Shard(),
		cookie: pvCookie.Shard(), injected: pvInjected.Shard(),
		kicks: pvKicks.Shard(), wakeups: pvWakeups.Shard(), txFull: pvTxFull.Shard(), txErrors: pvTxErrors.Shard(),
		fallback: pvFallback.Shard(), kernelFrames: pvTxKernel.Shard(),
	}
}

// drop counts a frame dropped by the receive checks for err.
func (c *counters) drop(err error) {
	switch err {
	case ErrShort:
		c.short.Inc()
	case ErrVersion:
		c.version.Inc()
	case ErrCookie:
		c.cookie.Inc()
	default:
		c.length.Inc()
	}
}

// stats fills the counters' part of Stats.
func (c *counters) stats() Stats {
	return Stats{
		RxFrames: c.rxFrames.Load(), RxBytes: c.rxBytes.Load(),
		TxFrames: c.txFrames.Load(), TxBytes: c.txBytes.Load(),
		DropShort: c.short.Load(), DropLength: c.length.Load(),
		DropVersion: c.version.Load(), DropCookie: c.cookie.Load(),
		DropInjected: c.injected.Load(),
		Kicks:        c.kicks.Load(), RxWakeups: c.wakeups.Load(), TxFull: c.txFull.Load(), TxErrors: c.txErrors.Load(),
		RxFallback: c.fallback.Load(), TxKernel: c.kernelFrames.Load(),
	}
}

// close keeps the counts in the process's totals and detaches the shards.
func (c *counters) close() {
	for _, s := range []*pvar.CounterShard{c.rxFrames, c.rxBytes, c.txFrames, c.txBytes,
		c.short, c.length, c.version, c.cookie, c.injected, c.kicks, c.wakeups, c.txFull, c.txErrors, c.fallback, c.kernelFrames} {
		s.Close()
	}
}
