// Package profile is an example of a profiling tool on Tachyon's
// interception API (mpi.Intercept, MPI's PMPI): for each rank it counts
// the calls, bytes and time of each operation and the messages and bytes
// exchanged with each peer, and prints them as a table when the rank
// calls Finalize.
//
//	remove, err := profile.Install(os.Stderr)
//	defer remove()
//
// What it counts:
//
//   - calls and time: every operation of the facade a rank calls, timed
//     from entry to return (Pcontrol and Finalize itself excepted).
//   - bytes: what a send sent, counted when the send is posted (a send
//     to ProcNull sends nothing); what a receive received, counted where
//     it completes: in Recv, Sendrecv, or the Wait, Test, Waitall ... that
//     completed an Irecv or a started RecvInit. A receive completed
//     through WaitallInto without statuses is counted at its buffer's
//     size and its posted source, the only ones known then. Cancelled and
//     failed operations move nothing.
//   - peers: each message sent or received, by communicator (its name,
//     or "comm" and the order the rank first used it in) and the peer's
//     rank in it.
//
// mpi.Pcontrol(0) stops the counting and Pcontrol(1) resumes it, for the
// whole process: MPI's Pcontrol acts on a process, and the ranks of an
// in-process world share theirs. A receive posted or completed in
// between is not counted. Pcontrol(2) prints every rank's table so far,
// without resetting it. At Finalize a rank's table is printed
// before Finalize goes on, and the rank's counts start again from zero.
//
// The tool is safe for concurrent use by the ranks of an in-process world
// and by the goroutines of one rank; each rank's counts have a lock of
// their own, taken once a call. It serves one world at a time: ranks of
// two mpi.Run worlds at once would be counted together.
//
// docs/tools.md describes the interception API it is written on.
package profile

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tachyon-hpc/tachyon/mpi"
)

// Install starts profiling every rank of this process and returns a
// function that stops it (idempotent). Tables are written to w, one
// Write each; write errors are dropped. A nil w profiles without
// printing.
func Install(w io.Writer) (remove func() error, err error) {
	p := &profiler{w: w}
	return mpi.Intercept(p.intercept)
}

// profiler is the state of one Install.
type profiler struct {
	w   io.Writer
	wmu sync.Mutex // serializes the tables on w

	off atomic.Bool // Pcontrol(0)

	mu    sync.Mutex                   // serializes growing ranks
	ranks atomic.Pointer[[]*rankStats] // indexed by rank, nil where not seen
}

// rankStats is what one rank has done since Install or its last
// Finalize.
type rankStats struct {
	mu    sync.Mutex
	ops   [256]opStats // by mpi.Op
	peers map[peerKey]*peerStats
	comms map[*mpi.Comm]string // each communicator's label
	reqs  map[*mpi.Request]request
}

type opStats struct {
	calls, bytes uint64
	time         time.Duration
}

type peerKey struct {
	comm *mpi.Comm
	peer int
}

type peerStats struct {
	sent, sentBytes, recvd, recvdBytes uint64
}

// request is what the profiler knows of a receive posted with Irecv or
// made by RecvInit, or of a persistent send, until it completes or is
// freed.
type request struct {
	recv, persistent bool
	comm             *mpi.Comm
	peer, bytes      int // as posted: the source (maybe AnySource) and buffer size of a receive
}

