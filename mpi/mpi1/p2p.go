package mpi1

import (
	"github.com/tachyon-hpc/tachyon/mpi"
)

// The modes of the send and receive routines. A blocking or nonblocking
// send matches a blocking or nonblocking receive; a synchronized send
// matches only a synchronized receive.
const (
	Blocking     = "blocking"
	Nonblocking  = "nonblocking"
	Synchronized = "synchronized"
)

// ackTag is the tag of the acknowledgment a synchronized receive sends
// back, on its group's communicator.
const ackTag = 0

// CSEND sends the first length bytes of buf to process dest as a message
// of type typ (MPI_CSEND). Blocking, it returns length once buf may be
// reused; synchronized, once dest's synchronized receive has stored the
// message; nonblocking, it returns the message ID at once, for WAIT,
// STATS or CANCEL.
func (p *Proc) CSEND(mode string, buf []byte, dest, typ, length int) int {
	if uint(length) > uint(len(buf)) {
		return p.fail(ErrBufSize)
	}
	if dest < 0 {
		return p.fail(p.pidErr())
	}
	if typ < 0 {
		return p.fail(ErrType)
	}
	switch mode {
	case Blocking:
		if err := p.cc.reg.Send(buf[:length], dest, typ); err != nil {
			return p.failed(err)
		}
		return p.ok(length)
	case Nonblocking:
		r, err := p.cc.reg.Isend(buf[:length], dest, typ)
		return p.started(r, err, false, length)
	case Synchronized:
		return p.synced(p.cc.syn.Ssend(buf[:length], dest, typ), dest, length)
	}
	return p.fail(ErrMode)
}

// CRECV receives a message of type typ (-1: any) from process source
// (-1: any) into buf (MPI_CRECV). A message longer than maxlen bytes is
// truncated to maxlen, and the whole length is what CRECV, WAIT, STATS
// and INFOL report. Blocking or synchronized, it returns that length
// once the message is in buf, and a synchronized receive then
// acknowledges it to its sender; nonblocking, it returns the message ID
// at once.
func (p *Proc) CRECV(mode string, buf []byte, source, typ, maxlen int) int {
	if uint(maxlen) > uint(len(buf)) {
		return p.fail(ErrBufSize)
	}
	if source < -1 {
		return p.fail(p.pidErr())
	}
	if typ < -1 {
		return p.fail(ErrType)
	}
	switch mode {
	case Blocking:
		st, err := p.cc.reg.Recv(buf[:maxlen], source, typ)
		return p.received(st, err)
	case Nonblocking:
		r, err := p.cc.reg.Irecv(buf[:maxlen], source, typ)
		return p.started(r, err, true, 0)
	case Synchronized:
		st, err := p.cc.syn.Recv(buf[:maxlen], source, typ)
		return p.acked(st, err)
	}
	return p.fail(ErrMode)
}

// SSEND sends the message gathered from nblks blocks of lenblk bytes of
// buf whose starts lie stride bytes apart (MPI_SSEND), as CSEND sends a
// contiguous one, and returns lenblk*nblks bytes (or the message ID).
// The blocks may overlap (stride < lenblk): their shared bytes are sent
// again.
func (p *Proc) SSEND(mode string, buf []byte, dest, typ, lenblk, stride, nblks int) int {
	l, code := strided(lenblk, stride, nblks, false)
	if code != NoError {
		return p.fail(code)
	}
	return p.sendLayout(mode, buf, l, dest, typ)
}

// SRECV receives a message and scatters it into nblks blocks of lenblk
// bytes of buf whose starts lie stride bytes apart (MPI_SRECV). Its
// capacity is lenblk*nblks bytes: a longer message is truncated to it,
// and the whole length is reported, as by CRECV; a shorter one fills the
// first blocks in order, the last perhaps in part. The blocks must not
// overlap.
func (p *Proc) SRECV(mode string, buf []byte, source, typ, lenblk, stride, nblks int) int {
	l, code := strided(lenblk, stride, nblks, true)
	if code != NoError {
		return p.fail(code)
	}
	return p.recvLayout(mode, buf, l, source, typ)
}

