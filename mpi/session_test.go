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
	fmt.Println("ok")
}