// rank returns the counts of rank r, made on first use; nil for a rank
// below 0.
func (p *profiler) rank(r int) *rankStats {
	if r < 0 {
		return nil
	}
	if s := p.ranks.Load(); s != nil && r < len(*s) && (*s)[r] != nil {
		return (*s)[r]
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var next []*rankStats
	if s := p.ranks.Load(); s != nil {
		if r < len(*s) && (*s)[r] != nil {
			return (*s)[r]
		}
		next = slices.Clone(*s)
	}
	if r >= len(next) {
		next = append(next, make([]*rankStats, r+1-len(next))...)
	}
	rs := newRankStats()
	next[r] = rs
	p.ranks.Store(&next)
	return rs
}

func newRankStats() *rankStats {
	return &rankStats{peers: map[peerKey]*peerStats{}, comms: map[*mpi.Comm]string{}, reqs: map[*mpi.Request]request{}}
}

// tracked is a request of a multi-request call that the profiler knows,
// with its index in the call's Requests.
type tracked struct {
	i   int
	req *mpi.Request
	request
}

func (p *profiler) intercept(call *mpi.Call, next mpi.Handler) error {
	switch call.Op {
	case mpi.OpPcontrol:
		switch call.Level {
		case 0:
			p.off.Store(true)
		case 1:
			p.off.Store(false)
		case 2:
			p.printAll()
		}
		return next(call)
	case mpi.OpFinalize:
		rank := call.Rank
		if w := mpi.World(); rank < 0 && call.Comm == nil && w != nil {
			rank = w.Rank() // MPI's own Finalize, of this process's rank
		}
		if rank >= 0 {
			p.finalize(rank)
		}
		return next(call)
	}
	rs := p.rank(call.Rank)
	if rs == nil {
		return next(call)
	}
	if p.off.Load() {
		if call.Request != nil || len(call.Requests) > 0 {
			rs.forget(call) // it may complete them, uncounted
		}
		return next(call)
	}
	// The multi-request calls set completed entries to nil: what the
	// profiler knows of them is looked up before.
	var pending []tracked
	if len(call.Requests) > 0 {
		rs.mu.Lock()
		if len(rs.reqs) > 0 {
			for i, r := range call.Requests {
				if q, ok := rs.reqs[r]; ok && r != nil {
					pending = append(pending, tracked{i, r, q})
				}
			}
		}
		rs.mu.Unlock()
	}
	start := time.Now()
	err := next(call)
	d := time.Since(start)
	rs.mu.Lock()
	rs.record(call, err, d, pending)
	rs.mu.Unlock()
	return err
}

// record counts call, which returned res after d; pending are the known
// requests among call.Requests. Under rs.mu.
func (rs *rankStats) record(call *mpi.Call, err error, d time.Duration, pending []tracked) {
	res := &call.Result
	op := &rs.ops[call.Op]
	op.calls++
	op.time += d
	ok := err == nil
	switch call.Op {
	case mpi.OpSend, mpi.OpSsend, mpi.OpRsend, mpi.OpBsend,
		mpi.OpIsend, mpi.OpIssend, mpi.OpIrsend, mpi.OpIbsend,
		mpi.OpSendLayout, mpi.OpSsendLayout, mpi.OpRsendLayout, mpi.OpBsendLayout,
		mpi.OpIsendLayout, mpi.OpIssendLayout, mpi.OpIrsendLayout, mpi.OpIbsendLayout:
		if ok {
			op.bytes += rs.sent(call.Comm, call.Peer, call.Bytes)
		}
	case mpi.OpRecv, mpi.OpRecvLayout:
		if ok {
			op.bytes += rs.received(call.Comm, res.Status)
		}
	case mpi.OpSendrecv, mpi.OpSendrecvReplace:
		if ok {
			op.bytes += rs.sent(call.Comm, call.Peer, call.Bytes)
			op.bytes += rs.received(call.Comm, res.Status)
		}
	case mpi.OpIrecv, mpi.OpIrecvLayout, mpi.OpRecvInit:
		if ok && res.Request != nil {
			rs.reqs[res.Request] = request{recv: true, persistent: call.Op == mpi.OpRecvInit,
				comm: call.Comm, peer: call.Peer, bytes: call.Bytes}
		}
	case mpi.OpSendInit, mpi.OpSsendInit, mpi.OpBsendInit, mpi.OpRsendInit:
		if ok && res.Request != nil {
			rs.reqs[res.Request] = request{persistent: true, comm: call.Comm, peer: call.Peer, bytes: call.Bytes}
		}
	case mpi.OpStart:
		if ok {
			op.bytes += rs.started(call.Request)
		}
	case mpi.OpStartall:
		if ok {
			for _, r := range call.Requests {
				op.bytes += rs.started(r)
			}
		}
	case mpi.OpWait:
		op.bytes += rs.completed(call.Request, res.Status, true, err)
	case mpi.OpTest:
		if res.Flag || !ok {
			op.bytes += rs.completed(call.Request, res.Status, true, err)
		}
	case mpi.OpWaitall, mpi.OpTestall:
		if call.Op == mpi.OpTestall && ok && !res.Flag {
			break
		}
		for _, t := range pending {
			// Without error every request completed; with one, those
			// whose entry was set to nil did (persistent ones cannot be
			// told and are left uncounted).
			if !ok && (t.i >= len(call.Requests) || call.Requests[t.i] != nil) {
				continue
			}
			st, have := statusAt(res.Statuses, t.i)
			op.bytes += rs.completedKnown(t.req, t.request, st, have, err)
		}
	case mpi.OpWaitany, mpi.OpTestany:
		if call.Op == mpi.OpTestany && !res.Flag {
			break
		}
		for _, t := range pending {
			if t.i == res.Index {
				op.bytes += rs.completedKnown(t.req, t.request, res.Status, true, err)
			}
		}
	case mpi.OpWaitsome, mpi.OpTestsome:
		for k, i := range res.Indices {
			for _, t := range pending {
				if t.i == i {
					st, have := statusAt(res.Statuses, k)
					op.bytes += rs.completedKnown(t.req, t.request, st, have, err)
				}
			}
		}
	case mpi.OpRequestFree:
		if ok {
			delete(rs.reqs, call.Request)
		}
	}
}

// forget drops the receives of call.Request and call.Requests, which the
// call may complete while counting is off, so that they are not counted
// later (persistent requests stay until freed).
func (rs *rankStats) forget(call *mpi.Call) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	drop := func(r *mpi.Request) {
		if q, ok := rs.reqs[r]; ok && !q.persistent {
			delete(rs.reqs, r)
		}
	}
	drop(call.Request)
	for _, r := range call.Requests {
		drop(r)
	}
}

