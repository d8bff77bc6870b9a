package engine

// Leftover is an operation a rank left unfinished: a message that came
// and no receive took (a matched probe's included), a receive still
// posted, or a send that no receive has taken (or, for a rendezvous,
// finished taking).
type Leftover struct {
	Kind   LeftoverKind
	Peer   int    // the sender of an unreceived message, the source of a receive (AnySource), the destination of a send
	Tag    int    // AnyTag for a receive of any tag
	Ctx    uint32 // the context: which communicator, to the layer above
	Bytes  int    // the message's length; a receive's buffer
	Freed  bool   // a send or receive whose request the user freed
	Probed bool   // an unreceived message a matched probe took (Improbe, Mprobe)
}

// LeftoverKind says what a Leftover is.
type LeftoverKind uint8

// Kinds of Leftover.
const (
	Unreceived  LeftoverKind = iota + 1 // a message arrived that no receive took
	PendingRecv                         // a receive still posted or still receiving
	PendingSend                         // a send not yet complete
)

// Leftovers returns up to max of what the endpoint has left unfinished,
// unexpected messages first, and how many there are in all: what
// Finalize reports of an erroneous program (MPI-4.1 11.2.2).
func (ep *Endpoint) Leftovers(max int) ([]Leftover, int) {
	ep.lock()
	defer ep.unlock()
	var out []Leftover
	n := 0
	add := func(l Leftover) {
		if len(out) < max {
			out = append(out, l)
		}
		n++
	}
	for k, l := range ep.m.uq {
		if k.src != AnySource || k.tag != AnyTag {
			continue // each message is in exactly one whole-context list
		}
		for u := l.head; u != nil; u = u.links[byContext].next {
			if !u.cancelled && u.waiter == nil {
				add(Leftover{Kind: Unreceived, Peer: int(u.src), Tag: int(u.tag), Ctx: u.ctx, Bytes: u.length})
			}
		}
	}
	for u := ep.m.held; u != nil; u = u.links[byExact].next {
		add(Leftover{Kind: Unreceived, Peer: int(u.src), Tag: int(u.tag), Ctx: u.ctx, Bytes: u.length, Probed: true})
	}
	for c := 0; c < ep.reqs.n; c++ {
		chunk := ep.reqs.chunks[c].Load()
		for j := range chunk {
			r := &chunk[j]
			switch {
			case r.state == stFree || r.state == stDone:
			case r.kind == kindRecv:
				add(Leftover{Kind: PendingRecv, Peer: r.peer, Tag: r.tag, Ctx: r.ctx, Bytes: len(r.buf), Freed: r.freed})
			case r.kind == kindSend:
				add(Leftover{Kind: PendingSend, Peer: r.peer, Tag: r.tag, Ctx: r.ctx, Bytes: len(r.buf), Freed: r.freed})
			}
		}
	}
	return out, n
}
