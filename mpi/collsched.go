package mpi

import (
	"sync"
	"sync/atomic"

	"github.com/tachyon-hpc/tachyon/engine"
	"github.com/tachyon-hpc/tachyon/progress"
)

// Collective schedules. Every collective (coll.go) is built, by the
// algorithm chosen for its size and number of ranks (collalg.go), as a
// schedule: a list of steps, sends and receives on the communicator's
// collective context grouped in rounds that a wait step ends, and the
// local copies and reductions between them. One schedule serves both
// forms of an operation:
//
//  1. A blocking call (Bcast, Allreduce...) builds it in a schedule the
//     communicator keeps (Comm.takeSched), runs it through at once (run),
//     and keeps it for the next call: in steady state nothing is
//     allocated, and a call with the same small arguments as the last
//     runs the schedule as it is (schedKey).
//  2. A nonblocking call (Ibcast...) builds it in a schedule of its own,
//     posts its first round, and hands it to its rank's collective poller
//     (collPoller), which the progress engine polls with the endpoint:
//     each poll finishes the rounds whose messages have arrived and posts
//     the next (advance). No goroutine of its own; its request completes
//     when the last round does, and waits and tests as any other. A
//     persistent request's schedule is built once and started again; a
//     Context form runs as a nonblocking one, waited for.
//
// The messages of a blocking collective carry one tag, collTagBase: a
// rank's messages to another of one collective all go before those of the
// next, and the receiving rank posts its receives for them in the same
// order, so that two collectives' messages never meet (MPICH's rule). A
// nonblocking collective's carry a tag of its own, from a count of the
// nonblocking collectives called on the communicator (every rank calls
// them in the same order, so the counts agree): those in flight together
// never take one another's messages, up to collTagSpan of them. The tags
// are few, so that the engine's matching lists, one per tag, are reused.
//
// A step that fails (a peer gone, a message of the wrong size) does not
// stop a schedule: its first error is kept and the rest still runs, so
// that the ranks waiting for this one are not left hanging, and the call
// returns the error. Every send after the error carries a poison instead
// of its data: an empty message where data is due, a byte where none is,
// which its receiver takes as a count that differs (ErrCount,
// ErrTruncate) and passes on the same way. So an error travels along the
// collective's data, and a rank whose result depends on a failed rank's
// contribution, directly or through others, never reports success.

// stepKind is what a step does.
type stepKind uint8

const (
	stSend   stepKind = iota + 1 // send a to peer
	stRecv                       // receive exactly len(b) bytes from peer into b
	stWait                       // wait for every send and receive posted since the last wait
	stReduce                     // b = a op b
	stCopy                       // copy(b, a)
)

// step is one step of a schedule.
type step struct {
	kind stepKind
	peer int // world rank of a send's or receive's peer
	a, b []byte
}

// sched is one collective's schedule and its state while it runs.
type sched struct {
	c      *Comm
	name   string // the routine, for errors
	k      kernel // the reduction's, if any
	steps  []step
	ints   []int      // algorithms' counts and offsets, reused
	chunks [][]uint64 // scratch space (collalg's temporaries), reused
	chunk  int        // the chunk scratch takes from
	used   int        // words of it taken since reset

	// Running.
	tag   int
	pc    int // next step
	reqs  []*engine.Request
	sizes []int // expected length of each receive of reqs, -1 for a send
	err   error

	// Nonblocking: the request's completion, and the poller's hold.
	done    progress.Completion
	busy    atomic.Bool // advance runs (a post from the caller, a poll)
	persist bool        // a persistent request's: kept after it completes
	key     schedKey    // the call a blocking schedule was built for, if it is kept for the next
}

// reset empties s for a new schedule on c.
func (s *sched) reset(c *Comm, name string) {
	s.key = schedKey{}
	s.c, s.name, s.k = c, name, nil
	clear(s.steps) // drop the buffers of the last call
	s.steps = s.steps[:0]
	s.ints = s.ints[:0]
	s.chunk, s.used = 0, 0
	s.pc, s.err = 0, nil
	s.reqs, s.sizes = s.reqs[:0], s.sizes[:0]
}

// release drops what s holds of the call it ran: its steps' buffers.
func (s *sched) release() {
	clear(s.steps)
	s.steps = s.steps[:0]
	s.c = nil
	s.key = schedKey{}
}

// scratch returns n bytes of s's scratch space, aligned to 16 bytes,
// valid until the next reset. The space is kept in chunks from one call to
// the next: a schedule built again for the same sizes takes the same
// chunks, and allocates nothing.
func (s *sched) scratch(n int) []byte {
	if n == 0 {
		return nil
	}
	w := (n + 15) / 16 * 2 // words, a multiple of 2
	for s.chunk < len(s.chunks) && s.used+w > len(s.chunks[s.chunk]) {
		s.chunk++
		s.used = 0
	}
	if s.chunk == len(s.chunks) {
		s.chunks = append(s.chunks, make([]uint64, max(w, minChunk)))
	}
	b := AsBytes(s.chunks[s.chunk][s.used : s.used+w])
	s.used += w
	return b[:n:n]
}

