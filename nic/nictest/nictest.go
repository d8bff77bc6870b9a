// Package nictest drives nic links in tests and benchmarks: a windowed
// exchange that checks every byte both ways, and the two sides of a
// ping-pong, all without allocating per frame. The links may live in
// different network namespaces: once opened, a link works from any
// thread.
//
// docs/nic.md describes the links it drives and their tests.
package nictest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/tachyon-hpc/tachyon/nic"
)

// Fill writes frame seq of an exchange into b: a TypeData header whose
// Length makes the frame n bytes (at least nic.HeaderLen), then a payload
// that depends on seq and each byte's place.
func Fill(b []byte, cookie uint64, seq uint32, n int) {
	h := nic.Header{Type: nic.TypeData, Length: uint16(n - nic.HeaderLen), Cookie: cookie, Seq: seq}
	h.Put(b)
	for i := nic.HeaderLen; i < n; i++ {
		b[i] = byte(seq*31 + uint32(i))
	}
}

// Verify checks that b is frame seq as Fill wrote it with length n.
func Verify(b []byte, cookie uint64, seq uint32, n int) error {
	if len(b) != n {
		return fmt.Errorf("frame %d: %d bytes, want %d", seq, len(b), n)
	}
	h, err := nic.ParseHeader(b)
	if err != nil {
		return fmt.Errorf("frame %d: %w", seq, err)
	}
	if h.Seq != seq || h.Cookie != cookie || h.Type != nic.TypeData {
		return fmt.Errorf("frame %d: header %+v", seq, h)
	}
	for i := nic.HeaderLen; i < n; i++ {
		if b[i] != byte(seq*31+uint32(i)) {
			return fmt.Errorf("frame %d: byte %d is %#x, want %#x", seq, i, b[i], byte(seq*31+uint32(i)))
		}
	}
	return nil
}

// size is the length of frame seq of an exchange over links of MTU mtu:
// every length from the header alone to the MTU comes up.
func size(seq uint32, mtu int) int {
	return nic.HeaderLen + int(seq)%(mtu-nic.HeaderLen+1)
}

// Exchange sends n frames from a to b in windows of w frames; b checks
// each window and sends it back, and a checks what comes back, so every
// frame crosses twice and every byte is checked on both sides. A window
// stays within the links' rings, so nothing is lost for lack of room: a
// frame missing after timeout is an error that says which and gives both
// links' counters. a and b must share cookie.
func Exchange(a, b nic.Link, cookie uint64, n, w int, timeout time.Duration) error {
	pa, err := a.AddPeer(b.Card())
	if err != nil {
		return err
	}
	pb, err := b.AddPeer(a.Card())
	if err != nil {
		return err
	}
	mtu := min(a.MTU(), b.MTU())
	x := exchanger{cookie: cookie, mtu: mtu, timeout: timeout,
		fs: make([]nic.Frame, w), tx: make([]nic.TxDesc, w), rx: make([]nic.RxDesc, w), rel: make([]nic.Frame, w)}
	for seq := 0; seq < n; seq += w {
		k := min(w, n-seq)
		if err := x.send(a, pa, uint32(seq), k); err != nil {
			return fmt.Errorf("a→b: %w", err)
		}
		if err := x.recv(b, a, uint32(seq), k); err != nil {
			return fmt.Errorf("a→b: %w\n a: %+v\n b: %+v", err, a.Stats(), b.Stats())
		}
		if err := x.send(b, pb, uint32(seq), k); err != nil {
			return fmt.Errorf("b→a: %w", err)
		}
		if err := x.recv(a, b, uint32(seq), k); err != nil {
			return fmt.Errorf("b→a: %w\n a: %+v\n b: %+v", err, a.Stats(), b.Stats())
		}
	}
	return nil
}

type exchanger struct {
	cookie  uint64
	mtu     int
	timeout time.Duration
	fs      []nic.Frame
	tx      []nic.TxDesc
	rx      []nic.RxDesc
	rel     []nic.Frame
}

// send sends frames seq to seq+k-1 from l to peer.
func (x *exchanger) send(l nic.Link, peer nic.Peer, seq uint32, k int) error {
	deadline := time.Now().Add(x.timeout)
	got := 0
	for got < k {
		got += l.Alloc(x.fs[got:k])
		if got < k {
			l.Poll()
			if time.Now().After(deadline) {
				return fmt.Errorf("only %d of %d frames free after %v", got, k, x.timeout)
			}
		}
	}
	for i := range k {
		s := seq + uint32(i)
		sz := size(s, x.mtu)
		Fill(l.Bytes(x.fs[i]), x.cookie, s, sz)
		x.tx[i] = nic.TxDesc{Frame: x.fs[i], Len: uint16(sz), Peer: peer}
	}
	for sent := 0; sent < k; {
		n, err := l.Send(x.tx[sent:k])
		if err != nil {
			return err
		}
		sent += n
		if sent < k {
			l.Poll()
			if time.Now().After(deadline) {
				return fmt.Errorf("only %d of %d frames sent after %v", sent, k, x.timeout)
			}
		}
	}
	return nil
}

