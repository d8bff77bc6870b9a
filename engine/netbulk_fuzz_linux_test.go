package engine

import (
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/testcvar"
	"github.com/tachyon-hpc/tachyon/nic"
)

// fzHello returns the hello rank 0 (incarnation fzPeerEpoch) sends rank
// 1 (fzEpoch) of the fuzzers' job.
func fzHello() []byte {
	b := make([]byte, bulkHelloLen)
	put64(b, helloMagic, bulkMagic)
	put64(b, helloCookie, fzCookie)
	put32(b, helloFrom, 0)
	put32(b, helloFromEpoch, fzPeerEpoch)
	put32(b, helloTo, 1)
	put32(b, helloToEpoch, fzEpoch)
	return b
}

// fzHelloGood reports whether b starts with a hello rank 1 must take.
func fzHelloGood(b []byte) bool {
	return len(b) >= bulkHelloLen && u64(b, helloMagic) == bulkMagic && u64(b, helloCookie) == fzCookie &&
		u32(b, helloFrom) == 0 && u32(b, helloFromEpoch) == fzPeerEpoch && u32(b, helloTo) == 1 && u32(b, helloToEpoch) == fzEpoch
}

// FuzzBulkLane dials rank 1's bulk lane listener and writes arbitrary
// bytes: a stream whose first bytes are not a whole, right hello must be
// refused and counted in engine_net_bulk_refused, one whose are becomes
// rank 0's lane, and nothing waits on it beyond its hello. A lane taken
// that then carries a transfer header naming no transfer asked for (or
// ends before one) fails the peer with an error, counts a malformed
// header where one came, and closes the stream; never a panic, never a
// buffer sized by the peer's bytes.
func FuzzBulkLane(f *testing.F) {
	testcvar.Set(f, "engine_net_auth", "false")
	ln, err := nic.ListenStream(netip.MustParseAddr("127.0.0.1"), 16)
	if err != nil {
		f.Fatal(err)
	}
	l := newMemLink(fzFrames, fzMTU)
	d, err := newNetDev(l, fzCookie, 1, fzEpoch, 2, nil)
	if err != nil {
		f.Fatal(err)
	}
	c := newNetConn(d, 0, 0, fzPeerEpoch, d.clock())
	c.max = fzMTU - nic.HeaderLen - pktLen
	d.conns[0] = c
	d.list = append(d.list, c)
	d.bulk = newBulkDev(ln)
	b := d.bulk
	ep := &Endpoint{net: d, malformed: pvMalformed.Shard()}
	f.Cleanup(func() {
		d.close()
		ep.malformed.Close()
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(ln.Port())))

	good := fzHello()
	hdr := make([]byte, bulkHeaderLen)
	put64(hdr, bulkRreq, 1<<40|3)
	put64(hdr, bulkLen, 1<<62)
	f.Add(good)
	f.Add(append(append([]byte(nil), good...), hdr...))
	f.Add(good[:bulkHelloLen-1])
	f.Add([]byte{})
	bad := append([]byte(nil), good...)
	put32(bad, helloFrom, 5)
	f.Add(bad)
	bad = append([]byte(nil), good...)
	put64(bad, helloCookie, fzCookie+1)
	f.Add(bad)
	f.Fuzz(func(t *testing.T, in []byte) {
		c.dead, c.in = nil, bulkIn{}
		refused, malformed := b.refused.Load(), ep.malformed.Load()
		s, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Write(in); err != nil {
			t.Fatal(err)
		}
		s.Close()
		deadline := time.Now().Add(10 * time.Second)
		for c.in.s == nil && b.refused.Load() == refused {
			if time.Now().After(deadline) {
				t.Fatalf("a stream of %d bytes neither refused nor taken (%d hellos waiting)", len(in), len(b.hellos))
			}
			d.acceptBulk()
			if len(b.hellos) > len(d.list)+8 {
				t.Fatalf("%d hellos waiting", len(b.hellos))
			}
		}
		if len(b.hellos) != 0 || b.refused.Load()-refused > 1 {
			t.Fatalf("after one stream: %d hellos waiting, %d refused", len(b.hellos), b.refused.Load()-refused)
		}
		if want := fzHelloGood(in); (c.in.s != nil) != want {
			t.Fatalf("hello % x: taken %v, want %v", in[:min(len(in), bulkHelloLen)], c.in.s != nil, want)
		}
		if c.in.s == nil {
			return
		}
		// Rank 1 waits for a transfer that nothing names: whatever comes
		// fails the peer.
		c.in.want = 1
		for c.dead == nil {
			if time.Now().After(deadline) {
				t.Fatalf("a lane of %d bytes after its hello neither failed nor read", len(in)-bulkHelloLen)
			}
			ep.readBulk(c)
		}
		if c.in.s != nil || c.in.r != nil {
			t.Fatalf("the failed lane left its stream or a transfer (%v)", c.dead)
		}
		wantMal := uint64(0)
		if len(in) >= bulkHelloLen+bulkHeaderLen {
			wantMal = 1
		}
		if n := ep.malformed.Load() - malformed; n != wantMal {
			t.Fatalf("%d bytes after the hello: %d malformed, want %d (%v)", len(in)-bulkHelloLen, n, wantMal, c.dead)
		}
	})
}
