package engine

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/testskip"
	"github.com/tachyon-hpc/tachyon/nic"
)

// bulkSizes straddle engine_net_bulk_min (set to 64 KiB by the tests):
// streamed as frames below it, over the lane from it on.
var bulkSizes = []int{64<<10 - 1, 64 << 10, 64<<10 + 1, 1 << 20, 4<<20 + 3}

// bulkWorld is netWorld with the bulk lane taking rendezvous messages
// from 64 KiB on, and engine_net_auth off whatever the environment says:
// an authenticated job sends every byte as frames (the lane's bytes carry
// no tags), and CI runs these tests with TACHYON_ENGINE_NET_AUTH=true too.
func bulkWorld(t *testing.T, vars ...string) *World {
	t.Helper()
	return netWorld(t, 2, append([]string{"engine_net_bulk_min", "65536", "engine_net_auth", "false"}, vars...)...)
}

// TestNetBulk: rendezvous messages from engine_net_bulk_min on cross the
// bulk lane whole, each into the receive it matched although they are
// received in another order than sent, in every send mode, truncated
// where the buffer is short, with or without loss on the frames that
// carry the handshake (and without and with engine_net_bulk_lowat);
// smaller ones stream as frames.
func TestNetBulk(t *testing.T) {
	for _, loss := range []string{"0", "0.05"} {
		t.Run("loss "+loss, func(t *testing.T) {
			lowat := map[string]string{"0": "0", "0.05": "262144"}[loss] // the lane with and without SO_RCVLOWAT
			w := bulkWorld(t, "nic_drop_rate", loss, "engine_net_bulk_lowat", lowat)
			msgs0, bytes0 := pvNetBulkMsgs.Value(), pvNetBulkBytes.Value()
			modes := []Mode{Standard, Synchronous, Ready, Standard}
			// Rank 1 posts its receives in reverse order, tags
			// distinct, so that the lane's transfers finish out of the
			// order the receives were posted.
			n := len(bulkSizes)
			bufs := make([][]byte, n)
			recvs := make([]*Request, n)
			for i := n - 1; i >= 0; i-- {
				size := bulkSizes[i]
				if i == 2 {
					size -= 100 // truncated
				}
				bufs[i] = make([]byte, size)
				r, err := w.Endpoint(1).Irecv(bufs[i], 0, i, 0)
				if err != nil {
					t.Fatal(err)
				}
				recvs[i] = r
			}
			errs := make(chan error, 1)
			go func() {
				var sends []*Request
				for i, size := range bulkSizes {
					r, err := w.Endpoint(0).Isend(msg(size, i), 1, i, 0, modes[i%len(modes)])
					if err != nil {
						errs <- err
						return
					}
					sends = append(sends, r)
				}
				for _, r := range sends {
					if _, err := r.Wait(); err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
			want := 0
			wantBytes := 0
			for i, r := range recvs {
				st, err := r.Wait()
				size := bulkSizes[i]
				if i == 2 {
					if !errors.Is(err, ErrTruncate) || st.Count != size-100 || !bytes.Equal(bufs[i], msg(size, i)[:size-100]) {
						t.Errorf("message %d into a short buffer: %v, %d bytes", i, err, st.Count)
					}
				} else if err != nil || st.Count != size || !bytes.Equal(bufs[i], msg(size, i)) {
					t.Errorf("message %d of %d bytes: %v, %d bytes, equal %v", i, size, err, st.Count, bytes.Equal(bufs[i], msg(size, i)))
				}
				if size >= 64<<10 {
					want++
					wantBytes += size
				}
			}
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
			if m, b := pvNetBulkMsgs.Value()-msgs0, pvNetBulkBytes.Value()-bytes0; m != uint64(want) || b != uint64(wantBytes) {
				t.Errorf("%d messages, %d bytes over the bulk lane; want %d and %d", m, b, want, wantBytes)
			}
			closeWorld(t, w)
		})
	}
}

// TestNetBulkOff: with engine_net_bulk off, or below engine_net_bulk_min,
// nothing crosses the lane and everything still arrives.
func TestNetBulkOff(t *testing.T) {
	for _, vars := range [][]string{{"engine_net_bulk", "false"}, {"engine_net_bulk_min", "8388608"}} {
		t.Run(vars[0], func(t *testing.T) {
			w := netWorld(t, 2, vars...)
			msgs0 := pvNetBulkMsgs.Value()
			stream(t, w, 2*len(streamSizes))
			if m := pvNetBulkMsgs.Value() - msgs0; m != 0 {
				t.Errorf("%d messages over the bulk lane", m)
			}
			closeWorld(t, w)
		})
	}
}

// TestNetBulkFallback: a sender that cannot reach its receiver's lane
// (nothing listens at the port it published) streams as frames, and the
// receiver takes them; the receiver records its listener's failed Accept
// and polls it no more.
func TestNetBulkFallback(t *testing.T) {
	w := bulkWorld(t)
	ep1 := w.Endpoint(1)
	ep1.lock()
	ep1.net.bulk.ln.Close() // rank 0 dials, and is refused
	ep1.unlock()
	fall0, msgs0 := pvNetBulkFallbacks.Value(), pvNetBulkMsgs.Value()
	stream(t, w, 3*len(streamSizes))
	if f := pvNetBulkFallbacks.Value() - fall0; f == 0 {
		t.Error("no fallback counted")
	}
	if m := pvNetBulkMsgs.Value() - msgs0; m != 0 {
		t.Errorf("%d messages over a lane that was closed", m)
	}
	ep1.lock()
	broken := ep1.net.bulk.broken
	ep1.unlock()
	if broken == nil {
		t.Error("the listener's failed Accept not recorded: it would be called on every poll")
	}
	closeWorld(t, w)
}

// TestNetBulkHostile: streams that say hello wrongly (another job, an
// unknown rank, a stale incarnation, garbage, too little) are closed and
// counted; more silent ones than the receiver keeps push out the oldest;
// and the lane works for its rightful peer, which dials after them all.
func TestNetBulkHostile(t *testing.T) {
	w := bulkWorld(t)
	ep0, ep1 := w.Endpoint(0), w.Endpoint(1)
	to := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), ep1.net.bulk.ln.Port())
	good := func() []byte {
		b := make([]byte, bulkHelloLen)
		put64(b, helloMagic, bulkMagic)
		put64(b, helloCookie, ep1.net.cookie)
		put32(b, helloFrom, 0)
		put32(b, helloFromEpoch, ep1.net.conns[0].epoch)
		put32(b, helloTo, 1)
		put32(b, helloToEpoch, ep1.net.epoch)
		return b
	}
	hellos := map[string]func([]byte){
		"magic":      func(b []byte) { b[helloMagic]++ },
		"cookie":     func(b []byte) { b[helloCookie]++ },
		"from self":  func(b []byte) { put32(b, helloFrom, 1) },
		"from 99":    func(b []byte) { put32(b, helloFrom, 99) },
		"old epoch":  func(b []byte) { put32(b, helloFromEpoch, u32(b, helloFromEpoch)+2) },
		"to 0":       func(b []byte) { put32(b, helloTo, 0) },
		"to old one": func(b []byte) { put32(b, helloToEpoch, u32(b, helloToEpoch)+2) },
		"short":      nil,
	}
	refused0 := pvNetBulkRefused.Value()
	var conns []net.Conn
	for name, spoil := range hellos {
		c, err := net.Dial("tcp4", to.String())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		b := good()
		if spoil != nil {
			spoil(b)
		} else {
			b = b[:bulkHelloLen-1]
		}
		if _, err := c.Write(b); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if spoil == nil {
			c.(*net.TCPConn).CloseWrite()
		}
	}
	const silent = 12 // rank 1 keeps 1 + 8 waiting
	for range silent {
		c, err := net.Dial("tcp4", to.String())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	// Rank 1 takes streams only while it waits for a transfer: receive
	// one, which also shows that its rightful lane still works.
	deadline := time.Now().Add(10 * time.Second)
	for pvNetBulkRefused.Value()-refused0 < uint64(len(hellos)+silent-9) {
		msgs0 := pvNetBulkMsgs.Value()
		exchange(t, ep0, ep1, 1<<20)
		if pvNetBulkMsgs.Value()-msgs0 != 1 {
			t.Fatal("the message did not cross the lane")
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d bad streams refused", pvNetBulkRefused.Value()-refused0, len(hellos))
		}
	}
	for _, c := range conns {
		c.Close()
	}
	closeWorld(t, w)
}

// exchange sends one message of size bytes from a to b and checks it.
func exchange(t *testing.T, a, b *Endpoint, size int) {
	t.Helper()
	buf := make([]byte, size)
	r, err := b.Irecv(buf, a.Rank(), 5, 0)
	if err != nil {
		t.Fatal(err)
	}
	s, err := a.Isend(msg(size, 5), b.Rank(), 5, 0, Standard)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := s.Wait(); done <- err }()
	if st, err := r.Wait(); err != nil || st.Count != size || !bytes.Equal(buf, msg(size, 5)) {
		t.Fatalf("received %d bytes: %v", st.Count, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestNetBulkBroken: a lane that breaks while it carries a message makes
// the peer dead on both sides: the receive and the send fail, neither
// hangs.
func TestNetBulkBroken(t *testing.T) {
	w := bulkWorld(t)
	ep0, ep1 := w.Endpoint(0), w.Endpoint(1)
	exchange(t, ep0, ep1, 1<<20) // the lane is up
	size := 64 << 20             // more than the kernel's buffers hold
	buf := make([]byte, size)
	r, err := ep1.Irecv(buf, 0, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ep0.Isend(make([]byte, size), 1, 1, 0, Standard)
	if err != nil {
		t.Fatal(err)
	}
	// Rank 0 polls until it has written part of the message, then its
	// stream is shut as a crash would.
	deadline := time.Now().Add(10 * time.Second)
	for {
		ep0.Poll()
		ep1.Poll()
		ep0.lock()
		c := ep0.net.conns[1]
		started := c.out.q.head == s && s.sent > 0
		if started {
			c.out.s.Close()
		}
		ep0.unlock()
		if started {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the transfer never started")
		}
	}
	errs := make(chan error, 2)
	go func() { _, err := s.Wait(); errs <- err }()
	go func() { _, err := r.Wait(); errs <- err }()
	for range 2 {
		select {
		case err := <-errs:
			if !errors.Is(err, ErrPeerDead) {
				t.Errorf("got %v, want ErrPeerDead", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("an operation hangs on a broken lane")
		}
	}
	for i := range 2 {
		w.Endpoint(i).Close()
	}
}

// TestNetPeerBulkForm: a NetPeer's text form carries its bulk port and
// reads back; forms without it are refused.
func TestNetPeerBulkForm(t *testing.T) {
	p := NetPeer{Card: nic.Card{Mode: nic.ModeUDP, IP: netip.MustParseAddr("198.18.0.1"), Port: 7000, MTU: 1472}, Epoch: 9, Bulk: 40000}
	q, err := ParseNetPeer(p.String())
	if err != nil || q != p {
		t.Fatalf("%v read back as %v, %v", p, q, err)
	}
	for _, s := range []string{"udp/198.18.0.1:7000/00:00:00:00:00:00/0/1472,9", p.String() + ",1", "udp/198.18.0.1:7000/00:00:00:00:00:00/0/1472,9,70000"} {
		if _, err := ParseNetPeer(s); !errors.Is(err, ErrConfig) {
			t.Errorf("%q: %v", s, fmt.Sprint(err))
		}
	}
}

// TestNetBulkAllocs: a message over the bulk lane allocates nothing once
// the lane is up.
func TestNetBulkAllocs(t *testing.T) {
	if raceEnabled {
		testskip.Skip(t, testskip.RaceDetector, "the race detector allocates")
	}
	w := bulkWorld(t)
	a, b := w.Endpoint(0), w.Endpoint(1)
	out, in := make([]byte, 256<<10), make([]byte, 256<<10)
	msgs0 := pvNetBulkMsgs.Value()
	one := func() {
		r, _ := b.Irecv(in, 0, 1, 0)
		s, _ := a.Isend(out, 1, 1, 0, Standard)
		for !r.Done() || !s.Done() {
			a.Poll()
			b.Poll()
		}
		r.Wait()
		s.Wait()
	}
	for range 20 {
		one()
	}
	if n := testing.AllocsPerRun(100, one); n != 0 {
		t.Errorf("%v allocations per message", n)
	}
	if m := pvNetBulkMsgs.Value() - msgs0; m != 20+101 {
		t.Errorf("%d messages over the lane, want %d", m, 20+101)
	}
	closeWorld(t, w)
}

// TestNetBulkCloseAfterSend: a rank that closes its endpoint as soon as
// its send over the lane completes (the kernel took the bytes) leaves the
// message to be received: its bye comes on the frames, which the
// receiver's keeper takes while the receiver does not poll, before the
// receiver has read the lane's bytes; the receiver still takes them, and
// only then sees the peer gone.
func TestNetBulkCloseAfterSend(t *testing.T) {
	w := bulkWorld(t)
	ep0, ep1 := w.Endpoint(0), w.Endpoint(1)
	exchange(t, ep0, ep1, 1<<20) // the lane is up
	const size = 64<<10 + 1      // within the kernel's socket buffers
	buf := make([]byte, size)
	r, err := ep1.Irecv(buf, 0, 7, 0)
	if err != nil {
		t.Fatal(err)
	}
	sent := make(chan error, 1)
	go func() {
		if err := ep0.Send(msg(size, 7), 1, 7, 0, Standard); err != nil {
			sent <- err
			return
		}
		sent <- ep0.Close()
	}()
	// Rank 1 polls until it has asked for the data over the lane, then
	// stops while rank 0 sends and closes.
	deadline := time.Now().Add(10 * time.Second)
	for {
		ep1.Poll()
		ep1.lock()
		asked := r.bulk && r.state == stReceiving
		ep1.unlock()
		if asked {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("rank 1 never asked for the data")
		}
	}
	select {
	case err := <-sent:
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // rank 1's keeper takes the bye
		ep1.lock()
		bye := ep1.net.conns[0].bye
		ep1.unlock()
		if !bye {
			t.Log("rank 0's bye had not come before rank 1 polled again: the case was not exercised")
		}
	case <-time.After(3 * time.Second):
		t.Log("rank 0's send waited for rank 1 to read: the case was not exercised")
	}
	if st, err := r.Wait(); err != nil || st.Count != size || !bytes.Equal(buf, msg(size, 7)) {
		t.Fatalf("%+v, %v, equal %v", st, err, bytes.Equal(buf, msg(size, 7)))
	}
	// Then rank 0 is gone: a receive from it fails.
	if _, err := ep1.Recv(make([]byte, 8), 0, 8, 0); !errors.Is(err, ErrPeerDead) {
		t.Fatalf("a receive from the closed rank: %v, want ErrPeerDead", err)
	}
	ep1.Close()
}

// TestBulkGather: whatever the kernel takes of each gathered write, from
// a byte to all of it, ending inside a header or a message, the lane's
// bytes are each transfer's header and then its data, in queue order,
// and each transfer is done once its last byte is taken, not before.
func TestBulkGather(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		var o bulkOut
		o.vec = make([][]byte, 0, nic.StreamBuffers)
		var want []byte
		n := 1 + rng.IntN(40)
		reqs := make([]*Request, n)
		for i := range reqs {
			r := new(Request)
			r.rreq, r.buf = rng.Uint64(), make([]byte, 1+rng.IntN(200))
			for j := range r.buf {
				r.buf[j] = byte(rng.Uint32())
			}
			reqs[i] = r
			o.q.push(r)
			var h [bulkHeaderLen]byte
			putHeader(&h, r)
			want = append(append(want, h[:]...), r.buf...)
		}
		limit := bulkHeaderLen + 1 + rng.IntN(600)
		var wire []byte
		var done []*Request
		for o.q.head != nil {
			var all []byte
			for _, b := range o.gather(limit) {
				all = append(all, b...)
			}
			if len(all) == 0 || len(all) > limit || len(o.vec) > nic.StreamBuffers {
				t.Fatalf("trial %d: a write of %d bytes in %d buffers, limit %d", trial, len(all), len(o.vec), limit)
			}
			k := len(all)
			if rng.IntN(2) == 0 {
				k = 1 + rng.IntN(len(all))
			}
			wire = append(wire, all[:k]...)
			for k > 0 {
				var s *Request
				if k, s = o.advance(k); s == nil {
					break
				}
				done = append(done, s)
			}
			for i, s := range done {
				if s != reqs[i] {
					t.Fatalf("trial %d: transfer %d done out of order", trial, i)
				}
			}
			if len(done) < n {
				// Not done before its last byte went.
				var end int
				for _, r := range reqs[:len(done)+1] {
					end += bulkHeaderLen + len(r.buf)
				}
				if len(wire) >= end {
					t.Fatalf("trial %d: transfer %d wholly written but not done", trial, len(done))
				}
			}
		}
		if !bytes.Equal(wire, want) || len(done) != n {
			t.Fatalf("trial %d: %d of %d transfers done, the lane's bytes differ from the headers and data in order", trial, len(done), n)
		}
	}
}
