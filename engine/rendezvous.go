package engine

import (
	"fmt"
	"unsafe"
)

// The rendezvous protocol, packet by packet. An rts announces a message
// whose data stays in the sender's buffer. The receiver, once it has
// matched it, reads the data itself where the transport can, splits the
// copy with the sender (ctw, answered by written), or asks for it with cts
// and takes it in data packets or over the network's bulk lane; fin tells
// the sender its buffer is free.

// onRTS takes an announced message from src: matched to a posted receive,
// the transfer starts; unmatched, it is queued unexpected.
func (ep *Endpoint) onRTS(src int, pkt []byte) {
	ctx, tag := u32(pkt, rtsCtx), int32(u32(pkt, rtsTag))
	length, sreq, addr := u64(pkt, rtsLen), u64(pkt, rtsSreq), u64(pkt, rtsAddr)
	if length > 1<<62 {
		ep.malformed.Inc()
		return
	}
	sync := pkt[offFlags]&flagSync != 0
	if r := ep.m.matchPosted(ctx, int32(src), tag); r != nil {
		ep.posted.Sub(1)
		r.status.Source, r.status.Tag = src, int(tag)
		ep.startRendezvous(r, src, int(length), sreq, addr, sync)
		return
	}
	u := ep.unexpected(ctx, src, tag)
	u.kind, u.sync, u.sreq, u.addr, u.length = uqRTS, sync, sreq, addr, int(length)
}

// startRendezvous moves a matched rendezvous message into r: directly
// from the sender's buffer if the transport can, else by asking for data.
func (ep *Endpoint) startRendezvous(r *Request, src, length int, sreq, addr uint64, sync bool) {
	r.state = stReceiving
	r.total, r.got = length, 0
	n := min(length, len(r.buf))
	p := &ep.peers[src]
	queued := ep.stillReceiving(src, p.rndv)
	p.rndv = r.id
	if ep.reader != nil {
		if at := ep.reader.splitAt(src, n); at < n && (queued || splitLone.Get()) {
			r.rreq, r.saddr = sreq, addr
			ep.startSplit(r, src, n, at)
			return
		}
		if err := ep.reader.readRemote(src, sreq, addr, r.buf[:n]); err == nil {
			r.sent = n
			ep.queueCtl(src, ctlPacket{typ: pktFin, a: sreq})
			ep.finishRecv(r, length)
			return
		} else if rndvMode.Get() == "cma" {
			ep.queueCtl(src, ctlPacket{typ: pktFin, a: sreq})
			ep.complete(r, fmt.Errorf("%w: reading rank %d's buffer: %v", ErrPeerDead, src, err))
			return
		}
	}
	ep.pipelined.Inc()
	r.sent = 0
	var flags byte
	if ep.net != nil && ep.net.bulkRecv(src, r, length) {
		flags = flagBulk
	}
	ep.queueCtl(src, ctlPacket{typ: pktCTS, flags: flags, a: sreq, b: r.id})
}

// stillReceiving reports whether the rendezvous receive id from src is
// still receiving: then a message that comes after it is split, while a
// lone one streams, which has the lower latency (engine_rndv_split_lone).
func (ep *Endpoint) stillReceiving(src int, id uint64) bool {
	q := ep.reqs.lookup(id)
	return q != nil && q.kind == kindRecv && q.state == stReceiving && q.status.Source == src
}

// startSplit copies a matched rendezvous message, of which n bytes fit
// in r, in two parts at once: it asks the sender to write the bytes from
// at on (ctw), then reads those before at itself. r completes when the
// sender's written comes.
func (ep *Endpoint) startSplit(r *Request, src, n, at int) {
	ep.queueCtl(src, ctlPacket{typ: pktCTW, a: r.rreq, b: r.id, c: uint64(at), d: uint64(n - at),
		e: uint64(uintptr(unsafe.Pointer(&r.buf[at])))})
	if len(ep.woken) > 0 {
		ep.wake() // now, so that the sender copies while this rank does
	}
	r.splitAt = at
	if err := ep.reader.readPart(src, r.saddr, r.buf[:at]); err != nil {
		r.split = splitDropped
		ep.streamRest(r, src)
		return
	}
	r.split = splitWaiting
}

// onWritten completes a split receive once the sender has written its
// part, or gets that part another way if the sender could not.
func (ep *Endpoint) onWritten(src int, pkt []byte) {
	r := ep.reqs.lookup(u64(pkt, writtenRreq))
	if r == nil || r.kind != kindRecv || r.state != stReceiving || r.status.Source != src || r.split == splitNone {
		ep.malformed.Inc()
		return
	}
	if r.split == splitDropped {
		r.split = splitNone
		return
	}
	r.split = splitNone
	n := min(r.total, len(r.buf))
	if pkt[offFlags] != flagWritten {
		if err := ep.reader.readPart(src, r.saddr+uint64(r.splitAt), r.buf[r.splitAt:n]); err != nil {
			ep.streamRest(r, src)
			return
		}
	}
	ep.split.Inc()
	r.sent = n
	ep.queueCtl(src, ctlPacket{typ: pktFin, a: r.rreq})
	ep.finishRecv(r, r.total)
}

// streamRest gives up copying r across and asks the sender, still waiting
// for fin, to stream the whole message through the rings. What either
// side copied already is overwritten with the same bytes.
func (ep *Endpoint) streamRest(r *Request, src int) {
	ep.pipelined.Inc()
	r.got, r.sent = 0, 0
	ep.queueCtl(src, ctlPacket{typ: pktCTS, a: r.rreq, b: r.id})
}

// onCTW writes the part of a rendezvous message its receiver asked for
// into the receiver's buffer and answers written, saying whether it could.
func (ep *Endpoint) onCTW(src int, pkt []byte) {
	s := ep.sendRequest(src, u64(pkt, ctwSreq), stAwaitFin)
	if s == nil {
		return
	}
	rreq, off, n, addr := u64(pkt, ctwRreq), u64(pkt, ctwOff), u64(pkt, ctwLen), u64(pkt, ctwAddr)
	var ok byte
	switch {
	case off > uint64(len(s.buf)) || n > uint64(len(s.buf))-off:
		ep.malformed.Inc() // answered all the same: the receiver reads it
	case ep.reader != nil && ep.reader.writeRemote(src, addr, s.buf[off:off+n]) == nil:
		ok = 1
	}
	ep.queueCtl(src, ctlPacket{typ: pktWritten, flags: ok, a: rreq, b: n})
}

// onData copies a data packet into the rendezvous receive it names, and
// completes the receive with its last byte; a packet naming no such
// receive, or past its end, is malformed.
func (ep *Endpoint) onData(src int, pkt []byte) {
	r := ep.reqs.lookup(u64(pkt, dataRreq))
	off := u64(pkt, dataOff)
	payload := pkt[dataHeader:]
	if r == nil || r.kind != kindRecv || r.state != stReceiving || r.status.Source != src || r.uq != nil ||
		off > uint64(r.total) || uint64(len(payload)) > uint64(r.total)-off {
		ep.malformed.Inc()
		return
	}
	length := r.total
	if int(off) < len(r.buf) {
		copy(r.buf[off:], payload)
	}
	r.got += len(payload)
	if r.got == length {
		if r.bulk {
			ep.net.bulkDone(src, r) // the sender could not reach the lane
		}
		r.sent = min(length, len(r.buf))
		ep.finishRecv(r, length)
	}
}
