package mpi

import (
	"context"
	"math/bits"
	"sync"
	"sync/atomic"
)

// Whole messages. RecvMessage receives a message of any size: a matched
// probe (Mprobe) learns its size and takes it, a buffer of that size comes
// from the package's pool, and the message's receive fills it. The caller
// gives the buffer back with Received.Release.
//
// The pool keeps a sync.Pool of buffers per power of two from 64 bytes
// to 64 MiB: a message gets a buffer of its class at once, whatever sizes
// came before, and one Get and one Put of the class's pool are all it
// costs (no allocation once the class's pool holds a buffer; the garbage
// collector empties the pools of what stays unused across two cycles).
// A message over 64 MiB gets a buffer of its own, which Release leaves to
// the garbage collector. github.com/valyala/bytebufferpool, the usual
// choice, does not fit: its one pool hands any buffer to any Get, so a
// mix of sizes reallocates, and it drops buffers above the sizes that
// make up 95% of its calls, so the large messages of a mix allocate every
// time; it also counts each Put on counters shared by every core.
// docs/mpi.md has the benchmark.

// Received is a whole message RecvMessage received: its status and its
// bytes, in a buffer from the package's pool. Release gives the buffer
// back. A Received is a value: copies share the buffer, and the first
// Release of any of them releases it.
type Received struct {
	Status        // Count is len(Data)
	Data   []byte // the message, valid until Release

	buf *msgBuf // nil: nothing to give back (an empty message, ProcNull, released)
	gen uint64  // buf's generation when it was lent: Release gives it back once
}

// Release gives r's buffer back to the pool and sets r.Data to nil: the
// bytes must not be used after (copy what is kept). A second Release, of
// r or of a copy of r, does nothing, so that the buffer, lent again by
// then maybe, is never given back twice; nor does one of the zero
// Received.
func (r *Received) Release() {
	b := r.buf
	r.Data, r.buf = nil, nil
	if b != nil && b.gen.CompareAndSwap(r.gen, r.gen+1) {
		b.put()
	}
}

// msgBuf is a buffer of the pool. Its generation counts its returns: a
// Received lent it at generation g, and only the Release that moves it
// from g to g+1 puts it back.
type msgBuf struct {
	b     []byte // the class's size (a buffer of its own: the message's)
	gen   atomic.Uint64
	class int8 // the index in msgPools, -1 for a buffer of its own
}

// Classes of the pool: 64 B to 64 MiB, by powers of two.
const (
	minMsgClass = 6
	maxMsgClass = 26
)

var msgPools [maxMsgClass - minMsgClass + 1]sync.Pool

// msgClass returns the index in msgPools of a buffer for n bytes, -1 if
// n is over the largest class.
func msgClass(n int) int {
	k := minMsgClass
	if n > 1<<minMsgClass {
		k = bits.Len(uint(n - 1))
	}
	if k > maxMsgClass {
		return -1
	}
	return k - minMsgClass
}

// lend returns a Received whose Data is n bytes of a buffer of the pool;
// for n 0, none.
func lend(n int) Received {
	if n == 0 {
		return Received{}
	}
	k := msgClass(n)
	var b *msgBuf
	if k < 0 {
		b = &msgBuf{b: make([]byte, n), class: -1}
	} else if v := msgPools[k].Get(); v != nil {
		b = v.(*msgBuf)
	} else {
		b = &msgBuf{b: make([]byte, 1<<(k+minMsgClass)), class: int8(k)}
	}
	return Received{Data: b.b[:n], buf: b, gen: b.gen.Load()}
}

// put gives b back to its class's pool.
func (b *msgBuf) put() {
	if b.class >= 0 {
		msgPools[b.class].Put(b)
	}
}

// RecvMessage receives a message from source (or AnySource) with tag (or
// AnyTag), whatever its size, and returns it in a buffer from the
// package's pool, which the caller gives back with Release. It is
// Mprobe, a buffer of the message's size, and the Message's Recv, in one
// call; once warm, it allocates nothing.
//
// ctx bounds the wait for a message: if ctx ends before one can be
// received, RecvMessage returns an ErrCanceled error (which errors.Is also
// matches to ctx's error) and has taken no message. Once a message is
// matched its receive completes, the context ended or not: a message
// whose data is on its way is never dropped half received. From ProcNull
// it returns at once the status of a receive from ProcNull and no data.
// Interceptors see it as OpRecvMessage, with Call.Ctx set.
func (c *Comm) RecvMessage(ctx context.Context, source, tag int) (Received, error) {
	if ctx == nil {
		return Received{}, c.fail(nilContext("RecvMessage"))
	}
	if intercepted() {
		call := peerCall(OpRecvMessage, c, nil, source, tag)
		call.Ctx = ctx
		err := intercept(call)
		rv := call.received
		rv.Status = call.Result.Status
		call.release()
		return rv, err
	}
	return c.pRecvMessage(ctx, source, tag)
}

// pRecvMessage is RecvMessage without interception.
func (c *Comm) pRecvMessage(ctx context.Context, source, tag int) (Received, error) {
	const op = "RecvMessage"
	src, null, err := c.recvArgs(op, source, tag)
	if err != nil {
		return Received{}, err
	}
	if null {
		return Received{Status: procNullStatus}, nil
	}
	em, est, err := c.p.ep.MprobeContext(ctx, src, tag, c.ctx)
	if err != nil {
		return Received{}, c.fail(contextErr(op, c, ctx, err))
	}
	rv := lend(est.Count)
	st, err := c.p.ep.Mrecv(em, rv.Data)
	if err != nil {
		rv.Release()
		return Received{}, c.fail(c.engineErr(op, err))
	}
	rv.Status = c.status(st)
	return rv, nil
}
