package mpi

import "github.com/tachyon-hpc/tachyon/engine"

// SendLayout sends the bytes of buf that l describes, in order, as one
// message (the 1993 MPI1 proposal's MPI_SSEND and MPI_GSEND; a send with a
// derived datatype). The receiver may receive it contiguously or with a
// layout of its own. SsendLayout, RsendLayout, BsendLayout and the
// nonblocking IsendLayout, IssendLayout, IrsendLayout and IbsendLayout do
// the same in the other modes (GSEND in every mode).
func (c *Comm) SendLayout(buf []byte, l Layout, dest, tag int) error {
	return c.sendLayoutModeEntry(OpSendLayout, buf, l, dest, tag)
}

// SsendLayout is SendLayout in synchronous mode (Ssend).
func (c *Comm) SsendLayout(buf []byte, l Layout, dest, tag int) error {
	return c.sendLayoutModeEntry(OpSsendLayout, buf, l, dest, tag)
}

// RsendLayout is SendLayout in ready mode (Rsend).
func (c *Comm) RsendLayout(buf []byte, l Layout, dest, tag int) error {
	return c.sendLayoutModeEntry(OpRsendLayout, buf, l, dest, tag)
}

// BsendLayout is SendLayout in buffered mode (Bsend).
func (c *Comm) BsendLayout(buf []byte, l Layout, dest, tag int) error {
	return c.sendLayoutModeEntry(OpBsendLayout, buf, l, dest, tag)
}

// IsendLayout starts SendLayout (Isend). As for Isend, buf must not
// change until the request completes.
func (c *Comm) IsendLayout(buf []byte, l Layout, dest, tag int) (*Request, error) {
	return c.isendLayoutModeEntry(OpIsendLayout, buf, l, dest, tag)
}

// IssendLayout starts SsendLayout (Issend).
func (c *Comm) IssendLayout(buf []byte, l Layout, dest, tag int) (*Request, error) {
	return c.isendLayoutModeEntry(OpIssendLayout, buf, l, dest, tag)
}

// IrsendLayout starts RsendLayout (Irsend).
func (c *Comm) IrsendLayout(buf []byte, l Layout, dest, tag int) (*Request, error) {
	return c.isendLayoutModeEntry(OpIrsendLayout, buf, l, dest, tag)
}

// IbsendLayout starts BsendLayout (Ibsend).
func (c *Comm) IbsendLayout(buf []byte, l Layout, dest, tag int) (*Request, error) {
	return c.isendLayoutModeEntry(OpIbsendLayout, buf, l, dest, tag)
}

// sendLayoutModeEntry is the entry of the blocking layout send op: through
// the interceptors, if any, else to pSendLayoutMode.
func (c *Comm) sendLayoutModeEntry(op Op, buf []byte, l Layout, dest, tag int) error {
	if intercepted() {
		return layoutCall(op, c, buf, l, dest, tag).run()
	}
	return c.pSendLayoutMode(op, buf, l, dest, tag)
}

// pSendLayoutMode sends the message l makes of buf in op's mode, without
// interception.
func (c *Comm) pSendLayoutMode(op Op, buf []byte, l Layout, dest, tag int) error {
	m, err := c.layoutMessage(op.String(), buf, l)
	if err != nil {
		return err
	}
	return c.pSendMode(op, m, dest, tag)
}

// isendLayoutModeEntry is the entry of the nonblocking layout send op:
// through the interceptors, if any, else to pIsendLayoutMode.
func (c *Comm) isendLayoutModeEntry(op Op, buf []byte, l Layout, dest, tag int) (*Request, error) {
	if intercepted() {
		return layoutCall(op, c, buf, l, dest, tag).runRequest()
	}
	return c.pIsendLayoutMode(op, buf, l, dest, tag)
}

// pIsendLayoutMode starts sending the message l makes of buf in op's mode,
// without interception.
func (c *Comm) pIsendLayoutMode(op Op, buf []byte, l Layout, dest, tag int) (*Request, error) {
	m, err := c.layoutMessage(op.String(), buf, l)
	if err != nil {
		return nil, err
	}
	return c.pIsendMode(op, m, dest, tag)
}