// minChunk is the smallest scratch chunk, in words.
const minChunk = 512

// send adds a send of b to rank peer of the communicator.
func (s *sched) send(peer int, b []byte) {
	s.steps = append(s.steps, step{kind: stSend, peer: s.c.group.worldRank(peer), a: b})
}

// recv adds a receive into b from rank peer of the communicator.
func (s *sched) recv(peer int, b []byte) {
	s.steps = append(s.steps, step{kind: stRecv, peer: s.c.group.worldRank(peer), b: b})
}

// wait ends a round.
func (s *sched) wait() { s.steps = append(s.steps, step{kind: stWait}) }

// reduce adds inout = in op inout.
func (s *sched) reduce(in, inout []byte) {
	if len(inout) > 0 {
		s.steps = append(s.steps, step{kind: stReduce, a: in, b: inout})
	}
}

// copy adds copy(dst, src); nothing if they are the same bytes.
func (s *sched) copy(dst, src []byte) {
	if len(dst) > 0 && &dst[0] != &src[0] {
		s.steps = append(s.steps, step{kind: stCopy, a: src, b: dst})
	}
}

// Tags of the collectives of coll.go: collTagBase for the blocking ones;
// above it, the nonblocking one's count on the communicator modulo
// collTagSpan.
const (
	collTagBase = 16
	collTagSpan = 1 << 10
)

// nextTag returns the tag of the next nonblocking collective on c.
func (c *Comm) nextTag() int {
	return collTagBase + 1 + int(c.collSeq.Add(1)%collTagSpan)
}

// poison is what a send of a after an error sends instead (see above).
func poison(a []byte) []byte {
	if len(a) > 0 {
		return nil
	}
	return poisonByte[:]
}

var poisonByte [1]byte

// payload is what send step st sends: its data, or after an error, a
// poison.
func (s *sched) payload(st *step) []byte {
	if s.err != nil {
		return poison(st.a)
	}
	return st.a
}

// fail keeps the first error of s.
func (s *sched) fail(err error) {
	if s.err == nil {
		s.err = s.c.engineErr(s.name, err)
	}
}

// run runs s through, blocking, and returns its first error.
func (s *sched) run() error {
	ep, ctx := s.c.p.ep, s.c.ctx+1
	s.tag, s.err = collTagBase, nil
	steps := s.steps
	for i := 0; i < len(steps); i++ {
		st := &steps[i]
		switch st.kind {
		case stSend:
			if i+1 < len(steps) && steps[i+1].kind == stWait {
				// The round's last post: a send that needs no request
				// when it goes out at once.
				if err := ep.Send(s.payload(st), st.peer, s.tag, ctx, engine.Standard); err != nil {
					s.fail(err)
				}
				continue
			}
			r, err := ep.Isend(s.payload(st), st.peer, s.tag, ctx, engine.Standard)
			if err != nil {
				s.fail(err)
				continue
			}
			s.reqs, s.sizes = append(s.reqs, r), append(s.sizes, -1)
		case stRecv:
			if len(s.reqs) == 0 && i+2 < len(steps) && steps[i+2].kind == stWait && steps[i+1].kind == stSend &&
				steps[i+1].peer == st.peer && ep.SendsEagerly(st.peer, len(steps[i+1].a)) {
				// An exchange of short messages with one peer (recursive
				// doubling's): the send goes first, as it cannot wait for
				// the peer, and the receive takes the engine's direct
				// path, as a ping-pong's does: no request either way.
				if err := ep.Send(s.payload(&steps[i+1]), st.peer, s.tag, ctx, engine.Standard); err != nil {
					s.fail(err)
				}
				est, err := ep.Recv(st.b, st.peer, s.tag, ctx)
				s.check(est, err, len(st.b))
				i += 2
				continue
			}
			if len(s.reqs) == 0 && i+1 < len(steps) && steps[i+1].kind == stWait {
				// A round of one receive (a broadcast's leaf): the
				// engine's Recv, whose direct path takes a short message
				// from the ring without a request.
				est, err := ep.Recv(st.b, st.peer, s.tag, ctx)
				s.check(est, err, len(st.b))
				continue
			}
			r, err := ep.Irecv(st.b, st.peer, s.tag, ctx)
			if err != nil {
				s.fail(err)
				continue
			}
			s.reqs, s.sizes = append(s.reqs, r), append(s.sizes, len(st.b))
		case stWait:
			for j, r := range s.reqs {
				est, err := r.Wait()
				s.check(est, err, s.sizes[j])
				s.reqs[j] = nil
			}
			s.reqs, s.sizes = s.reqs[:0], s.sizes[:0]
		case stReduce:
			s.k(st.a, st.b)
		case stCopy:
			copy(st.b, st.a)
		}
	}
	return s.err
}

