package mpi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// newTestSession returns a standalone session closed with the test.
func newTestSession(t *testing.T, opts ...SessionOption) *Session {
	t.Helper()
	s, err := NewSession(append([]SessionOption{WithStandalone()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil && !errors.Is(err, ErrSession) {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// echoPair connects two sessions of this process, one listening, one
// dialing, and returns the server's and the client's communicators.
func echoPair(t *testing.T, srv, cli *Session) (*Comm, *Comm) {
	t.Helper()
	ln, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type res struct {
		c   *Comm
		err error
	}
	got := make(chan res, 1)
	go func() {
		c, err := ln.Accept(ctx)
		got <- res{c, err}
	}()
	cc, err := cli.Dial(ctx, ln.Addr().String())
	if err != nil {
		t.Fatal("Dial:", err)
	}
	r := <-got
	if r.err != nil {
		t.Fatal("Accept:", r.err)
	}
	return r.c, cc
}

func TestSessionListenDial(t *testing.T) {
	srv, cli := newTestSession(t), newTestSession(t)
	sc, cc := echoPair(t, srv, cli)
	for _, c := range []*Comm{sc, cc} {
		if !c.IsInter() || c.Size() != 1 || c.Rank() != 0 {
			t.Fatalf("IsInter %v, Size %d, Rank %d: want an intercommunicator of one rank", c.IsInter(), c.Size(), c.Rank())
		}
		if n, err := c.RemoteSize(); n != 1 || err != nil {
			t.Fatalf("RemoteSize = %d, %v", n, err)
		}
	}
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 1<<20)
		for {
			st, err := sc.Recv(buf, 0, AnyTag)
			if err != nil {
				done <- err
				return
			}
			if st.Tag == 99 {
				done <- nil
				return
			}
			if err := sc.Send(buf[:st.Count], 0, st.Tag); err != nil {
				done <- err
				return
			}
		}
	}()
	for _, n := range []int{0, 8, 4096, 100000, 1 << 20} {
		msg := bytes.Repeat([]byte{byte(n)}, n)
		if err := cc.Send(msg, 0, 7); err != nil {
			t.Fatal(err)
		}
		rep := make([]byte, n)
		st, err := cc.Recv(rep, 0, 7)
		if err != nil || st.Count != n || !bytes.Equal(rep, msg) {
			t.Fatalf("%d bytes: status %+v, %v, equal %v", n, st, err, bytes.Equal(rep, msg))
		}
	}
	if err := cc.Send(nil, 0, 99); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal("server:", err)
	}
}

// TestSessionsIndependent: sessions of one process have worlds of their
// own, end apart, and a new one may follow a closed one.
func TestSessionsIndependent(t *testing.T) {
	a, err := NewSession(WithStandalone())
	if err != nil {
		t.Fatal(err)
	}
	b := newTestSession(t)
	for _, s := range []*Session{a, b} {
		if s.World().Size() != 1 || s.World().Rank() != 0 || s.Self().Size() != 1 {
			t.Fatalf("session %s: world of %d", s.Name(), s.World().Size())
		}
	}
	if a.Name() == b.Name() {
		t.Fatalf("two sessions named %q", a.Name())
	}
	if err := a.World().Send([]byte("a"), 0, 1); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := b.World().Iprobe(AnySource, AnyTag); ok || err != nil {
		t.Fatalf("session b sees session a's message: %v, %v", ok, err)
	}
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := a.World().Send(nil, 0, 1); !errors.Is(err, ErrSession) {
		t.Fatalf("Send on a closed session: %v, want ErrSession", err)
	}
	if err := a.Close(context.Background()); !errors.Is(err, ErrSession) {
		t.Fatalf("Close twice: %v, want ErrSession", err)
	}
	if _, err := a.Listen("127.0.0.1:0"); !errors.Is(err, ErrSession) {
		t.Fatalf("Listen on a closed session: %v, want ErrSession", err)
	}
	if err := b.World().Send([]byte("b"), 0, 2); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	if st, err := b.World().Recv(buf, 0, AnyTag); err != nil || st.Tag != 2 || buf[0] != 'b' {
		t.Fatalf("session b: %+v, %v", st, err)
	}
	c := newTestSession(t)
	if c.World().Size() != 1 {
		t.Fatal("a session after a closed one")
	}
	if g, err := c.GroupFromPset(PsetWorld); err != nil || g.Size() != 1 {
		t.Fatalf("GroupFromPset: %v, %v", g, err)
	}
	if _, err := c.GroupFromPset("mpi://nowhere"); !errors.Is(err, ErrArg) {
		t.Fatalf("GroupFromPset of an unknown set: %v, want ErrArg", err)
	}
	g, _ := c.GroupFromPset(PsetSelf)
	cc, err := c.CommFromGroup(g, "test")
	if err != nil || cc.Size() != 1 {
		t.Fatalf("CommFromGroup: %v", err)
	}
	if _, err := NewSession(WithThreadLevel(ThreadSerialized), WithProgressGoroutine(-1)); !errors.Is(err, ErrArg) {
		t.Fatalf("a progress goroutine below ThreadMultiple: %v, want ErrArg", err)
	}
}

// TestSessionCloseDelivers: what a session sent before Close reaches a
// peer that receives after it; then the peer's receives fail with
// ErrProcFailed. A send nobody receives ends Close at its context.
func TestSessionCloseDelivers(t *testing.T) {
	srv, cli := newTestSession(t), newTestSession(t)
	sc, cc := echoPair(t, srv, cli)
	for i := range 10 {
		if err := cc.Send([]byte{byte(i)}, 0, 3); err != nil {
			t.Fatal(err)
		}
	}
	big := make([]byte, 1<<20) // a rendezvous the server never takes
	r, err := cc.Isend(big, 0, 4)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := cli.Close(ctx); !errors.Is(err, ErrCanceled) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close with a send undelivered: %v, want ErrCanceled and DeadlineExceeded", err)
	}
	if _, err := r.Wait(); err == nil {
		t.Fatal("the undelivered send completed")
	}
	b := make([]byte, 1)
	for i := range 10 {
		if st, err := sc.Recv(b, 0, 3); err != nil || b[0] != byte(i) || st.Count != 1 {
			t.Fatalf("message %d after the client closed: %+v, %v", i, st, err)
		}
	}
	if _, err := sc.Recv(big, 0, AnyTag); !errors.Is(err, ErrProcFailed) {
		t.Fatalf("Recv from a closed client: %v, want ErrProcFailed", err)
	}
	if err := sc.Disconnect(); err != nil {
		t.Fatal(err)
	}
}

// TestSessionProgressGoroutine: with a progress goroutine, a rendezvous
// send completes while its receiver's goroutines make no call.
func TestSessionProgressGoroutine(t *testing.T) {
	srv := newTestSession(t, WithProgressGoroutine(-1))
	cli := newTestSession(t)
	sc, cc := echoPair(t, srv, cli)
	buf := make([]byte, 1<<20)
	r, err := sc.Irecv(buf, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	msg := make([]byte, len(buf))
	msg[12345] = 7
	sent := make(chan error, 1)
	go func() { sent <- cc.Send(msg, 0, 1) }() // waits for the server's side to take it
	// The receive completes on the progress goroutine: watched, not polled.
	c, _ := r.completion()
	for deadline := time.Now().Add(5 * time.Second); c != nil && !c.Done(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the receive did not complete without a call into MPI")
		}
	}
	if _, err := r.Wait(); err != nil || buf[12345] != 7 {
		t.Fatalf("Wait: %v", err)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
}

// TestSessionSerial: a session at ThreadSerialized connects and talks.
func TestSessionSerial(t *testing.T) {
	srv := newTestSession(t, WithThreadLevel(ThreadSerialized))
	cli := newTestSession(t, WithThreadLevel(ThreadSerialized))
	sc, cc := echoPair(t, srv, cli)
	done := make(chan error, 1)
	go func() {
		b := make([]byte, 64)
		for range 100 {
			st, err := sc.Recv(b, 0, 1)
			if err == nil {
				err = sc.Send(b[:st.Count], 0, 1)
			}
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	b := make([]byte, 64)
	for i := range 100 {
		if err := cc.Send(bytes.Repeat([]byte{byte(i)}, 64), 0, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := cc.Recv(b, 0, 1); err != nil || b[63] != byte(i) {
			t.Fatalf("round trip %d: %v", i, err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestSessionCloseWhileWaiting: goroutines blocked in a session's calls
// (receives, a probe, a wait, a matched probe, RecvMessage) when it
// closes return errors of its classes, and none crashes (the
// connection's rings and doorbell go while they wait).
func TestSessionCloseWhileWaiting(t *testing.T) {
	for _, opts := range [][]SessionOption{nil, {WithProgressGoroutine(-1)}} {
		srv, err := NewSession(append([]SessionOption{WithStandalone()}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		cli := newTestSession(t)
		sc, cc := echoPair(t, srv, cli)
		errs := make(chan error, 8)
		for i := range 4 {
			go func() {
				_, err := sc.Recv(make([]byte, 8), 0, i)
				errs <- err
			}()
		}
		go func() {
			_, err := sc.Probe(AnySource, 99)
			errs <- err
		}()
		r, _ := sc.Irecv(make([]byte, 8), 0, 50)
		go func() {
			_, err := r.Wait()
			errs <- err
		}()
		go func() {
			_, _, err := sc.Mprobe(AnySource, 97)
			errs <- err
		}()
		go func() {
			rv, err := sc.RecvMessage(context.Background(), 0, 98)
			if err == nil {
				rv.Release()
			}
			errs <- err
		}()
		time.Sleep(50 * time.Millisecond) // they park
		if err := srv.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		for range 8 {
			select {
			case err := <-errs:
				if !errors.Is(err, ErrComm) && !errors.Is(err, ErrSession) {
					t.Errorf("a call waiting at Close: %v, want ErrComm or ErrSession", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("a call waiting at Close did not return")
			}
		}
		// The client sees its server gone.
		if _, err := cc.Recv(nil, 0, 0); !errors.Is(err, ErrProcFailed) {
			t.Fatalf("client after the server closed: %v, want ErrProcFailed", err)
		}
	}
}

// TestSessionIdleStrategy: every strategy connects and talks; an unknown
// one is ErrArg.
func TestSessionIdleStrategy(t *testing.T) {
	for _, st := range []IdleStrategy{IdlePark, IdleYield, IdleSpin} {
		srv := newTestSession(t, WithIdleStrategy(st))
		cli := newTestSession(t, WithIdleStrategy(st))
		sc, cc := echoPair(t, srv, cli)
		if got := sc.p.ep.Progress().IdleStrategy(); int(got) != int(st) {
			t.Fatalf("strategy %d: the endpoint's engine has %v", st, got)
		}
		go func() {
			b := make([]byte, 8)
			if _, err := sc.Recv(b, 0, 1); err == nil {
				sc.Send(b, 0, 1)
			}
		}()
		time.Sleep(5 * time.Millisecond) // the server waits in its strategy's phases
		b := make([]byte, 8)
		if err := cc.Send(b, 0, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := cc.Recv(b, 0, 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := NewSession(WithIdleStrategy(7)); !errors.Is(err, ErrArg) {
		t.Fatalf("an unknown strategy: %v, want ErrArg", err)
	}
}

// The Sessions model's routines in a job of processes: ranks 0 and 2 of
// three make a communicator of their group from the world's process set,
// with no communicator of theirs as parent, while rank 1 makes none.
var scCommFromGroup = scenario("comm-from-group", func(w *Comm) error {
	s := DefaultSession()
	if s == nil || s.World().Size() != 3 {
		return fmt.Errorf("the default session's world: %v", s)
	}
	if w.Rank() == 1 {
		return w.Barrier()
	}
	g, err := s.GroupFromPset(PsetWorld)
	if err != nil {
		return err
	}
	if g, err = g.Incl([]int{0, 2}); err != nil {
		return err
	}
	c, err := s.CommFromGroup(g, "ends")
	if err != nil {
		return err
	}
	if c.Size() != 2 || c.Rank() != w.Rank()/2 {
		return fmt.Errorf("CommFromGroup: rank %d of %d", c.Rank(), c.Size())
	}
	b := make([]byte, 1)
	if _, err := c.Sendrecv([]byte{byte(w.Rank())}, 1-c.Rank(), 1, b, 1-c.Rank(), 1); err != nil || int(b[0]) != 2-w.Rank() {
		return fmt.Errorf("a message on it: %v from world rank %d", err, b[0])
	}
	return w.Barrier()
})

func TestCommFromGroup(t *testing.T) { runProcesses(t, 3, scCommFromGroup) }
