package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tachyon-hpc/tachyon/mpi"
)

// The tachyon kind: two services on Tachyon's sessions. The server's
// session listens on the address, and each client that dials it is a
// *mpi.Comm, an intercommunicator whose remote group is that client; the
// client's session dials and gets the server as rank 0 of its remote
// group. A request is one message of tachyonRequestTag, its reply one of
// tachyonReplyTag, by Send and Recv: the data goes by shared memory on
// one host, by the network transport (AF_XDP or UDP, as -rpc says)
// between two.

func init() {
	registerRPC(&rpcKind{
		name:  tachyonKind,
		about: "Tachyon sessions: Session.Listen and Session.Dial, Send and Recv on the intercommunicator",
		serve: serveTachyon,
		dial:  dialTachyon,
	})
}

const (
	tachyonRequestTag = 1
	tachyonReplyTag   = 2
)

// tachyonClose bounds a session's Close.
const tachyonClose = 5 * time.Second

// serveTachyon answers on addr, a goroutine per client, until ctx ends;
// at ThreadMultiple closing the session then ends the clients' receives.
func serveTachyon(ctx context.Context, addr string, h rpcHandler, ready func()) error {
	s, err := mpi.NewSession(mpi.WithStandalone(), mpi.WithName("rpc-server"), mpi.WithThreadLevel(rpcLevel()))
	if err != nil {
		return err
	}
	ln, err := s.Listen(addr)
	if err != nil {
		return errors.Join(err, closeSession(s))
	}
	ready()
	var wg sync.WaitGroup
	for {
		c, err := ln.Accept(ctx)
		if err != nil {
			if ctx.Err() != nil {
				err = nil
			}
			// The clients' goroutines end as their clients go; at
			// ThreadSerialized the session closes only after them.
			ln.Close()
			if rpcLevel() == mpi.ThreadMultiple {
				err = errors.Join(err, closeSession(s))
				wg.Wait()
				return err
			}
			wg.Wait()
			return errors.Join(err, closeSession(s))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			answerTachyon(c, h) // a client that goes ends only its own
		}()
	}
}

// answerTachyon answers one client's requests until a receive or a send
// fails: the client went, or the session closed.
func answerTachyon(c *mpi.Comm, h rpcHandler) error {
	req := make([]byte, rpcMaxSize)
	var rep []byte
	for {
		st, err := c.Recv(req, 0, tachyonRequestTag)
		if err != nil {
			return err
		}
		rep = h(rep[:0], req[:st.Count])
		if err := c.Send(rep, 0, tachyonReplyTag); err != nil {
			return err
		}
	}
}

// tachyonConn is the tachyon kind's client: a session of its own and the
// communicator Dial gave it.
type tachyonConn struct {
	s *mpi.Session
	c *mpi.Comm
}

// rpcThread is -thread as the job gives it: "multiple" leaves the
// sessions at ThreadMultiple; anything else makes them ThreadSerialized,
// as the job benchmark's ranks are by default: the client's one
// goroutine calls alone, and each of the server's goroutines alone on its
// client's connection (and the server closes its session only once they
// have ended).
var rpcThread string

// rpcLevel is the thread level rpcThread asks for.
func rpcLevel() mpi.ThreadLevel {
	if rpcThread == "multiple" {
		return mpi.ThreadMultiple
	}
	return mpi.ThreadSerialized
}

func dialTachyon(ctx context.Context, addr string) (rpcConn, error) {
	s, err := mpi.NewSession(mpi.WithStandalone(), mpi.WithName("rpc-client"), mpi.WithThreadLevel(rpcLevel()))
	if err != nil {
		return nil, err
	}
	c, err := s.Dial(ctx, addr)
	if err != nil {
		return nil, errors.Join(err, closeSession(s))
	}
	return &tachyonConn{s: s, c: c}, nil
}

func (t *tachyonConn) call(req, rep []byte) (int, error) {
	if err := t.c.Send(req, 0, tachyonRequestTag); err != nil {
		return 0, err
	}
	st, err := t.c.Recv(rep, 0, tachyonReplyTag)
	if errors.Is(err, mpi.ErrTruncate) {
		return 0, fmt.Errorf("%w: %w", errReplyTooLong, err)
	}
	if err != nil {
		return 0, err
	}
	return st.Count, nil
}

func (t *tachyonConn) close() error { return closeSession(t.s) }

// closeSession closes s within tachyonClose.
func closeSession(s *mpi.Session) error {
	ctx, cancel := context.WithTimeout(context.Background(), tachyonClose)
	defer cancel()
	return s.Close(ctx)
}