// layoutMessage returns the message l makes of buf: buf's first bytes
// where l is a contiguous prefix, else l's bytes packed into a buffer of
// their own.
func (c *Comm) layoutMessage(op string, buf []byte, l Layout) ([]byte, error) {
	if err := c.check(op); err != nil {
		return nil, err
	}
	if isContiguousPrefix(l) {
		if len(buf) < l.Extent() {
			return nil, c.fail(errorf(ErrBuffer, op, "buffer of %d bytes is shorter than the layout's extent %d", len(buf), l.Extent()))
		}
		return buf[:l.Size()], nil
	}
	packed := make([]byte, l.Size())
	if _, err := l.pack(packed, buf); err != nil {
		return nil, c.fail(err)
	}
	return packed, nil
}

// RecvLayout receives a message and scatters it into the bytes of buf that l
// describes (the 1993 MPI1 proposal's MPI_SRECV and MPI_GRECV). A message
// longer than l.Size fills the layout and returns ErrTruncate; Status.Count
// says how many bytes were stored.
func (c *Comm) RecvLayout(buf []byte, l Layout, source, tag int) (Status, error) {
	if intercepted() {
		return layoutCall(OpRecvLayout, c, buf, l, source, tag).runStatus()
	}
	return c.pRecvLayout(buf, l, source, tag)
}

// pRecvLayout is RecvLayout without interception.
func (c *Comm) pRecvLayout(buf []byte, l Layout, source, tag int) (Status, error) {
	if err := c.checkRecvLayout("RecvLayout", buf, l); err != nil {
		return Status{}, err
	}
	if isContiguousPrefix(l) {
		return c.pRecv(buf[:l.Size()], source, tag)
	}
	packed := make([]byte, l.Size())
	st, err := c.pRecv(packed, source, tag)
	if err != nil && ErrorClass(err) != ErrTruncate {
		return st, err
	}
	if _, uerr := l.unpack(buf, packed[:st.Count]); uerr != nil {
		return st, c.fail(uerr)
	}
	return st, err
}

// IrecvLayout starts RecvLayout (MPI_IRECV with a layout, GRECV's
// nonblocking form): the message lands in a buffer of its own, and
// whatever completes the request (Wait, Test, Waitall and the rest)
// scatters it into buf first. buf must not be read until then.
func (c *Comm) IrecvLayout(buf []byte, l Layout, source, tag int) (*Request, error) {
	if intercepted() {
		return layoutCall(OpIrecvLayout, c, buf, l, source, tag).runRequest()
	}
	return c.pIrecvLayout(buf, l, source, tag)
}

// pIrecvLayout is IrecvLayout without interception.
func (c *Comm) pIrecvLayout(buf []byte, l Layout, source, tag int) (*Request, error) {
	if err := c.checkRecvLayout("IrecvLayout", buf, l); err != nil {
		return nil, err
	}
	if isContiguousPrefix(l) {
		return c.pIrecv(buf[:l.Size()], source, tag)
	}
	packed := make([]byte, l.Size())
	er, st, err := c.irecvEngine(packed, source, tag)
	r, err := c.request(opIrecv, er, engine.Sent{}, st, err)
	if r != nil && er != nil {
		r.x = &requestExtra{scatter: &layoutRecv{buf: buf, l: l, packed: packed}}
	}
	return r, err
}

// layoutRecv is what a nonblocking layout receive scatters on completion.
type layoutRecv struct {
	buf    []byte
	l      Layout
	packed []byte
}

// checkRecvLayout checks the arguments of a layout receive for op.
func (c *Comm) checkRecvLayout(op string, buf []byte, l Layout) error {
	if err := c.check(op); err != nil {
		return err
	}
	if len(buf) < l.Extent() {
		return c.fail(errorf(ErrBuffer, op, "buffer of %d bytes is shorter than the layout's extent %d", len(buf), l.Extent()))
	}
	if l.Overlaps() {
		return c.fail(errorf(ErrArg, op, "a receive layout's blocks must not overlap"))
	}
	return nil
}

// isContiguousPrefix reports whether l is the bytes [0, Size) in order,
// so a message can go straight from or to the buffer.
func isContiguousPrefix(l Layout) bool {
	if l.offs == nil { // strided
		return l.n <= 1 || l.stride == l.blen
	}
	return len(l.offs) == 0 || len(l.offs) == 1 && l.offs[0] == 0
}
