package engine

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/testcvar"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
	"github.com/tachyon-hpc/tachyon/nic"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// netWorld makes a world of n ranks over the network transport (UDP links
// on loopback), with the control variables in vars set first.
func netWorld(t *testing.T, n int, vars ...string) *World {
	t.Helper()
	testcvar.Set(t, "engine_net_force", "true")
	for i := 0; i+1 < len(vars); i += 2 {
		testcvar.Set(t, vars[i], vars[i+1])
	}
	w, err := NewWorld(n)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if w.Endpoint(i).net == nil {
			t.Fatalf("rank %d has no network device", i)
		}
	}
	return w
}

// streamSizes are the sizes a stream test cycles through: empty, short,
// one frame, several, eager across many frames, rendezvous.
var streamSizes = []int{0, 1, 8, 100, 1400, 1432, 1433, 5000, 16 << 10, 16<<10 + 1, 70000}

// stream sends count messages of every size in streamSizes and seven tags
// from rank 0 to rank 1 of w, windows of 16 in flight, and checks every
// byte and the order on each tag.
func stream(t *testing.T, w *World, count int) {
	t.Helper()
	errs := make(chan error, 2)
	for rank := range 2 {
		go func() {
			ep := w.Endpoint(rank)
			reqs := make([]*Request, 0, 16)
			bufs := make([][]byte, 16)
			for base := 0; base < count; base += 16 {
				reqs = reqs[:0]
				for i := base; i < min(base+16, count); i++ {
					n := streamSizes[i%len(streamSizes)]
					var r *Request
					var err error
					if rank == 0 {
						r, err = ep.Isend(msg(n, i), 1, i%7, 0, Standard)
					} else {
						bufs[i-base] = make([]byte, n)
						r, err = ep.Irecv(bufs[i-base], 0, i%7, 0)
					}
					if err != nil {
						errs <- fmt.Errorf("rank %d, message %d: %v", rank, i, err)
						return
					}
					reqs = append(reqs, r)
				}
				for j, r := range reqs {
					i := base + j
					st, err := r.Wait()
					if err != nil {
						errs <- fmt.Errorf("rank %d, message %d: %v", rank, i, err)
						return
					}
					if rank == 1 {
						n := streamSizes[i%len(streamSizes)]
						if st.Count != n || st.Tag != i%7 || !bytes.Equal(bufs[j], msg(n, i)) {
							errs <- fmt.Errorf("message %d: %d bytes, tag %d, equal %v", i, st.Count, st.Tag, bytes.Equal(bufs[j], msg(n, i)))
							return
						}
					}
				}
			}
			errs <- nil
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestNetStream: messages of every size arrive whole and in order over
// the network transport, on a clean network and on one that loses,
// repeats and reorders frames.
func TestNetStream(t *testing.T) {
	count := 3000
	if testing.Short() || raceEnabled {
		count = 300
	}
	for _, c := range []struct {
		name string
		vars []string
	}{
		{"clean", nil},
		{"loss 1%", []string{"nic_drop_rate", "0.01"}},
		{"loss 5%", []string{"nic_drop_rate", "0.05"}},
		{"loss 20%", []string{"nic_drop_rate", "0.2"}},
		{"duplicates and reorders 5%", []string{"nic_dup_rate", "0.05", "nic_reorder_rate", "0.05"}},
		{"all of it", []string{"nic_drop_rate", "0.05", "nic_dup_rate", "0.05", "nic_reorder_rate", "0.05"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := netWorld(t, 2, c.vars...)
			retx, fast, tos, dupes, keeps, acks, data := pvNetRetx.Value(), pvNetFastRetx.Value(), pvNetTimeouts.Value(), pvNetDupes.Value(), pvNetKeeper.Value(), pvNetAcks.Value(), pvNetData.Value()
			start := time.Now()
			stream(t, w, count)
			t.Logf("%d messages in %v; %d data frames, %d acks; sent again %d on timeouts (%d), %d fast; %d duplicates dropped; keeper ran %d times", count,
				time.Since(start).Round(time.Millisecond), pvNetData.Value()-data, pvNetAcks.Value()-acks, pvNetRetx.Value()-retx, pvNetTimeouts.Value()-tos, pvNetFastRetx.Value()-fast,
				pvNetDupes.Value()-dupes, pvNetKeeper.Value()-keeps)
			closeWorld(t, w)
		})
	}
}

func closeWorld(t *testing.T, w *World) {
	t.Helper()
	for i := range w.Size() {
		if err := w.Endpoint(i).Close(); err != nil {
			t.Error(err)
		}
	}
}

// TestNetPeerCrash: a rank whose link goes dark (its process gone with no
// goodbye, a cable cut) fails the operations waiting on it with
// ErrPeerDead within engine_net_peer_timeout, and never hangs them.
func TestNetPeerCrash(t *testing.T) {
	w := netWorld(t, 2, "engine_net_peer_timeout", "300ms", "engine_net_probe_interval", "50ms")
	a, b := w.Endpoint(0), w.Endpoint(1)
	defer a.Close()
	// One message through first, so the two have met.
	go b.Send([]byte("hi"), 0, 1, 0, Standard)
	if _, err := a.Recv(make([]byte, 2), 1, 1, 0); err != nil {
		t.Fatal(err)
	}
	b.lock()           // the keeper uses the link under the endpoint's lock
	b.net.link.Close() // dark: no goodbye, no acknowledgements
	b.unlock()
	start := time.Now()
	_, err := a.Recv(make([]byte, 8), 1, 2, 0)
	el := time.Since(start)
	if !errors.Is(err, ErrPeerDead) {
		t.Fatalf("receive from a dark peer: %v", err)
	}
	if el > 2*time.Second {
		t.Fatalf("took %v to see the peer dead, timeout 300ms", el)
	}
	if err := a.Send([]byte("x"), 1, 3, 0, Standard); !errors.Is(err, ErrPeerDead) {
		t.Fatalf("send to a dead peer: %v", err)
	}
	t.Logf("peer dead after %v: %v", el.Round(time.Millisecond), err)
}

// TestNetPeerGone: a rank that closes its endpoint says goodbye, and the
// operations waiting on it fail at once, with what it sent still
// delivered.
func TestNetPeerGone(t *testing.T) {
	w := netWorld(t, 2)
	a, b := w.Endpoint(0), w.Endpoint(1)
	defer a.Close()
	if err := b.Send([]byte("last words"), 0, 1, 0, Standard); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil { // lingers until a has the message's frames
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	st, err := a.Recv(buf, 1, 1, 0)
	if err != nil || string(buf[:st.Count]) != "last words" {
		t.Fatalf("the message before the goodbye: %q, %v", buf[:st.Count], err)
	}
	start := time.Now()
	if _, err := a.Recv(buf, 1, 2, 0); !errors.Is(err, ErrPeerDead) || time.Since(start) > time.Second {
		t.Fatalf("receive from a closed peer: %v after %v", err, time.Since(start))
	}
}

// TestNetHostileFrames: frames that are not the peer's, or not now, change
// nothing and are counted: another job's cookie, another incarnation's
// epoch, another endpoint, an unknown sender, a malformed header, a data
// frame beyond the window, one already received. Traffic goes on.
func TestNetHostileFrames(t *testing.T) {
	// No injected loss, whatever the environment says: the counts below
	// are of frames that must all arrive (CI runs ./engine at 5% loss too).
	w := netWorld(t, 2, "engine_net_auth", "false", "nic_drop_rate", "0") // TestNetAuthHostile has the authenticated case
	a, b := w.Endpoint(0), w.Endpoint(1)
	defer closeWorld(t, w)
	stream(t, w, 40)
	dev := b.net
	conn := dev.conns[0]
	to := net.UDPAddrFromAddrPort(dev.link.Card().AddrPort())
	c, err := net.DialUDP("udp4", nil, to)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	frame := func(h nic.Header, payload int) []byte {
		b := make([]byte, nic.HeaderLen+payload)
		h.Length = uint16(payload)
		h.Put(b)
		return b
	}
	good := nic.Header{Type: nic.TypeData, Cookie: dev.cookie, Src: 0, Dst: 1, Epoch: conn.epoch}
	with := func(f func(*nic.Header)) nic.Header { h := good; f(&h); return h }
	before := map[string]uint64{"cookie": dropCookie(dev), "stale": pvNetStale.Value(), "foreign": pvNetForeign.Value(),
		"malformed": pvNetMalformed.Value(), "window": pvNetWindow.Value(), "dupes": pvNetDupes.Value()}
	hostile := []struct {
		h       nic.Header
		counter string
	}{
		{with(func(h *nic.Header) { h.Cookie ^= 1 }), "cookie"},
		{with(func(h *nic.Header) { h.Epoch ^= 1 }), "stale"},
		{with(func(h *nic.Header) { h.Dst = 5 }), "foreign"},
		{with(func(h *nic.Header) { h.Src = 9 }), "foreign"},
		{with(func(h *nic.Header) { h.Type = 77 }), "malformed"},
		{with(func(h *nic.Header) { h.Seq = conn.rcvNxt + 1<<20 }), "window"},
		{with(func(h *nic.Header) { h.Seq = conn.rcvNxt - 1 }), "dupes"},
	}
	for _, x := range hostile {
		if _, err := c.Write(frame(x.h, 24)); err != nil {
			t.Fatal(err)
		}
	}
	// A clock probe too short to answer, and a clock answer no probe
	// asked for (ignored).
	for _, n := range []int{8, clockBody} {
		h := with(func(h *nic.Header) { h.Type, h.Flags = nic.TypeClock, nic.FlagAckNow })
		if n == clockBody {
			h.Flags = 0
		}
		if _, err := c.Write(frame(h, n)); err != nil {
			t.Fatal(err)
		}
	}
	// Polls take them in; then the counters say what happened.
	want := map[string]uint64{"malformed": 1}
	for _, x := range hostile {
		want[x.counter]++
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		b.Poll()
		now := map[string]uint64{"cookie": dropCookie(dev), "stale": pvNetStale.Value(), "foreign": pvNetForeign.Value(),
			"malformed": pvNetMalformed.Value(), "window": pvNetWindow.Value(), "dupes": pvNetDupes.Value()}
		ok := true
		for k, n := range want {
			if now[k]-before[k] < n {
				ok = false
			}
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("counters moved %v from %v, want at least %v more", now, before, want)
		}
	}
	if conn.dead != nil || a.peers[1].dead != nil || b.peers[0].dead != nil {
		t.Fatalf("a hostile frame killed a connection: %v", conn.dead)
	}
	stream(t, w, 40) // traffic goes on, in order
}

// dropCookie returns the link's count of frames dropped for another
// job's cookie.
func dropCookie(d *netDev) uint64 { return d.link.Stats().DropCookie }

// TestNetAllocs: once warm, a message over the network transport and its
// receive allocate nothing, with authenticated frames too.
func TestNetAllocs(t *testing.T) {
	if raceEnabled {
		testskip.Skip(t, testskip.RaceDetector, "the race detector allocates")
	}
	for _, auth := range []string{"false", "true"} {
		// No injected loss: a lost frame makes a wait park until its
		// resend, and parking may allocate (progress.IdleStrategy).
		w := netWorld(t, 2, "engine_net_auth", auth, "nic_drop_rate", "0")
		a, b := w.Endpoint(0), w.Endpoint(1)
		small, big := make([]byte, 8), make([]byte, 5000)
		for name, buf := range map[string][]byte{"8 B": small, "5000 B": big} {
			round := roundTrip(a, b, buf)
			for range 200 {
				round()
			}
			if n := testing.AllocsPerRun(1000, round); n != 0 {
				t.Errorf("%s, engine_net_auth %s: %v allocations per round trip", name, auth, n)
			}
		}
		closeWorld(t, w)
	}
}

// TestJoinMixed: a job of four ranks on two "hosts": ranks 0 and 1 share
// one segment, 2 and 3 another, and the hosts talk over the network
// transport, with bulk lanes. Every rank sends every other messages of
// every size, and each goes the way its pair should: shared memory within
// a host, the network across, the largest over the lanes.
func TestJoinMixed(t *testing.T) {
	testcvar.Set(t, "engine_net_auth", "false") // its JobSpec carries no key; TestNetAuth* join with one
	const n = 4
	hosts := [][]int{{0, 1}, {2, 3}}
	cookie := uint64(0x10c41)
	links := make([]nic.Link, n)
	lns := make([]*nic.StreamListener, n)
	peers := make([]NetPeer, n)
	for r := range n {
		l, err := nic.Open(nic.Config{Mode: nic.ModeUDP, Addr: netip.MustParseAddrPort("127.0.0.1:0"), Cookie: cookie})
		if err != nil {
			t.Fatal(err)
		}
		links[r] = l
		if lns[r], err = nic.ListenStream(l.Card().IP, 0); err != nil {
			t.Fatal(err)
		}
		peers[r] = NetPeer{Card: l.Card(), Epoch: uint32(100 + r), Bulk: lns[r].Port()}
	}
	eps := make([]*Endpoint, n)
	for _, local := range hosts {
		seg, err := CreateShmJob("", len(local))
		if err != nil {
			t.Fatal(err)
		}
		defer seg.Close()
		for _, r := range local {
			ep, err := Join(JobSpec{Rank: r, Size: n, Local: local, Seg: seg, Link: links[r], Bulk: lns[r], Cookie: cookie,
				Epoch: peers[r].Epoch, Peers: peers})
			if err != nil {
				t.Fatal(err)
			}
			eps[r] = ep
		}
	}
	shm0, net0, bulk0 := countShm.msgs.Value(), countNet.msgs.Value(), pvNetBulkMsgs.Value()
	errs := make(chan error, n)
	for r := range n {
		go func() {
			ep := eps[r]
			var reqs []*Request
			bufs := map[[2]int][]byte{}
			for peer := range n {
				if peer == r {
					continue
				}
				for k, size := range streamSizes {
					buf := make([]byte, size)
					bufs[[2]int{peer, k}] = buf
					rr, err := ep.Irecv(buf, peer, k, 0)
					if err != nil {
						errs <- err
						return
					}
					reqs = append(reqs, rr)
					sr, err := ep.Isend(msg(size, r*100+k), peer, k, 0, Standard)
					if err != nil {
						errs <- err
						return
					}
					reqs = append(reqs, sr)
				}
			}
			for _, q := range reqs {
				if _, err := q.Wait(); err != nil {
					errs <- fmt.Errorf("rank %d: %v", r, err)
					return
				}
			}
			for key, buf := range bufs {
				if !bytes.Equal(buf, msg(streamSizes[key[1]], key[0]*100+key[1])) {
					errs <- fmt.Errorf("rank %d: message %d from %d differs", r, key[1], key[0])
					return
				}
			}
			errs <- nil
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// Each rank sent len(streamSizes) messages to its host's other rank
	// and to each of the two ranks elsewhere.
	if shm, net := countShm.msgs.Value()-shm0, countNet.msgs.Value()-net0; shm != uint64(n*len(streamSizes)) || net != uint64(2*n*len(streamSizes)) {
		t.Fatalf("%d messages over shared memory, %d over the network; want %d and %d", shm, net, n*len(streamSizes), 2*n*len(streamSizes))
	}
	want := 0 // the messages of each pair across that take the lane
	for _, size := range streamSizes {
		if size > int(min(eagerLimit.Get(), netEagerLimit.Get())) && size >= int(netBulkMin.Get()) {
			want++
		}
	}
	if bulk := pvNetBulkMsgs.Value() - bulk0; want == 0 || bulk != uint64(2*n*want) {
		t.Errorf("%d messages over the bulk lanes, want %d", bulk, 2*n*want)
	}
	for _, ep := range eps {
		if err := ep.Close(); err != nil {
			t.Error(err)
		}
	}
}

// TestNetEagerLimit: to a rank on another host, messages over
// engine_net_eager_limit go by rendezvous though engine_eager_limit would
// send them eagerly, whichever way they are sent (the short path
// included), and those up to it go eagerly.
func TestNetEagerLimit(t *testing.T) {
	w := netWorld(t, 2, "engine_net_eager_limit", "1000", "engine_net_bulk_min", "1001")
	for _, c := range []struct {
		size int
		rndv bool
	}{{8, false}, {1000, false}, {1001, true}, {3000, true}, {12000, true}} {
		rndv0 := pvRndv.Value()
		buf := make([]byte, c.size)
		r, err := w.Endpoint(1).Irecv(buf, 0, 7, 0)
		if err != nil {
			t.Fatal(err)
		}
		sent := make(chan error, 1)
		go func() {
			s, err := w.Endpoint(0).Isend(msg(c.size, 3), 1, 7, 0, Standard)
			if err == nil {
				_, err = s.Wait()
			}
			sent <- err
		}()
		st, err := r.Wait()
		if err := <-sent; err != nil {
			t.Fatal(err)
		}
		if err != nil || st.Count != c.size || !bytes.Equal(buf, msg(c.size, 3)) {
			t.Fatalf("%d bytes: %v, %d received", c.size, err, st.Count)
		}
		if got := pvRndv.Value() - rndv0; got != map[bool]uint64{false: 0, true: 1}[c.rndv] {
			t.Errorf("%d bytes: %d rendezvous, want rendezvous %v", c.size, got, c.rndv)
		}
	}
	closeWorld(t, w)
}

// TestNetLinkMode: engine_net_link_mode reads each rank's link's mode
// (udp over loopback) for the rank, and nothing (-1) once the rank is
// closed; linkMode names the XDP modes.
func TestNetLinkMode(t *testing.T) {
	w := netWorld(t, 2)
	ep := w.Endpoint(1)
	k := pvar.Key{Owner: ep.owner}
	if v := pvNetLinkMode.ReadAt(k); v != 2 || linkModes[v] != "udp" {
		t.Errorf("rank 1's link mode %d, want 2 (udp)", v)
	}
	for _, c := range []struct {
		st   nic.Status
		want int
	}{{nic.Status{Mode: nic.ModeXDP, ZeroCopy: true}, 0}, {nic.Status{Mode: nic.ModeXDP}, 1}, {nic.Status{Mode: nic.ModeUDP}, 2}} {
		if got := linkMode(c.st); got != c.want {
			t.Errorf("linkMode(%+v) = %d, want %d", c.st, got, c.want)
		}
	}
	if err := ep.Close(); err != nil {
		t.Fatal(err)
	}
	if v := pvNetLinkMode.ReadAt(k); v != -1 {
		t.Errorf("a closed rank's link mode %d, want -1", v)
	}
}

// roundTrip returns one round trip of buf between a (rank 0) and b (rank
// 1), for the allocation tests.
func roundTrip(a, b *Endpoint, buf []byte) func() {
	return func() {
		r, _ := b.Irecv(buf, 0, 1, 0)
		a.Send(buf, 1, 1, 0, Standard)
		r.Wait()
		r, _ = a.Irecv(buf, 1, 2, 0)
		b.Send(buf, 0, 2, 0, Standard)
		r.Wait()
	}
}