// GSEND sends the message gathered from the nblks blocks of buf that
// nlist and ilist describe, block i being the nlist[i] bytes at ilist[i]
// (MPI_GSEND), as CSEND sends a contiguous one, and returns the sum of
// their lengths (or the message ID).
func (p *Proc) GSEND(mode string, buf []byte, dest, typ int, nlist, ilist []int, nblks int) int {
	l, code := blocks(nlist, ilist, nblks, false)
	if code != NoError {
		return p.fail(code)
	}
	return p.sendLayout(mode, buf, l, dest, typ)
}

// GRECV receives a message and scatters it into the nblks blocks of buf
// that nlist and ilist describe (MPI_GRECV). Its capacity is the sum of
// their lengths: a longer message is truncated to it, a shorter one
// fills the first blocks in order, as for SRECV. The blocks must not
// overlap.
func (p *Proc) GRECV(mode string, buf []byte, source, typ int, nlist, ilist []int, nblks int) int {
	l, code := blocks(nlist, ilist, nblks, true)
	if code != NoError {
		return p.fail(code)
	}
	return p.recvLayout(mode, buf, l, source, typ)
}

// sendLayout is SSEND and GSEND once their layout is built.
func (p *Proc) sendLayout(mode string, buf []byte, l mpi.Layout, dest, typ int) int {
	if l.Extent() > len(buf) {
		return p.fail(ErrBufSize)
	}
	if dest < 0 {
		return p.fail(p.pidErr())
	}
	if typ < 0 {
		return p.fail(ErrType)
	}
	switch mode {
	case Blocking:
		if err := p.cc.reg.SendLayout(buf, l, dest, typ); err != nil {
			return p.failed(err)
		}
		return p.ok(l.Size())
	case Nonblocking:
		r, err := p.cc.reg.IsendLayout(buf, l, dest, typ)
		return p.started(r, err, false, l.Size())
	case Synchronized:
		return p.synced(p.cc.syn.SsendLayout(buf, l, dest, typ), dest, l.Size())
	}
	return p.fail(ErrMode)
}

// recvLayout is SRECV and GRECV once their layout is built.
func (p *Proc) recvLayout(mode string, buf []byte, l mpi.Layout, source, typ int) int {
	if l.Extent() > len(buf) {
		return p.fail(ErrBufSize)
	}
	if source < -1 {
		return p.fail(p.pidErr())
	}
	if typ < -1 {
		return p.fail(ErrType)
	}
	switch mode {
	case Blocking:
		st, err := p.cc.reg.RecvLayout(buf, l, source, typ)
		return p.received(st, err)
	case Nonblocking:
		r, err := p.cc.reg.IrecvLayout(buf, l, source, typ)
		return p.started(r, err, true, 0)
	case Synchronized:
		st, err := p.cc.syn.RecvLayout(buf, l, source, typ)
		return p.acked(st, err)
	}
	return p.fail(ErrMode)
}

// received records the message a receive returned with st and err as
// the one INFOL, INFOS and INFOT describe, and returns its whole length:
// a truncated message's too, which the seed's receives report.
func (p *Proc) received(st mpi.Status, err error) int {
	n := st.Count
	if err != nil {
		whole, ok := mpi.TruncatedLength(err)
		if !ok {
			return p.failed(err)
		}
		n = whole
	}
	p.length, p.source, p.typ = n, st.Source, st.Tag
	return p.ok(n)
}

// acked is received for a synchronized receive: it then tells the
// sender its message is stored, on the group's communicator, where
// nothing else is sent from one process to another.
func (p *Proc) acked(st mpi.Status, err error) int {
	n := p.received(st, err)
	if n < 0 {
		return n
	}
	if err := p.g.all.comm.Send(nil, st.Source, ackTag); err != nil {
		return p.failed(err)
	}
	return n
}

// synced finishes a synchronized send of n bytes to dest whose message
// went with err: it waits for dest's acknowledgment that the message is
// stored. A process has one synchronized send at a time, so the next
// acknowledgment from dest is this message's.
func (p *Proc) synced(err error, dest, n int) int {
	if err != nil {
		return p.failed(err)
	}
	if _, err := p.g.all.comm.Recv(nil, dest, ackTag); err != nil {
		return p.failed(err)
	}
	return p.ok(n)
}
