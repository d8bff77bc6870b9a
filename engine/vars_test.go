package engine

import (
	"testing"

	"github.com/tachyon-hpc/tachyon/internal/testcvar"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// TestVarsPerRankAndContext: queue lengths read per communicator context
// by a scan, the posted-queue watermark and the match depth per rank.
func TestVarsPerRankAndContext(t *testing.T) {
	e0, e1 := twoRanks(t)
	o0, o1 := e0.PvarOwner(), e1.PvarOwner()
	if o0 == nil || o0 == o1 {
		t.Fatal("endpoints share an owner")
	}
	depth0, searches0 := pvMatchDepth.ValueOf(o0), pvMatches.ValueOf(o0)
	var reqs []*Request
	irecv := func(src, tag int, ctx uint32) *Request {
		r, err := e0.Irecv(make([]byte, 8), src, tag, ctx)
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, r)
		return r
	}
	irecv(0, 1, 4)
	irecv(0, 2, 4)
	irecv(0, 3, 5)
	irecv(AnySource, 9, 6)
	exact := irecv(0, 5, 8)
	irecv(AnySource, 5, 8)
	ctx := func(c, n uint32) pvar.Key { return pvar.Key{Owner: o0, Context: c, Contexts: n} }
	for _, tc := range []struct {
		k    pvar.Key
		want int64
	}{{ctx(4, 2), 3}, {ctx(4, 1), 2}, {ctx(6, 2), 1}, {ctx(8, 2), 2}, {ctx(10, 2), 0},
		{pvar.Key{Owner: o1, Context: 4, Contexts: 2}, 0}} {
		if got := pvPosted.ReadAt(tc.k); got != tc.want {
			t.Errorf("posted queue of contexts %d+%d of rank %v = %d, want %d", tc.k.Context, tc.k.Contexts, tc.k.Owner == o1, got, tc.want)
		}
	}
	if got := pvPostedHWM.ValueOf(o0); got != 6 {
		t.Errorf("rank 0's posted-queue watermark = %d, want 6", got)
	}
	if got := pvPostedHWM.ValueOf(o1); got != 0 {
		t.Errorf("rank 1's posted-queue watermark = %d, want 0", got)
	}
	// A message that both an exact and a wildcard receive match compares
	// the two list heads and goes to the earlier posted.
	if err := e0.Send([]byte("x"), 0, 5, 8, Standard); err != nil {
		t.Fatal(err)
	}
	if _, err := exact.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := pvMatchDepthHWM.ValueOf(o0); got != 2 {
		t.Errorf("match depth watermark = %d, want 2", got)
	}
	if d, s := pvMatchDepth.ValueOf(o0)-depth0, pvMatches.ValueOf(o0)-searches0; d != 2 || s != 1 {
		t.Errorf("match depth %d over %d searches, want 2 over 1", d, s)
	}
	// Unexpected messages, counted per context at the receiver.
	for i := range 3 {
		if err := e1.Send([]byte{byte(i)}, 0, 40, 12, Standard); err != nil {
			t.Fatal(err)
		}
	}
	k12 := ctx(12, 2)
	for i := 0; i < 100000 && pvUnexpected.ReadAt(k12) < 3; i++ {
		e0.Progress().Progress()
	}
	if got := pvUnexpected.ReadAt(k12); got != 3 {
		t.Errorf("unexpected messages of context 12 = %d, want 3", got)
	}
	if got := pvUnexpected.ReadAt(ctx(4, 2)); got != 0 {
		t.Errorf("unexpected messages of context 4 = %d, want 0", got)
	}
	if got := pvUnexpectedHWM.ValueOf(o0); got != 3 {
		t.Errorf("rank 0's unexpected-queue watermark = %d, want 3", got)
	}
	for _, r := range reqs {
		if r != exact {
			r.Cancel()
		}
	}
	// After Close, a rank's counts stay its own, its queues read empty.
	d := pvMatchDepth.ValueOf(o0)
	e0.Close()
	if got := pvMatchDepth.ValueOf(o0); got != d {
		t.Errorf("match depth after Close = %d, want %d", got, d)
	}
	if got := pvUnexpected.ReadAt(k12); got != 0 {
		t.Errorf("a closed rank's unexpected queue reads %d", got)
	}
}