// recv receives frames seq to seq+k-1 on l, in order, polling the
// sender too, and checks each.
func (x *exchanger) recv(l, sender nic.Link, seq uint32, k int) error {
	deadline := time.Now().Add(x.timeout)
	want := seq
	for want < seq+uint32(k) {
		n := l.Receive(x.rx[:int(seq)+k-int(want)])
		for i := range n {
			d := &x.rx[i]
			err := Verify(d.Data, x.cookie, want, size(want, x.mtu))
			x.rel[i] = d.Frame
			if err != nil {
				return err
			}
			want++
		}
		if err := l.Release(x.rel[:n]); err != nil {
			return err
		}
		if n == 0 {
			sender.Poll()
			l.Poll()
			if time.Now().After(deadline) {
				return fmt.Errorf("frame %d (of %d to %d) missing after %v", want, seq, seq+uint32(k)-1, x.timeout)
			}
		}
	}
	return nil
}

// seqOffset is where Header.Seq sits in a frame (docs/nic.md).
const seqOffset = 28

// ErrTimeout reports a ping-pong round trip that did not come back.
var ErrTimeout = errors.New("nictest: no reply")

// Pinger is the client side of a ping-pong: RoundTrip sends one frame
// and waits for its echo. It allocates nothing per round trip.
type Pinger struct {
	l       nic.Link
	peer    nic.Peer
	cookie  uint64
	n       int
	seq     uint32
	timeout uint64 // polls before giving up
	ready   bool   // fs[0] is allocated and its header written
	fs      [1]nic.Frame
	tx      [1]nic.TxDesc
	rx      [8]nic.RxDesc
	rel     [8]nic.Frame
}

// NewPinger makes a client that sends frames of payload bytes (after the
// header) from l to peer; a round trip gives up after polls empty polls.
func NewPinger(l nic.Link, peer nic.Peer, cookie uint64, payload int, polls uint64) *Pinger {
	return &Pinger{l: l, peer: peer, cookie: cookie, n: nic.HeaderLen + payload, timeout: polls}
}

// Prepare takes a frame for the next round trip and writes its header,
// but its sequence number: RoundTrip does it if it was not done. A
// benchmark calls it outside the timed window, as the C anchor reaps
// and builds its frame before its clock starts.
func (p *Pinger) Prepare() {
	if p.ready {
		return
	}
	l := p.l
	for polls := uint64(0); l.Alloc(p.fs[:]) == 0; polls++ {
		if l.Poll(); polls == p.timeout {
			return // RoundTrip reports it
		}
	}
	h := nic.Header{Type: nic.TypeData, Length: uint16(p.n - nic.HeaderLen), Cookie: p.cookie}
	h.Put(l.Bytes(p.fs[0]))
	p.tx[0] = nic.TxDesc{Frame: p.fs[0], Len: uint16(p.n), Peer: p.peer}
	p.ready = true
}

// RoundTrip sends the next frame and waits for its echo, which it knows
// by its length and sequence number (the link has checked the rest of
// the header). Stale echoes of earlier frames are skipped.
func (p *Pinger) RoundTrip() error {
	l := p.l
	if p.Prepare(); !p.ready {
		return fmt.Errorf("%w: no free frame", ErrTimeout)
	}
	p.ready = false
	p.seq++
	binary.LittleEndian.PutUint32(l.Bytes(p.fs[0])[seqOffset:], p.seq)
	for polls := uint64(0); ; polls++ {
		k, err := l.Send(p.tx[:])
		if err != nil {
			return err
		}
		if k == 1 {
			break
		}
		if l.Poll(); polls == p.timeout {
			return fmt.Errorf("%w: the frame found no room to go", ErrTimeout)
		}
	}
	for polls := uint64(0); polls < p.timeout; polls++ {
		n := l.Receive(p.rx[:])
		if n == 0 {
			continue
		}
		done := false
		for i := range n {
			p.rel[i] = p.rx[i].Frame
			if d := p.rx[i].Data; len(d) == p.n && binary.LittleEndian.Uint32(d[seqOffset:]) == p.seq {
				done = true
			}
		}
		l.Release(p.rel[:n])
		if done {
			if p.seq&63 == 0 {
				l.Poll()
			}
			return nil
		}
	}
	return ErrTimeout
}

// Echo sends every frame l receives back to peer, until stop returns
// true (it is asked every 1024 empty polls): the server side of a
// ping-pong. It holds free frames ready before frames come, and gives
// the received ones back after the echo has gone, so that a reply waits
// only for its copy. It allocates nothing per frame.
func Echo(l nic.Link, peer nic.Peer, stop func() bool) error {
	const batch = 32
	var rx [batch]nic.RxDesc
	var fs [batch]nic.Frame
	var tx [batch]nic.TxDesc
	var rel [batch]nic.Frame
	ready := 0 // fs[:ready] are allocated
	for idle := 0; ; {
		if ready < batch {
			ready += l.Alloc(fs[ready:])
		}
		n := l.Receive(rx[:ready])
		if n == 0 {
			if idle++; idle&1023 == 0 {
				l.Poll()
				if stop() {
					return l.Release(fs[:ready])
				}
			}
			continue
		}
		idle = 0
		for i := range n {
			f := fs[ready-1-i]
			k := copy(l.Bytes(f), rx[i].Data)
			tx[i] = nic.TxDesc{Frame: f, Len: uint16(k), Peer: peer}
			rel[i] = rx[i].Frame
		}
		ready -= n
		for sent := 0; sent < n; {
			k, err := l.Send(tx[sent:n])
			if err != nil {
				return err
			}
			if sent += k; sent < n {
				if l.Poll(); stop() {
					return fmt.Errorf("nictest: echo stopped with %d frames unsent", n-sent)
				}
			}
		}
		if err := l.Release(rel[:n]); err != nil {
			return err
		}
	}
}