func statusAt(sts []mpi.Status, i int) (mpi.Status, bool) {
	if i >= 0 && i < len(sts) {
		return sts[i], true
	}
	return mpi.Status{}, false
}

// sent counts a message of n bytes to peer on comm and returns the bytes
// (0 to ProcNull or a peer out of range).
func (rs *rankStats) sent(comm *mpi.Comm, peer, n int) uint64 {
	if peer < 0 || n < 0 {
		return 0
	}
	ps := rs.peer(comm, peer)
	ps.sent++
	ps.sentBytes += uint64(n)
	return uint64(n)
}

// received counts the message st describes and returns its bytes (0 for
// a receive from ProcNull or a cancelled one).
func (rs *rankStats) received(comm *mpi.Comm, st mpi.Status) uint64 {
	if st.Cancelled || st.Source < 0 || st.Count < 0 {
		return 0
	}
	ps := rs.peer(comm, st.Source)
	ps.recvd++
	ps.recvdBytes += uint64(st.Count)
	return uint64(st.Count)
}

// started counts the send a persistent request r makes at Start.
func (rs *rankStats) started(r *mpi.Request) uint64 {
	if q, ok := rs.reqs[r]; ok && r != nil && !q.recv {
		return rs.sent(q.comm, q.peer, q.bytes)
	}
	return 0
}

// completed counts the completion of r with status st, if r is a known
// receive, and forgets r unless it is persistent.
func (rs *rankStats) completed(r *mpi.Request, st mpi.Status, have bool, err error) uint64 {
	q, ok := rs.reqs[r]
	if !ok || r == nil {
		return 0
	}
	return rs.completedKnown(r, q, st, have, err)
}

// completedKnown is completed for a request whose record q was looked up
// before the call.
func (rs *rankStats) completedKnown(r *mpi.Request, q request, st mpi.Status, have bool, err error) uint64 {
	if !q.persistent {
		delete(rs.reqs, r)
	}
	if !q.recv || err != nil {
		return 0
	}
	if !have { // statuses dropped: what was posted
		if q.peer == mpi.ProcNull {
			return 0
		}
		ps := rs.peer(q.comm, q.peer)
		ps.recvd++
		ps.recvdBytes += uint64(max(q.bytes, 0))
		return uint64(max(q.bytes, 0))
	}
	return rs.received(q.comm, st)
}

