package engine

import (
	"errors"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/tachyon-hpc/tachyon/internal/testcvar"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
	"github.com/tachyon-hpc/tachyon/rings"
)

// TestHostCollShm: a shared-memory job's ranks share its collective areas
// with the creator's geometry, whatever their own control variables; an
// area is claimed once, and free again after its last user's Release.
func TestHostCollShm(t *testing.T) {
	testcvar.Set(t, "engine_coll_shm_areas", "3")
	testcvar.Set(t, "engine_coll_shm_slots", "2")
	testcvar.Set(t, "engine_coll_shm_slot_bytes", "100") // rounded up to 128
	testcvar.Set(t, "engine_coll_shm_lines", "5")
	seg, err := CreateShmJob("", 2)
	if errors.Is(err, rings.ErrUnsupported) {
		testskip.Skip(t, testskip.NoSharedMemory, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	testcvar.Set(t, "engine_coll_shm_areas", "7") // a rank's own: not the segment's
	testcvar.Set(t, "engine_coll_shm_lines", "9")
	var hs [2]*HostColl
	for r := range hs {
		ep, err := OpenShm(seg, r)
		if err != nil {
			t.Fatal(err)
		}
		defer ep.Close()
		if hs[r] = ep.HostColl(); hs[r] == nil {
			t.Fatalf("rank %d: no collective areas", r)
		}
	}
	h0, h1 := hs[0], hs[1]
	if h0.Areas() != 3 || h0.Lines() != 5 || h0.Slots() != 2 || h0.SlotBytes() != 128 || h0.Ranks() != 2 || !h0.OnHost(1) || h0.OnHost(2) {
		t.Fatalf("geometry: %d areas of %d lines and %d slots of %d bytes for %d ranks", h0.Areas(), h0.Lines(), h0.Slots(), h0.SlotBytes(), h0.Ranks())
	}
	atomic.StoreUint64(&h0.Line(2, 1, 4)[0], 42)
	h0.Slot(2, 1, 1)[127] = 7
	if atomic.LoadUint64(&h1.Line(2, 1, 4)[0]) != 42 || h1.Slot(2, 1, 1)[127] != 7 {
		t.Fatal("rank 1 does not see rank 0's line and slot")
	}
	if uintptr(unsafe.Pointer(&h0.Slot(2, 1, 0)[0]))-uintptr(unsafe.Pointer(&h0.Line(2, 1, 4)[0])) != 64 {
		t.Fatal("the last line and the first slot of a rank do not follow each other")
	}
	a := h0.Claim(2, 1)
	if a != 1 || h1.Claim(2, 1) != 2 || h0.Claim(2, 1) != -1 {
		t.Fatalf("claims: %d, then the rest", a)
	}
	h0.Release(1)
	if h1.Claim(2, 1) != -1 {
		t.Fatal("an area claimed again before its last user released it")
	}
	h1.Release(1)
	if got := h1.Claim(2, 1); got != 1 {
		t.Fatalf("the released area: claim got %d", got)
	}
	if atomic.LoadUint64(&h0.Line(1, 0, 0)[0]) != 0 {
		t.Fatal("a claimed area's lines are not zeroed")
	}
}

// TestHostCollWorld: a world's goroutine ranks share one set of areas; a
// lone rank and engine_coll_shm_areas 0 have none.
func TestHostCollWorld(t *testing.T) {
	if netForce.Get() {
		testskip.Skip(t, testskip.NetForce, "engine_net_force: the ranks share no memory")
	}
	w, err := NewWorld(2)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for i := range w.Size() {
			w.Endpoint(i).Close()
		}
	}()
	if h := w.Endpoint(0).HostColl(); h == nil || h != w.Endpoint(1).HostColl() {
		t.Fatal("the ranks do not share the world's areas")
	}
	for _, c := range []struct{ n, areas string }{{"1", "16"}, {"2", "0"}} {
		testcvar.Set(t, "engine_coll_shm_areas", c.areas)
		n := int(c.n[0] - '0')
		w, err := NewWorld(n)
		if err != nil {
			t.Fatal(err)
		}
		if w.Endpoint(0).HostColl() != nil {
			t.Errorf("%d ranks, %s areas: areas", n, c.areas)
		}
		for i := range n {
			w.Endpoint(i).Close()
		}
	}
}

// TestHostWaiter: a waiter returns once its flag is set by another rank
// (which wakes it if parked), and with ErrPeerDead once the rank that
// should set it is gone.
func TestHostWaiter(t *testing.T) {
	if netForce.Get() {
		testskip.Skip(t, testskip.NetForce, "engine_net_force: the ranks share no memory")
	}
	w, err := NewWorld(2)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Endpoint(0).Close()
	h := w.Endpoint(0).HostColl()
	flag := &h.Line(0, 1, 0)[0]
	wt := w.Endpoint(0).NewHostWaiter(func() bool { return atomic.LoadUint64(flag) >= 1 })
	done := make(chan error, 1)
	go func() { done <- wt.Wait(1) }()
	set := make(chan struct{})
	go func() {
		defer close(set)
		atomic.StoreUint64(flag, 1)
		WakeFence()
		w.Endpoint(1).WakeHost(0)
	}()
	if err := <-done; err != nil {
		t.Fatalf("flag set: %v", err)
	}
	<-set
	wt2 := w.Endpoint(0).NewHostWaiter(func() bool { return atomic.LoadUint64(flag) >= 2 })
	go func() { done <- wt2.Wait(1) }()
	w.Endpoint(1).Close()
	if err := <-done; !errors.Is(err, ErrPeerDead) {
		t.Fatalf("setter gone: %v, want ErrPeerDead", err)
	}
}
