package engine

import (
	"sync"
	"time"

	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// Control variables.
var (
	eagerLimit = cvar.NewInt("engine_eager_limit", 16<<10,
		"Largest message sent eagerly (copied through the rings at once, buffered by the receiver if no receive is posted); larger messages use the rendezvous protocol and move only once a receive matches.",
		cvar.WithCategory("engine"), cvar.WithRange(0, 1<<30), cvar.WithUnit("bytes"))
	ringKind = cvar.NewEnum("engine_rings", ringsRecords, []string{ringsRecords, ringsCells},
		"Rings joining each pair of ranks: records packs packets of any size one after another (small messages share cache lines, an eager message travels in one piece); cells gives every packet a cell of engine_cell_size bytes.",
		cvar.WithCategory("engine"))
	ringBytes = cvar.NewInt("engine_ring_bytes", 256<<10,
		"Bytes of each pair's record ring (a power of two): bounds what one rank has in flight to another, and a packet carries up to an eighth of it, less 8 bytes.",
		cvar.WithCategory("engine"), cvar.WithRange(4<<10, 1<<30), cvar.WithUnit("bytes"))
	cellSize = cvar.NewInt("engine_cell_size", 1024,
		"Bytes per cell of the per-pair rings (a power of two, at least 64): a message of up to the cell size less 32 bytes travels in one cell; larger ones are split.",
		cvar.WithCategory("engine"), cvar.WithRange(64, 1<<16), cvar.WithUnit("bytes"))
	cellCount = cvar.NewInt("engine_cells", 128,
		"Cells per per-pair ring (a power of two): how many packets one rank can have in flight to another before it waits.",
		cvar.WithCategory("engine"), cvar.WithRange(2, 1<<20), cvar.WithUnit("cells"))
	rndvMode = cvar.NewEnum("engine_rndv_copy", "auto", []string{"auto", "cma", "pipeline"},
		"How shared-memory rendezvous moves data: cma reads the sender's buffer with process_vm_readv (one copy), pipeline streams it through the rings (two copies); auto tries cma and falls back to pipeline where the kernel refuses it.",
		cvar.WithCategory("engine"))
	cmaMin = cvar.NewInt("engine_cma_min", 16<<20,
		"Smallest rendezvous message that engine_rndv_copy=auto reads with process_vm_readv; smaller ones stream through the rings. 0: every rendezvous message that auto can read so. The system call pins the sender's pages one by one, so a message must be large for one copy to beat two through the rings; where it does is the machine's (docs/engine.md has the measurements).",
		cvar.WithCategory("engine"), cvar.WithRange(0, 1<<40), cvar.WithUnit("bytes"))
	splitMin = cvar.NewInt("engine_rndv_split_min", 256<<10,
		"Smallest rendezvous message between processes whose copy the two ranks split (unless engine_rndv_copy=pipeline): the receiver reads the first part of the sender's buffer with process_vm_readv while the sender writes the rest into the receiver's with process_vm_writev, so that two cores copy at once. 0: never split. Where the kernel refuses cross-memory attach the message streams through the rings.",
		cvar.WithCategory("engine"), cvar.WithRange(0, 1<<40), cvar.WithUnit("bytes"))
	splitLone = cvar.NewBool("engine_rndv_split_lone", false,
		"Whether a rendezvous message is split (engine_rndv_split_min) even when no earlier one from the same rank is still arriving. Off, a lone message streams through the rings, whose copy may find the data in both ranks' caches; splitting pays off for messages in a stream (docs/engine.md has the measurements).",
		cvar.WithCategory("engine"))
	splitShare = cvar.NewInt("engine_rndv_split_share", 50,
		"Percent of a split rendezvous message (engine_rndv_split_min) that the sender writes, from 0 (the receiver reads it all) to 100 (the sender writes it all); the receiver reads the rest. Half balances two cores of equal speed (docs/engine.md has the measurements).",
		cvar.WithCategory("engine"), cvar.WithRange(0, 100), cvar.WithUnit("percent"))
	checkInterval = cvar.NewDuration("engine_check_interval", 5*time.Millisecond,
		"How often an endpoint with pending operations that finds nothing to do checks that its peers are alive: a dead or departed peer's operations fail within about this long after its death is visible.",
		cvar.WithCategory("engine"), cvar.WithRange(int64(10*time.Microsecond), int64(time.Minute)))
	prefault = cvar.NewBool("engine_prefault", true,
		"Whether a rank joining a shared-memory job maps and reads the rings it sends and receives on (2 x ranks x engine_ring_bytes) before its first message, rather than paying a page fault per page and a memory miss per line during the first lap of traffic.",
		cvar.WithCategory("engine"))
	linePad = cvar.NewBool("engine_line_padding", true,
		"Whether a packet sent after the endpoint polled (not in a stream of sends) pads the rest of its cache line when the next packet of its size would not fit there, so that the reader of a ping-pong fetches one line per packet.",
		cvar.WithCategory("engine"))
	warmLines = cvar.NewInt("engine_warm_lines", 64,
		"Cache lines past its tail that a record ring's writer asks for write ownership of at each empty poll after a stream of sends (rings.RecordWriter.Warm), so that the next stream's first packets find their lines in the writer's cache rather than in the reader's. 0: never.",
		cvar.WithCategory("engine"), cvar.WithRange(0, 1024), cvar.WithUnit("lines"))
	warmPolls = cvar.NewInt("engine_warm_polls", 256,
		"Polls after a stream of sends to a rank during which the link to it is warmed (engine_warm_lines): long enough to cover the wait for an answer, short enough that an idle rank stops.",
		cvar.WithCategory("engine"), cvar.WithRange(0, 1<<30), cvar.WithUnit("polls"))
	recvDirectPolls = cvar.NewInt("engine_recv_direct_polls", 256,
		"Looks a blocking receive of a serial endpoint, with nothing posted or unexpected, takes at its source's inbox for its message before it posts a request and polls every peer (0: it always posts). Other peers' packets wait that long.",
		cvar.WithCategory("engine"), cvar.WithRange(0, 1<<20), cvar.WithUnit("polls"))
	pollBatch = cvar.NewInt("engine_poll_batch", 32,
		"Packets taken from one ring in one poll before the next ring is looked at.",
		cvar.WithCategory("engine"), cvar.WithRange(1, 1024), cvar.WithUnit("packets"))
	pollRelease = cvar.NewInt("engine_poll_release_bytes", 8192,
		"Smallest packet after which a poll that finds another packet ready in the same record ring gives the space of those it handled back to the writer at once, rather than at its next poll: the writer refills it while the reader copies the next out, instead of waiting for the whole batch. 0: only at the next poll.",
		cvar.WithCategory("engine"), cvar.WithRange(0, 1<<30), cvar.WithUnit("bytes"))
)

// Performance variables. Every one an endpoint writes is kept per rank:
// the endpoint's shards are owned by its progress engine's pvar.Owner, so
// a variable is read for the whole process (the sum of the ranks a process
// holds) or for one rank. Those bound to communicators (pvar.BindComm) are
// what a tool reads through a communicator: the rank's value for most, the
// communicator's own for the queue lengths (read by scanning the rank's
// queues for the communicator's contexts). Per-transport counters are
// registered by transportCounters.
var (
	pvUnexpected = pvar.NewLevel("engine_unexpected_queue",
		"Messages that arrived before a matching receive was posted and wait in the unexpected queues; bound to a communicator, those of that communicator (its point-to-point and collective contexts) at the calling rank.",
		pvar.WithUnit("messages"), pvar.WithBind(pvar.BindComm), pvar.WithReadAt(func(k pvar.Key) int64 { return queueLenAt(k, false) }))
	pvUnexpectedHWM = pvar.NewHighWatermark("engine_unexpected_queue_hwm",
		"Longest the unexpected queue of one endpoint has been (all its communicators together); bound to a communicator, the calling rank's.",
		pvar.WithUnit("messages"), pvar.WithBind(pvar.BindComm), pvar.WithLevel(pvUnexpected.Var))
	pvPosted = pvar.NewLevel("engine_posted_queue",
		"Receives posted and not yet matched; bound to a communicator, those of that communicator at the calling rank.",
		pvar.WithUnit("requests"), pvar.WithBind(pvar.BindComm), pvar.WithReadAt(func(k pvar.Key) int64 { return queueLenAt(k, true) }))
	pvPostedHWM = pvar.NewHighWatermark("engine_posted_queue_hwm",
		"Longest the posted-receive queue of one endpoint has been (all its communicators together); bound to a communicator, the calling rank's.",
		pvar.WithUnit("requests"), pvar.WithBind(pvar.BindComm), pvar.WithLevel(pvPosted.Var))
	pvMatches = pvar.NewCounter("engine_matches",
		"Searches of a non-empty queue for a match: an arriving message against the posted receives, a receive or probe against the unexpected messages.",
		pvar.WithUnit("searches"), pvar.WithBind(pvar.BindComm))
	pvMatchDepth = pvar.NewAggregate("engine_match_depth",
		"Queue entries compared by those searches (engine_matches), summed: the heads of the one to four lists a search may look at, whatever the queues' lengths, so depth/matches is the mean cost of a match.",
		pvar.WithUnit("entries"), pvar.WithBind(pvar.BindComm))
	pvMatchDepthHWM = pvar.NewHighWatermark("engine_match_depth_hwm",
		"Most queue entries one search compared (engine_match_depth): at most 4.",
		pvar.WithUnit("entries"), pvar.WithBind(pvar.BindComm))
	pvRndv = pvar.NewCounter("engine_rendezvous",
		"Messages sent with the rendezvous protocol.", pvar.WithUnit("messages"), pvar.WithBind(pvar.BindComm))
	pvCMA = pvar.NewCounter("engine_rendezvous_cma",
		"Rendezvous messages read in one copy with process_vm_readv.", pvar.WithUnit("messages"))
	pvSplit = pvar.NewCounter("engine_rendezvous_split",
		"Rendezvous messages whose copy the two ranks split: the receiver read one part, the sender wrote the other.", pvar.WithUnit("messages"), pvar.WithBind(pvar.BindComm))
	pvPipelined = pvar.NewCounter("engine_rendezvous_pipelined",
		"Rendezvous messages streamed through the rings in data packets.", pvar.WithUnit("messages"), pvar.WithBind(pvar.BindComm))
	pvMalformed = pvar.NewCounter("engine_malformed_packets",
		"Packets from peers dropped because their type, length or request id was invalid.", pvar.WithUnit("packets"), pvar.WithBind(pvar.BindComm))
	pvPeerDeaths = pvar.NewCounter("engine_peer_deaths",
		"Peers found dead or gone while operations with them were pending.", pvar.WithUnit("peers"), pvar.WithBind(pvar.BindComm))
	pvWarmed = pvar.NewCounter("engine_lines_warmed",
		"Cache lines of the record rings to other ranks that this rank asked to own before writing to them, at empty polls after a stream of sends (engine_warm_lines).", pvar.WithUnit("lines"), pvar.WithBind(pvar.BindComm))
	pvOccupancy = pvar.NewBoundFunc("engine_ring_occupancy",
		"Bytes published in this rank's outgoing rings to its peers (one per peer, itself included; records with their headers, or whole cells) and not yet released by their readers, read from the rings' indexes when asked.",
		pvar.ClassLevel, pvar.BindComm, func() int64 { return ringOccupancy(nil) },
		func(k pvar.Key) int64 { return ringOccupancy(k.Owner) }, pvar.WithUnit("bytes"))
	pvLinkFull = pvar.NewCounter("engine_link_full",
		"Full-ring stalls: times a send or control packet found no room on the link (ring) to its peer, so that packets waited in the endpoint until the peer freed room.", pvar.WithUnit("stalls"), pvar.WithBind(pvar.BindComm))
	pvRoomWaits = pvar.NewCounter("engine_room_waits",
		"Of the full-ring stalls (engine_link_full), those this rank, about to park with packets still waiting, asked the peer to wake it for once it freed room (Link.WantRoom): one per link per park.", pvar.WithUnit("requests"), pvar.WithBind(pvar.BindComm))
	pvRoomWakes = pvar.NewCounter("engine_room_wakes",
		"Times this rank, having freed room in a peer's ring, found that the peer had asked for it and woke it.", pvar.WithUnit("wake-ups"))
	pvCancelled = pvar.NewCounter("engine_cancelled",
		"Requests cancelled successfully.", pvar.WithUnit("requests"), pvar.WithBind(pvar.BindComm))
)

// live maps the pvar.Owner of each open endpoint to the endpoint, for the
// reads of variables bound to a communicator that look at the rank's
// queues.
var live sync.Map // *pvar.Owner -> *Endpoint

// queueLenAt returns the number of posted receives (posted) or unexpected
// messages of the contexts k names at the endpoint k.Owner owns, 0 if no
// open endpoint has that owner. It scans the queues under the endpoint's
// lock: the cost is the reader's. A serial endpoint (SetSerial) has no
// lock, so there the read must come from the goroutine that drives it, as
// every call into a serial endpoint must.
func queueLenAt(k pvar.Key, posted bool) int64 {
	x, ok := live.Load(k.Owner)
	if !ok {
		return 0
	}
	ep := x.(*Endpoint)
	ep.toolMu.Lock()
	defer ep.toolMu.Unlock()
	if ep.toolEnded {
		return 0
	}
	ep.lock()
	defer ep.unlock()
	var n int64
	if posted {
		for key, l := range ep.m.posted {
			if k.HasContext(key.ctx) {
				for r := l.head; r != nil; r = r.qnext {
					n++
				}
			}
		}
		return n
	}
	for key, l := range ep.m.uq {
		// Every message is in its context's list (any source, any tag).
		if key.src == AnySource && key.tag == AnyTag && k.HasContext(key.ctx) {
			for u := l.head; u != nil; u = u.links[byContext].next {
				n++
			}
		}
	}
	return n
}

// ringOccupancy returns the bytes used in the outgoing rings of the open
// endpoint o owns, or of every open endpoint for a nil o.
func ringOccupancy(o *pvar.Owner) int64 {
	var n int64
	live.Range(func(k, x any) bool {
		if o == nil || k == o {
			n += x.(*Endpoint).ringsUsed()
		}
		return true
	})
	return n
}

// ringsUsed returns the bytes used in the endpoint's outgoing rings, 0
// once Close has begun: its rings may be unmapped then. Any goroutine may
// call it: the links never change, and a ring's indexes are shared words
// read with atomic loads.
func (ep *Endpoint) ringsUsed() int64 {
	ep.toolMu.Lock()
	defer ep.toolMu.Unlock()
	if ep.toolEnded {
		return 0
	}
	var n int64
	for i := range ep.peers {
		switch l := ep.peers[i].out.(type) {
		case *recordLink:
			n += int64(l.w.Used())
		case *ringLink:
			n += int64(l.p.Used())
		}
	}
	return n
}

// endToolReads makes the endpoint's queues and rings unreadable by tools
// (queueLenAt, ringsUsed), once any read under way has finished, and
// forgets the endpoint's owner in live.
func (ep *Endpoint) endToolReads() {
	ep.toolMu.Lock()
	defer ep.toolMu.Unlock()
	ep.toolEnded = true
	live.Delete(ep.owner)
}

// PvarOwner returns the owner of the endpoint's performance variable
// shards (its progress engine's): the Key a tool reads this rank's values
// with.
func (ep *Endpoint) PvarOwner() *pvar.Owner { return ep.owner }

// closeVars closes the endpoint's shards at Close: their counts stay in
// the process's totals and the owner's.
func (ep *Endpoint) closeVars() {
	for _, s := range []*pvar.CounterShard{ep.warmed, ep.rndv, ep.pipelined, ep.split, ep.cancelled,
		ep.deaths, ep.roomWaits, ep.malformed, ep.linkFull, ep.m.depth, ep.m.searches} {
		s.Close()
	}
	ep.uqLevel.Close()
	ep.posted.Close()
	ep.uqHWM.Close()
	ep.postedHWM.Close()
	ep.m.depthHWM.Close()
	seen := map[*pvar.CounterShard]bool{}
	for i := range ep.peers {
		for _, s := range []*pvar.CounterShard{ep.peers[i].count.msgs, ep.peers[i].count.bytes} {
			if s != nil && !seen[s] {
				seen[s] = true
				s.Close()
			}
		}
	}
}

// transportCounters are the message and byte counts of one transport kind.
type transportCounters struct {
	msgs, bytes *pvar.Counter
}

func newTransportCounters(kind string) transportCounters {
	return transportCounters{
		msgs: pvar.NewCounter("engine_"+kind+"_messages",
			"Messages sent over the "+kind+" transport.", pvar.WithUnit("messages"), pvar.WithBind(pvar.BindComm)),
		bytes: pvar.NewCounter("engine_"+kind+"_bytes",
			"Payload bytes sent over the "+kind+" transport.", pvar.WithUnit("bytes"), pvar.WithBind(pvar.BindComm)),
	}
}

var (
	countSelf   = newTransportCounters("self")
	countInproc = newTransportCounters("inproc")
	countShm    = newTransportCounters("shm")
)
