package engine

import (
	"context"
	"fmt"
	"math/bits"
	"sort"
)

// bufPool recycles the buffers that hold unexpected eager messages, by
// power-of-two size class, so that steady traffic allocates nothing.
type bufPool struct {
	classes [40][][]byte
}

// poolKeep bounds how many free buffers of one class the pool keeps.
const poolKeep = 64

func sizeClass(n int) int {
	if n <= 64 {
		return 6
	}
	return bits.Len(uint(n - 1))
}

func (bp *bufPool) get(n int) []byte {
	c := sizeClass(n)
	if l := bp.classes[c]; len(l) > 0 {
		b := l[len(l)-1]
		bp.classes[c] = l[:len(l)-1]
		return b[:n]
	}
	return make([]byte, n, 1<<c)
}

func (bp *bufPool) put(b []byte) {
	if b == nil {
		return
	}
	c := sizeClass(cap(b))
	if 1<<c != cap(b) || len(bp.classes[c]) >= poolKeep {
		return
	}
	bp.classes[c] = append(bp.classes[c], b[:0])
}

// attachedBuffer is the user's buffer for buffered sends (MPI_BUFFER_ATTACH):
// each buffered send copies its message into a free range of it, which is
// given back when the send completes.
type attachedBuffer struct {
	buf  []byte
	used []span // sorted by offset
}

type span struct{ off, n int }

// BsendOverhead is the bytes a buffered send takes in the attached buffer
// beyond its message (MPI_BSEND_OVERHEAD).
const BsendOverhead = 0

// take copies msg into a free range and returns the copy and a function
// that frees the range.
func (a *attachedBuffer) take(msg []byte) ([]byte, func(), error) {
	if a.buf == nil {
		return nil, nil, fmt.Errorf("%w: no buffer attached", ErrBuffer)
	}
	n := len(msg)
	off, prev := -1, 0
	for i, s := range a.used {
		if s.off-prev >= n {
			off = prev
			a.used = append(a.used, span{})
			copy(a.used[i+1:], a.used[i:])
			a.used[i] = span{off, n}
			break
		}
		prev = s.off + s.n
	}
	if off < 0 {
		if len(a.buf)-prev < n {
			return nil, nil, fmt.Errorf("%w: %d bytes needed, attached buffer of %d has no free range that large", ErrBuffer, n, len(a.buf))
		}
		off = prev
		a.used = append(a.used, span{off, n})
	}
	b := a.buf[off : off+n : off+n]
	copy(b, msg)
	return b, func() { a.free(off, n) }, nil
}

func (a *attachedBuffer) free(off, n int) {
	i := sort.Search(len(a.used), func(i int) bool { return a.used[i].off >= off })
	for ; i < len(a.used); i++ {
		if a.used[i] == (span{off, n}) {
			a.used = append(a.used[:i], a.used[i+1:]...)
			return
		}
	}
}

// BufferAttach gives the endpoint buf for buffered sends.
func (ep *Endpoint) BufferAttach(buf []byte) error {
	ep.lock()
	defer ep.unlock()
	if ep.attached.buf != nil {
		return fmt.Errorf("%w: a buffer is already attached", ErrBuffer)
	}
	if buf == nil {
		buf = []byte{}
	}
	ep.attached.buf = buf
	return nil
}

// BufferDetach waits until every buffered send has left the attached
// buffer, then returns it (MPI_BUFFER_DETACH).
func (ep *Endpoint) BufferDetach() ([]byte, error) { return ep.bufferDetach(nil, nil) }

// bufferDetach is BufferDetach, and BufferDetachContext with done the
// Done of its context cx (nil for none).
func (ep *Endpoint) bufferDetach(done <-chan struct{}, cx context.Context) ([]byte, error) {
	for {
		ep.lock()
		if ep.attached.buf == nil {
			ep.unlock()
			return nil, fmt.Errorf("%w: no buffer attached", ErrBuffer)
		}
		if len(ep.attached.used) == 0 {
			b := ep.attached.buf
			ep.attached.buf = nil
			ep.unlock()
			return b, nil
		}
		if closed(done) {
			ep.unlock()
			return nil, cx.Err()
		}
		ep.probing++ // keeps peer checks going while nothing is in flight
		ep.unlock()
		ep.prog.Progress()
		ep.lock()
		ep.probing--
		ep.unlock()
	}
}
