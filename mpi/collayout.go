package mpi

// The collectives on bytes that a Layout describes, for data that is not
// a slice of numbers (the 1993 MPI1 proposal's strided and general
// gather/scatter, as the point-to-point Layout forms have them). Each packs what a rank
// sends into one contiguous message with its layout, runs the collective
// on the packed bytes (interceptors see that collective: a Bcast of
// Size() bytes), and unpacks what it receives with its own; the two sides'
// layouts may differ as long as their sizes agree, as MPI's datatypes of
// one type signature. A layout that is the start of its buffer is used in
// place; any other costs a packed copy, allocated per call. On an
// intercommunicator the rooted ones take Root and ProcNull as the typed
// forms do: the root's buffer and layout hold the remote group's blocks,
// and a ProcNull rank's are not looked at.

// layoutSide is one side of a layout collective: the packed bytes (never
// nil, which would ask the collective for in place), and how to unpack
// them into the user's buffer.
type layoutSide struct {
	buf    []byte
	l      Layout
	packed []byte
	direct bool // packed is buf's start: nothing to copy
}

// sendSide packs buf with l for sending.
func (c *Comm) sendSide(op string, buf []byte, l Layout) (layoutSide, error) {
	s := layoutSide{buf: buf, l: l, packed: []byte{}}
	if l.err != nil {
		return s, c.fail(l.err)
	}
	if len(buf) < l.Extent() {
		return s, c.fail(errorf(ErrBuffer, op, "buffer of %d bytes is shorter than the layout's extent of %d", len(buf), l.Extent()))
	}
	if isContiguousPrefix(l) {
		s.direct = true
		if l.Size() > 0 {
			s.packed = buf[:l.Size():l.Size()]
		}
		return s, nil
	}
	s.packed = make([]byte, l.Size())
	if _, err := l.pack(s.packed, buf); err != nil {
		return s, c.fail(err)
	}
	return s, nil
}

// recvSide makes room to receive l.Size() bytes into buf with l.
func (c *Comm) recvSide(op string, buf []byte, l Layout) (layoutSide, error) {
	s := layoutSide{buf: buf, l: l, packed: []byte{}}
	switch {
	case l.err != nil:
		return s, c.fail(l.err)
	case l.Overlaps():
		return s, c.fail(errorf(ErrArg, op, "the layout's blocks overlap; receiving into it is erroneous"))
	case len(buf) < l.Extent():
		return s, c.fail(errorf(ErrBuffer, op, "buffer of %d bytes is shorter than the layout's extent of %d", len(buf), l.Extent()))
	}
	if isContiguousPrefix(l) {
		s.direct = true
		if l.Size() > 0 {
			s.packed = buf[:l.Size():l.Size()]
		}
		return s, nil
	}
	s.packed = make([]byte, l.Size())
	return s, nil
}

// unpack scatters what s received into its buffer.
func (c *Comm) unpack(s layoutSide) error {
	if s.direct {
		return nil
	}
	_, err := s.l.unpack(s.buf, s.packed)
	return c.fail(err)
}

// BcastLayout is Bcast of the bytes of buf that l describes: root sends
// them, and every other rank receives them into the bytes of its buf that
// its l describes.
func (c *Comm) BcastLayout(buf []byte, l Layout, root int) error {
	const op = "BcastLayout"
	if err := c.check(op); err != nil {
		return err
	}
	if !c.isRoot(root) && !c.isLeaf(root) { // an intercommunicator's ProcNull
		return Bcast(c, []byte{}, root)
	}
	side := c.recvSide
	if c.isRoot(root) {
		side = c.sendSide
	}
	s, err := side(op, buf, l)
	if err != nil {
		return err
	}
	if err := Bcast(c, s.packed, root); err != nil || c.isRoot(root) {
		return err
	}
	return c.unpack(s)
}

// GatherLayout is Gather with layouts: each rank sends the bytes of send
// that sl describes, and root unpacks the ranks' messages, one after the
// other in rank order, into the bytes of recv that rl describes (rl.Size()
// is Size() times each rank's sl.Size()). recv and rl matter at root
// alone.
func (c *Comm) GatherLayout(send []byte, sl Layout, recv []byte, rl Layout, root int) error {
	const op = "GatherLayout"
	if err := c.check(op); err != nil {
		return err
	}
	s, r := layoutSide{packed: []byte{}}, layoutSide{packed: []byte{}}
	var err error
	if c.isLeaf(root) {
		if s, err = c.sendSide(op, send, sl); err != nil {
			return err
		}
	}
	if c.isRoot(root) {
		if r, err = c.recvSide(op, recv, rl); err != nil {
			return err
		}
	}
	if err := Gather(c, s.packed, r.packed, root); err != nil || !c.isRoot(root) {
		return err
	}
	return c.unpack(r)
}

// ScatterLayout is Scatter with layouts: root packs the bytes of send
// that sl describes, Size() blocks of each rank's rl.Size() bytes in rank
// order, and rank i unpacks block i into the bytes of its recv that rl
// describes. send and sl matter at root alone.
func (c *Comm) ScatterLayout(send []byte, sl Layout, recv []byte, rl Layout, root int) error {
	const op = "ScatterLayout"
	if err := c.check(op); err != nil {
		return err
	}
	s, r := layoutSide{packed: []byte{}}, layoutSide{packed: []byte{}}
	var err error
	if c.isLeaf(root) {
		if r, err = c.recvSide(op, recv, rl); err != nil {
			return err
		}
	}
	if c.isRoot(root) {
		if s, err = c.sendSide(op, send, sl); err != nil {
			return err
		}
	}
	if err := Scatter(c, s.packed, r.packed, root); err != nil || !c.isLeaf(root) {
		return err
	}
	return c.unpack(r)
}

// AllgatherLayout is Allgather with layouts: every rank sends the bytes
// of send that sl describes and unpacks the ranks' messages, in rank
// order, into the bytes of recv that rl describes.
func (c *Comm) AllgatherLayout(send []byte, sl Layout, recv []byte, rl Layout) error {
	return c.bothSides("AllgatherLayout", send, sl, recv, rl, Allgather[byte])
}

// AlltoallLayout is Alltoall with layouts: the bytes of send that sl
// describes are Size() equal blocks, block i for rank i, and the blocks
// received, in rank order, are unpacked into the bytes of recv that rl
// describes.
func (c *Comm) AlltoallLayout(send []byte, sl Layout, recv []byte, rl Layout) error {
	return c.bothSides("AlltoallLayout", send, sl, recv, rl, Alltoall[byte])
}

// bothSides runs a collective in which every rank sends and receives:
// it packs the bytes of send that sl describes, runs coll on the packed
// messages and unpacks what came into the bytes of recv that rl
// describes.
func (c *Comm) bothSides(op string, send []byte, sl Layout, recv []byte, rl Layout, coll func(*Comm, []byte, []byte) error) error {
	if err := c.check(op); err != nil {
		return err
	}
	s, err := c.sendSide(op, send, sl)
	if err != nil {
		return err
	}
	r, err := c.recvSide(op, recv, rl)
	if err != nil {
		return err
	}
	if err := coll(c, s.packed, r.packed); err != nil {
		return err
	}
	return c.unpack(r)
}