// peer returns the counts of peer on comm, made on first use.
func (rs *rankStats) peer(comm *mpi.Comm, peer int) *peerStats {
	k := peerKey{comm, peer}
	ps := rs.peers[k]
	if ps == nil {
		ps = &peerStats{}
		rs.peers[k] = ps
		if _, ok := rs.comms[comm]; !ok {
			rs.comms[comm] = commLabel(comm, len(rs.comms))
		}
	}
	return ps
}

// commLabel names comm in a table: its name without blanks, or "comm"
// and n.
func commLabel(comm *mpi.Comm, n int) string {
	if name := strings.Join(strings.Fields(comm.Name()), "_"); name != "" {
		return name
	}
	return fmt.Sprintf("comm%d", n)
}

// finalize prints rank r's table and starts its counts again.
func (p *profiler) finalize(r int) {
	rs := p.rank(r)
	rs.mu.Lock()
	table := rs.table(r)
	rs.ops = [256]opStats{}
	clear(rs.peers)
	clear(rs.comms)
	clear(rs.reqs)
	rs.mu.Unlock()
	p.write(table)
}

// printAll prints the table of every rank that made a call since Install
// or its Finalize, in rank order.
func (p *profiler) printAll() {
	s := p.ranks.Load()
	if s == nil {
		return
	}
	for r, rs := range *s {
		if rs == nil {
			continue
		}
		rs.mu.Lock()
		var table []byte
		if rs.calls() > 0 {
			table = rs.table(r)
		}
		rs.mu.Unlock()
		if table != nil {
			p.write(table)
		}
	}
}

func (p *profiler) write(table []byte) {
	if p.w == nil {
		return
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.w.Write(table)
}

// table formats rank r's counts, under rs.mu:
//
//	profile of rank 0: 21 calls, 1.2ms in MPI
//	  operation            calls          bytes           time
//	  Send                    10          10240          120µs
//	  communicator          peer      sent    sent_bytes  received  received_bytes
//	  MPI_COMM_WORLD           1        10         10240         0               0
//
// Operations in the order of mpi.Op, peers by communicator label and
// rank; the fields of a row are separated by blanks.
func (rs *rankStats) table(r int) []byte {
	var total time.Duration
	for _, o := range rs.ops {
		total += o.time
	}
	w := new(bytes.Buffer)
	fmt.Fprintf(w, "profile of rank %d: %d calls, %v in MPI\n", r, rs.calls(), total)
	fmt.Fprintf(w, "  %-18s %10s %16s %14s\n", "operation", "calls", "bytes", "time")
	for i, o := range rs.ops {
		if o.calls > 0 {
			fmt.Fprintf(w, "  %-18s %10d %16d %14v\n", mpi.Op(i), o.calls, o.bytes, o.time)
		}
	}
	keys := make([]peerKey, 0, len(rs.peers))
	for k := range rs.peers {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b peerKey) int {
		if c := strings.Compare(rs.comms[a.comm], rs.comms[b.comm]); c != 0 {
			return c
		}
		return a.peer - b.peer
	})
	if len(keys) > 0 {
		fmt.Fprintf(w, "  %-18s %6s %10s %14s %10s %14s\n", "communicator", "peer", "sent", "sent_bytes", "received", "received_bytes")
	}
	for _, k := range keys {
		ps := rs.peers[k]
		fmt.Fprintf(w, "  %-18s %6d %10d %14d %10d %14d\n", rs.comms[k.comm], k.peer, ps.sent, ps.sentBytes, ps.recvd, ps.recvdBytes)
	}
	w.WriteString("\n")
	return w.Bytes()
}

// calls returns the calls counted, under rs.mu.
func (rs *rankStats) calls() uint64 {
	var n uint64
	for _, o := range rs.ops {
		n += o.calls
	}
	return n
}
