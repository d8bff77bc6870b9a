package engine

// Cancelling a send, the packets: cancel asks the receiver to withdraw a
// message it has not matched (CancelSent, send.go); cancelled answers.

// onCancel withdraws the unexpected message src's cancel names, if it is
// still unmatched and whole, and answers whether it did.
func (ep *Endpoint) onCancel(src int, pkt []byte) {
	ctx, sreq, tag, sid := u32(pkt, cancelCtx), u64(pkt, cancelSreq), int32(u32(pkt, cancelTag)), u32(pkt, cancelID)
	var ok byte
	if l := ep.m.uq[key{ctx, int32(src), tag}]; l != nil {
		for u := l.head; u != nil; u = u.links[byExact].next {
			id := sreq
			if u.short {
				id = uint64(sid)
			}
			if u.sreq == id && id != 0 && (u.kind == uqRTS || u.got == u.length) && u.waiter == nil {
				ep.dropUnexpected(u)
				ok = flagWithdrawn
				break
			}
		}
	}
	ep.queueCtl(src, ctlPacket{typ: pktCancelled, flags: ok, a: sreq})
}

// onCancelled takes the answer to a cancel: the send completes cancelled,
// or goes on as if no cancel had been asked.
func (ep *Endpoint) onCancelled(src int, pkt []byte) {
	s := ep.reqs.lookup(u64(pkt, cancelledSreq))
	if s == nil || s.kind != kindSend || s.peer != src || !s.cancelling {
		ep.malformed.Inc()
		return
	}
	s.cancelling = false
	switch {
	case pkt[offFlags] == flagWithdrawn && s.state != stDone:
		s.status.Cancelled = true
		ep.cancelled.Inc()
		ep.complete(s, nil)
	case s.state == stDone:
		if s.freed {
			ep.reqs.put(s)
		}
	case s.sent == len(s.buf) && s.mode != Synchronous:
		// An eager send the receiver had already matched: it stands.
		ep.complete(s, nil)
	}
}
