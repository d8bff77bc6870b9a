package mpi_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/mpi"
	"github.com/tachyon-hpc/tachyon/mpit"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// toolHandles is one rank's session with handles bound to its
// communicators.
type toolHandles struct {
	s *mpit.Session
}

func (th toolHandles) alloc(name string, c pvar.Class, obj mpit.Object) (*mpit.PvarHandle, error) {
	i, err := mpit.PvarIndex(name, c)
	if err != nil {
		return nil, err
	}
	h, n, err := th.s.HandleAlloc(i, obj)
	if err != nil {
		return nil, fmt.Errorf("HandleAlloc(%s): %w", name, err)
	}
	if n != 1 {
		return nil, fmt.Errorf("HandleAlloc(%s): count %d, want 1", name, n)
	}
	if d, _ := mpit.PvarInfo(i); !d.Continuous {
		if err := th.s.Start(h); err != nil {
			return nil, err
		}
	}
	return h, nil
}

func (th toolHandles) read(h *mpit.PvarHandle, want int64, what string) error {
	v, err := th.s.Read(h)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if v != want {
		return fmt.Errorf("%s = %d, want %d", what, v, want)
	}
	return nil
}

// TestMPITPerRank: in a world of three goroutine ranks, handles bound to a
// rank's communicators read that rank's values, and the queue lengths that
// communicator's, while the process-wide value is the sum.
func TestMPITPerRank(t *testing.T) {
	if err := mpit.Init(); err != nil {
		t.Fatal(err)
	}
	defer mpit.Finalize()
	selfMsgs, _ := pvar.Lookup("engine_self_messages")
	before := selfMsgs.Read()
	err := mpi.Run(3, func(world *mpi.Comm) error {
		me := world.Rank()
		dup, err := world.Dup()
		if err != nil {
			return err
		}
		s, err := mpit.NewSession()
		if err != nil {
			return err
		}
		defer s.Free()
		th := toolHandles{s}
		sent, err := th.alloc("engine_self_messages", pvar.ClassCounter, world)
		if err != nil {
			return err
		}
		uqWorld, err := th.alloc("engine_unexpected_queue", pvar.ClassLevel, world)
		if err != nil {
			return err
		}
		uqDup, err := th.alloc("engine_unexpected_queue", pvar.ClassLevel, dup)
		if err != nil {
			return err
		}
		pqWorld, err := th.alloc("engine_posted_queue", pvar.ClassLevel, world)
		if err != nil {
			return err
		}
		pqDup, err := th.alloc("engine_posted_queue", pvar.ClassLevel, dup)
		if err != nil {
			return err
		}
		uqMark, err := th.alloc("engine_unexpected_queue_hwm", pvar.ClassHighWatermark, world)
		if err != nil {
			return err
		}
		// Rank r sends r+1 messages to itself on dup, unreceived: they wait
		// in dup's unexpected queue, none in world's.
		k := me + 1
		var reqs []*mpi.Request
		for i := range k {
			r, err := dup.Isend([]byte{byte(i)}, me, 7)
			if err != nil {
				return err
			}
			reqs = append(reqs, r)
		}
		// One receive posted on world, which no message matches.
		posted, err := world.Irecv(make([]byte, 1), me, 99)
		if err != nil {
			return err
		}
		// Poll until the messages are in (a probe that matches none polls
		// the links), bounded.
		for i := 0; i < 100000; i++ {
			if v, err := s.Read(uqDup); err != nil || v >= int64(k) {
				break
			}
			if _, _, err := world.Iprobe(me, 12345); err != nil {
				return err
			}
		}
		for _, c := range []struct {
			h    *mpit.PvarHandle
			want int64
			what string
		}{
			{sent, int64(k), "engine_self_messages of the rank"},
			{uqDup, int64(k), "unexpected queue of dup"},
			{uqWorld, 0, "unexpected queue of world"},
			{pqWorld, 1, "posted queue of world"},
			{pqDup, 0, "posted queue of dup"},
			{uqMark, int64(k), "unexpected queue watermark of the rank"},
		} {
			if err := th.read(c.h, c.want, fmt.Sprintf("rank %d: %s", me, c.what)); err != nil {
				return err
			}
		}
		// A watermark started now starts from the rank's level, every
		// communicator's messages, though bound to world, whose queue is
		// empty: the watermark is the rank's.
		late, err := th.alloc("engine_unexpected_queue_hwm", pvar.ClassHighWatermark, world)
		if err != nil {
			return err
		}
		if err := th.read(late, int64(k), fmt.Sprintf("rank %d: a watermark started with %d queued", me, k)); err != nil {
			return err
		}
		for range k {
			if _, err := dup.Recv(make([]byte, 1), me, 7); err != nil {
				return err
			}
		}
		for _, r := range reqs {
			if _, err := r.Wait(); err != nil {
				return err
			}
		}
		if err := posted.Cancel(); err != nil {
			return err
		}
		if _, err := posted.Wait(); err != nil {
			return err
		}
		if err := th.read(uqDup, 0, fmt.Sprintf("rank %d: dup's unexpected queue after the receives", me)); err != nil {
			return err
		}
		if err := th.read(uqMark, int64(k), fmt.Sprintf("rank %d: the watermark after the receives", me)); err != nil {
			return err
		}
		// A freed communicator binds nothing.
		if err := dup.Free(); err != nil {
			return err
		}
		i, _ := mpit.PvarIndex("engine_posted_queue", pvar.ClassLevel)
		if _, _, err := s.HandleAlloc(i, dup); !errors.Is(err, mpit.ErrInvalid) {
			return fmt.Errorf("rank %d: HandleAlloc with a freed communicator = %v, want ErrInvalid", me, err)
		}
		var nilComm *mpi.Comm
		if _, _, err := s.HandleAlloc(i, nilComm); !errors.Is(err, mpit.ErrInvalid) {
			return fmt.Errorf("rank %d: HandleAlloc with a nil *Comm = %v, want ErrInvalid", me, err)
		}
		if _, _, err := s.HandleAlloc(i, nil); !errors.Is(err, mpit.ErrInvalid) {
			return fmt.Errorf("rank %d: HandleAlloc with no object = %v, want ErrInvalid", me, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The process's value is the sum of the ranks': 1+2+3.
	if got := selfMsgs.Read() - before; got != 6 {
		t.Errorf("process-wide engine_self_messages grew by %d, want 6", got)
	}
}

// TestMPITBindingCounts: every variable bound to a communicator gives a
// handle a count of one bound to World, and a wrong object is refused.
func TestMPITBindingCounts(t *testing.T) {
	if err := mpit.Init(); err != nil {
		t.Fatal(err)
	}
	defer mpit.Finalize()
	err := mpi.Run(1, func(world *mpi.Comm) error {
		s, err := mpit.NewSession()
		if err != nil {
			return err
		}
		defer s.Free()
		n, _ := mpit.PvarNum()
		bound := 0
		for i := range n {
			d, err := mpit.PvarInfo(i)
			if err != nil {
				return err
			}
			if d.Bind != mpit.BindComm {
				continue
			}
			bound++
			h, count, err := s.HandleAlloc(i, world)
			if err != nil || count != 1 {
				return fmt.Errorf("%s: HandleAlloc(World) = %d, %v", d.Name, count, err)
			}
			if _, err := s.Read(h); err != nil {
				return fmt.Errorf("%s: Read: %v", d.Name, err)
			}
			if err := s.FreeHandle(h); err != nil {
				return err
			}
			if _, _, err := s.HandleAlloc(i, wrongObject{}); !errors.Is(err, mpit.ErrInvalid) {
				return fmt.Errorf("%s: HandleAlloc(a window) = %v, want ErrInvalid", d.Name, err)
			}
		}
		for _, name := range []string{"engine_rendezvous", "engine_posted_queue", "engine_match_depth", "progress_polls", "engine_shm_messages"} {
			v, ok := pvar.Lookup(name)
			if !ok || v.Bind() != pvar.BindComm {
				return fmt.Errorf("%s: bind %v (found %v), want comm", name, v.Bind(), ok)
			}
		}
		if bound < 20 {
			return fmt.Errorf("%d variables bound to communicators, want the engine's and progress's", bound)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// wrongObject is an object of a type no variable is bound to.
type wrongObject struct{}

func (wrongObject) MPITBind() mpit.Bind { return mpit.BindWin }

func (wrongObject) MPITKey() (pvar.Key, bool) { return pvar.Key{Owner: pvar.NewOwner()}, true }

// A communicator satisfies mpit.Object without either package importing
// the other.
var _ mpit.Object = (*mpi.Comm)(nil)

// TestMPITEveryTunable: every control variable of the registry, those of
// the packages an MPI program links included, is in MPI_T with its scope
// and bound to no object; every performance variable too, with its bind.
func TestMPITEveryTunable(t *testing.T) {
	if err := mpit.Init(); err != nil {
		t.Fatal(err)
	}
	defer mpit.Finalize()
	scopes := map[cvar.Scope]mpit.Scope{cvar.ScopeConstant: mpit.ScopeConstant, cvar.ScopeReadonly: mpit.ScopeReadonly,
		cvar.ScopeLocal: mpit.ScopeLocal, cvar.ScopeGroup: mpit.ScopeGroupEq, cvar.ScopeAll: mpit.ScopeAllEq}
	all := cvar.All()
	if len(all) < 30 {
		t.Fatalf("%d control variables registered: the engine's, rings' and progress's are missing", len(all))
	}
	for _, v := range all {
		i, err := mpit.CvarIndex(v.Name())
		if err != nil {
			t.Errorf("%s: %v", v.Name(), err)
			continue
		}
		d, _ := mpit.CvarInfo(i)
		if want, ok := scopes[v.Scope()]; !ok || d.Scope != want || d.Bind != mpit.BindNoObject {
			t.Errorf("%s: scope %v, bind %v; want %v, no_object", v.Name(), d.Scope, d.Bind, want)
		}
	}
	for _, v := range pvar.All() {
		i, err := mpit.PvarIndex(v.Name(), v.Class())
		if err != nil {
			t.Errorf("%s: %v", v.Name(), err)
			continue
		}
		if d, _ := mpit.PvarInfo(i); d.Bind != v.Bind() {
			t.Errorf("%s: bind %v, want %v", v.Name(), d.Bind, v.Bind())
		}
	}
}