// check records the error of a finished send or receive: the engine's,
// or for a receive a message shorter than the schedule expects (a longer
// one is the engine's ErrTruncate).
func (s *sched) check(st engine.Status, err error, want int) {
	switch {
	case err != nil:
		s.fail(err)
	case want >= 0 && st.Count != want && s.err == nil:
		s.err = errorf(ErrCount, s.name, "a message of %d bytes from rank %d where %d were expected: the ranks' counts differ, or a rank's part of the collective failed before", st.Count, s.c.group.rankOf(st.Source), want)
	}
}

// start posts s's first round for a nonblocking call, with the tag of
// the next collective on its communicator, and hands it to its rank's
// poller; complete at once if it finishes meanwhile.
func (s *sched) start() {
	s.tag = s.c.nextTag()
	s.pc, s.err = 0, nil
	s.done.Rearm()
	pl := s.c.p.collPoller()
	s.busy.Store(true)
	finished := s.advance()
	s.busy.Store(false)
	if finished {
		s.done.MarkDone()
		return
	}
	pl.add(s)
}

// advance runs s's steps as far as the messages that have arrived allow,
// and reports whether it finished. Only one goroutine at a time runs it
// (busy).
func (s *sched) advance() bool {
	ep, ctx := s.c.p.ep, s.c.ctx+1
	for s.pc < len(s.steps) {
		st := &s.steps[s.pc]
		switch st.kind {
		case stSend:
			r, err := ep.Isend(s.payload(st), st.peer, s.tag, ctx, engine.Standard)
			if err != nil {
				s.fail(err)
				break
			}
			s.reqs, s.sizes = append(s.reqs, r), append(s.sizes, -1)
		case stRecv:
			r, err := ep.Irecv(st.b, st.peer, s.tag, ctx)
			if err != nil {
				s.fail(err)
				break
			}
			s.reqs, s.sizes = append(s.reqs, r), append(s.sizes, len(st.b))
		case stWait:
			for _, r := range s.reqs {
				if !r.Done() {
					return false
				}
			}
			for j, r := range s.reqs {
				est, err := r.Wait()
				s.check(est, err, s.sizes[j])
				s.reqs[j] = nil
			}
			s.reqs, s.sizes = s.reqs[:0], s.sizes[:0]
		case stReduce:
			s.k(st.a, st.b)
		case stCopy:
			copy(st.b, st.a)
		}
		s.pc++
	}
	return len(s.reqs) == 0
}

// collPoller advances the nonblocking collectives of one rank in flight:
// a Poller of the rank's progress engine, registered with its first
// nonblocking collective.
type collPoller struct {
	e      *progress.Engine
	n      atomic.Int32 // schedules in flight: a poll with none returns at once
	mu     sync.Mutex
	active []*sched
	spare  [schedSpares]atomic.Pointer[sched] // finished schedules for the next calls (getSched)
}

// collPoller returns p's poller, registering it the first time.
func (p *proc) collPoller() *collPoller {
	p.collOnce.Do(func() {
		p.collPl = &collPoller{e: p.ep.Progress()}
		p.ep.Progress().Register(p.collPl)
	})
	return p.collPl
}

// add hands s to the poller.
func (pl *collPoller) add(s *sched) {
	pl.mu.Lock()
	pl.active = append(pl.active, s)
	pl.n.Add(1)
	pl.mu.Unlock()
	pl.e.Doorbell().Ring() // a parked waiter looks again
}

// Poll advances every schedule in flight and completes those that
// finish. It never waits: a poll that finds another goroutine adding a
// schedule, or advancing one, leaves it to the next.
func (pl *collPoller) Poll() int {
	if pl.n.Load() == 0 || !pl.mu.TryLock() {
		return 0
	}
	n := 0
	kept := pl.active[:0]
	for _, s := range pl.active {
		if !s.busy.CompareAndSwap(false, true) {
			kept = append(kept, s)
			continue
		}
		pc := s.pc
		finished := s.advance()
		s.busy.Store(false)
		if s.pc != pc {
			n++
		}
		if finished {
			pl.e.Complete(&s.done)
			pl.n.Add(-1)
			n++
			continue
		}
		kept = append(kept, s)
	}
	clear(pl.active[len(kept):])
	pl.active = kept
	pl.mu.Unlock()
	return n
}