// TestLinkFullCounted: a sender that fills its ring to a peer that does
// not read counts a full-ring stall; the peer counts none.
func TestLinkFullCounted(t *testing.T) {
	skipOnNetwork(t, "a shared-memory ring's room")
	e0, e1 := twoRanks(t)
	const n, size = 64, 8 << 10 // 512 KiB through a ring of engine_ring_bytes (256 KiB)
	var reqs []*Request
	for i := range n {
		r, err := e0.Isend(msg(size, i), 1, i, 0, Standard)
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, r)
	}
	if got := pvLinkFull.ValueOf(e0.PvarOwner()); got < 1 {
		t.Errorf("sender's full-ring stalls = %d, want at least 1", got)
	}
	done := make(chan error, 1)
	go func() {
		for _, r := range reqs {
			if _, err := r.Wait(); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	buf := make([]byte, size)
	for i := range n {
		if _, err := e1.Recv(buf, 0, i, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := pvLinkFull.ValueOf(e1.PvarOwner()); got != 0 {
		t.Errorf("receiver's full-ring stalls = %d, want 0", got)
	}
}

// TestRingOccupancy: what a rank sent and its peer has not read is in the
// rank's outgoing rings, and gone from them once read and released; for
// both ring kinds.
func TestRingOccupancy(t *testing.T) {
	skipOnNetwork(t, "the rings' indexes")
	for _, kind := range []string{ringsRecords, ringsCells} {
		t.Run(kind, func(t *testing.T) {
			testcvar.Set(t, "engine_rings", kind)
			testRingOccupancy(t)
		})
	}
}

func testRingOccupancy(t *testing.T) {
	e0, e1 := twoRanks(t)
	k0, k1 := pvar.Key{Owner: e0.PvarOwner()}, pvar.Key{Owner: e1.PvarOwner()}
	if got := pvOccupancy.ReadAt(k0); got != 0 {
		t.Fatalf("rank 0's rings hold %d bytes before any send", got)
	}
	const size = 4 << 10
	for i := range 4 {
		if err := e0.Send(msg(size, i), 1, i, 0, Standard); err != nil {
			t.Fatal(err)
		}
	}
	if got := pvOccupancy.ReadAt(k0); got < 4*size {
		t.Errorf("rank 0's rings hold %d bytes after 4 unread %d-byte messages, want at least %d", got, size, 4*size)
	}
	if got := pvOccupancy.ReadAt(k1); got != 0 {
		t.Errorf("rank 1's rings hold %d bytes, want 0", got)
	}
	if got := pvOccupancy.Read(); got < 4*size {
		t.Errorf("the process's rings hold %d bytes, want at least %d", got, 4*size)
	}
	buf := make([]byte, size)
	for i := range 4 {
		if _, err := e1.Recv(buf, 0, i, 0); err != nil {
			t.Fatal(err)
		}
	}
	e1.Progress().Progress() // the reader releases what it read at its next poll
	if got := pvOccupancy.ReadAt(k0); got != 0 {
		t.Errorf("rank 0's rings hold %d bytes once all is read and released, want 0", got)
	}
}

// TestNetVarsPerRank: a network device's counters are its rank's, as the
// endpoint's own are: each rank of a network world reads the data frames
// it sent, and the ranks' counts add up to the process's.
func TestNetVarsPerRank(t *testing.T) {
	w, err := newNetWorld(2, nil)
	if err != nil {
		t.Fatal(err)
	}
	e0, e1 := w.Endpoint(0), w.Endpoint(1)
	o0, o1 := e0.PvarOwner(), e1.PvarOwner()
	total := pvNetData.Value()
	const n = 10
	for i := range n {
		if err := e0.Send([]byte("x"), 1, i, 2, Standard); err != nil {
			t.Fatal(err)
		}
		if _, err := e1.Recv(make([]byte, 1), 0, i, 2); err != nil {
			t.Fatal(err)
		}
	}
	sent0, sent1 := pvNetData.ValueOf(o0), pvNetData.ValueOf(o1)
	if sent0 < 1 || sent0 > n || sent1 != 0 {
		t.Errorf("data frames sent: rank 0 %d (want 1 to %d), rank 1 %d (want 0)", sent0, n, sent1)
	}
	if got := pvNetData.Value() - total; got != sent0+sent1 {
		t.Errorf("the process counted %d data frames, the ranks %d and %d", got, sent0, sent1)
	}
	e1.Close()
	e0.Close()
	if got := pvNetData.ValueOf(o0); got != sent0 {
		t.Errorf("rank 0's data frames after Close: %d, want %d", got, sent0)
	}
}
