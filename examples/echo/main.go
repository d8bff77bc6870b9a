// Command echo is a Tachyon service and its client, two processes started
// on their own that find each other by address: the server listens, the
// client dials, sends requests and checks every reply.
//
//	go run ./examples/echo -listen 127.0.0.1:7000
//	go run ./examples/echo -connect 127.0.0.1:7000 -n 10000 -size 64
//
// The client prints "echo ok N" and the round trip's p50 and p99, and
// exits 0 if every reply came back whole and in order. The server serves
// any number of clients, one goroutine each, until SIGINT or SIGTERM; a
// client that goes away (or is killed) ends its goroutine, not the
// server. On one host the two talk through shared memory, across hosts
// over the network (AF_XDP, or UDP where AF_XDP cannot be had).
//
// docs/services.md explains the sessions, listen and dial it uses.
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/tachyon-hpc/tachyon/mpi"
)

// Tags of the protocol: a request, answered with the same bytes; and the
// client's goodbye, which ends its connection.
const (
	tagRequest = 1
	tagBye     = 2
)

func main() {
	listen := flag.String("listen", "", "serve on this address (host:port)")
	connect := flag.String("connect", "", "send requests to the server at this address")
	n := flag.Int("n", 1000, "client: requests to send")
	size := flag.Int("size", 64, "client: bytes a request (at least 8)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch {
	case *listen != "" && *connect == "":
		err = serve(ctx, *listen)
	case *connect != "" && *listen == "":
		err = client(ctx, *connect, *n, *size)
	default:
		fmt.Fprintln(os.Stderr, "echo: give -listen ADDR or -connect ADDR")
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "echo:", err)
		os.Exit(1)
	}
}

// serve answers every client that connects to addr until ctx ends.
func serve(ctx context.Context, addr string) error {
	s, err := mpi.NewSession(mpi.WithName("echo-server"))
	if err != nil {
		return err
	}
	defer closeSession(s)
	ln, err := s.Listen(addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	fmt.Println("echo: listening on", ln.Addr())
	for {
		c, err := ln.Accept(ctx)
		if errors.Is(err, mpi.ErrCanceled) {
			return nil // SIGINT or SIGTERM
		}
		if err != nil {
			return err
		}
		go func() {
			if err := answer(c); err != nil {
				slog.Info("echo: a client went away", "err", err)
			}
			c.Disconnect()
		}()
	}
}

// answer echoes one client's requests until its goodbye. RecvMessage
// takes each whole, whatever its size, in a pooled buffer.
func answer(c *mpi.Comm) error {
	for {
		m, err := c.RecvMessage(context.Background(), 0, mpi.AnyTag)
		if err != nil {
			return err
		}
		if m.Tag == tagBye {
			m.Release()
			return nil
		}
		err = c.Send(m.Data, 0, tagRequest)
		m.Release()
		if err != nil {
			return err
		}
	}
}

// client sends n requests of size bytes to the server at addr, checks
// each reply, and prints the round trip's percentiles.
func client(ctx context.Context, addr string, n, size int) error {
	if size < 8 || n < 1 {
		return fmt.Errorf("-n %d -size %d: want at least one request of at least 8 bytes", n, size)
	}
	s, err := mpi.NewSession(mpi.WithName("echo-client"))
	if err != nil {
		return err
	}
	defer closeSession(s)
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	c, err := s.Dial(dctx, addr)
	cancel()
	if err != nil {
		return err
	}
	req, rep := make([]byte, size), make([]byte, size)
	rtt := make([]time.Duration, n)
	for i := range n {
		// A request: its number, then bytes that follow from it.
		binary.LittleEndian.PutUint64(req, uint64(i))
		for j := 8; j < size; j++ {
			req[j] = byte(i + j)
		}
		t := time.Now()
		if err := c.Send(req, 0, tagRequest); err != nil {
			return fmt.Errorf("request %d: %w", i, err)
		}
		st, err := c.Recv(rep, 0, tagRequest)
		if err != nil {
			return fmt.Errorf("reply %d: %w", i, err)
		}
		rtt[i] = time.Since(t)
		if st.Count != size || !slices.Equal(rep, req) {
			return fmt.Errorf("reply %d: %d bytes, not the request's %d bytes (reply number %d)", i, st.Count, size, binary.LittleEndian.Uint64(rep))
		}
	}
	if err := c.Send(nil, 0, tagBye); err != nil {
		return err
	}
	if err := c.Disconnect(); err != nil {
		return err
	}
	slices.Sort(rtt)
	fmt.Printf("echo ok %d\n", n)
	fmt.Printf("round trip of %d bytes: p50 %.2f us, p99 %.2f us\n", size, us(rtt[n/2]), us(rtt[min(n-1, n*99/100)]))
	return nil
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// closeSession closes s, giving what it sent a second to arrive.
func closeSession(s *mpi.Session) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		slog.Warn("echo: closing the session", "err", err)
	}
}
