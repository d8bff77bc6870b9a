package mpi

// SendLayout sends the bytes of buf that l describes, in order, as one
// message (seed 003's MPI_SSEND and MPI_GSEND; a send with a derived
// datatype). The receiver may receive it contiguously or with a layout of
// its own.
func (c *Comm) SendLayout(buf []byte, l Layout, dest, tag int) error {
	if err := c.check("SendLayout"); err != nil {
		return err
	}
	if isContiguousPrefix(l) {
		if len(buf) < l.Extent() {
			return c.fail(errorf(ErrBuffer, "SendLayout", "buffer of %d bytes is shorter than the layout's extent %d", len(buf), l.Extent()))
		}
		return c.Send(buf[:l.Size()], dest, tag)
	}
	packed := make([]byte, l.Size())
	if _, err := l.pack(packed, buf); err != nil {
		return c.fail(err)
	}
	return c.Send(packed, dest, tag)
}

// RecvLayout receives a message and scatters it into the bytes of buf
// that l describes (seed 003's MPI_SRECV and MPI_GRECV). A message longer
// than l.Size fills the layout and returns ErrTruncate; Status.Count says
// how many bytes were stored.
func (c *Comm) RecvLayout(buf []byte, l Layout, source, tag int) (Status, error) {
	if err := c.check("RecvLayout"); err != nil {
		return Status{}, err
	}
	if len(buf) < l.Extent() {
		return Status{}, c.fail(errorf(ErrBuffer, "RecvLayout", "buffer of %d bytes is shorter than the layout's extent %d", len(buf), l.Extent()))
	}
	if l.Overlaps() {
		return Status{}, c.fail(errorf(ErrArg, "RecvLayout", "a receive layout's blocks must not overlap"))
	}
	if isContiguousPrefix(l) {
		return c.Recv(buf[:l.Size()], source, tag)
	}
	packed := make([]byte, l.Size())
	st, err := c.Recv(packed, source, tag)
	if err != nil && ErrorClass(err) != ErrTruncate {
		return st, err
	}
	if _, uerr := l.unpack(buf, packed[:st.Count]); uerr != nil {
		return st, c.fail(uerr)
	}
	return st, err
}

// isContiguousPrefix reports whether l is the bytes [0, Size) in order,
// so a message can go straight from or to the buffer.
func isContiguousPrefix(l Layout) bool {
	if l.offs == nil { // strided
		return l.n <= 1 || l.stride == l.blen
	}
	return len(l.offs) == 0 || len(l.offs) == 1 && l.offs[0] == 0
}
