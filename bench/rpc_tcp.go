package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// The tcp kind: what a Go team writes by hand, a net.TCPConn with
// TCP_NODELAY (Go's default) carrying each request and each reply as a
// 4-byte little-endian length and the bytes. Each side writes a frame
// with one write and reads through a bufio.Reader, so that a frame that
// arrives whole costs one read, as the anchor's client reading the
// request's length at once does.

func init() {
	registerRPC(&rpcKind{
		name:  "tcp",
		about: "a net.TCPConn, TCP_NODELAY, a 4-byte length before each request and reply",
		serve: serveTCP,
		dial:  dialTCP,
	})
}

// tcpHeader is the length before each frame.
const tcpHeader = 4

// serveTCP answers on addr, a goroutine per connection, until ctx ends.
func serveTCP(ctx context.Context, addr string, h rpcHandler, ready func()) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	var (
		mu     sync.Mutex
		conns  = map[net.Conn]bool{}
		wg     sync.WaitGroup
		closed bool
	)
	stop := context.AfterFunc(ctx, func() {
		ln.Close()
		mu.Lock()
		closed = true
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	defer stop()
	ready()
	for {
		c, err := ln.Accept()
		if err != nil {
			wg.Wait()
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		mu.Lock()
		if closed {
			mu.Unlock()
			c.Close()
			continue
		}
		conns[c] = true
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			answerTCP(c, h) // a client that goes or errs ends only its connection
			mu.Lock()
			delete(conns, c)
			mu.Unlock()
			c.Close()
		}()
	}
}

// answerTCP answers the requests of one connection until it ends or a
// frame is malformed.
func answerTCP(c net.Conn, h rpcHandler) error {
	r := bufio.NewReaderSize(c, 64<<10)
	var req, out []byte
	for {
		var hdr [tcpHeader]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return err
		}
		n := int(binary.LittleEndian.Uint32(hdr[:]))
		if n > rpcMaxSize {
			return fmt.Errorf("a request of %d bytes, over %d", n, rpcMaxSize)
		}
		req = grow(req, n)
		if _, err := io.ReadFull(r, req); err != nil {
			return err
		}
		out = h(append(out[:0], hdr[:]...), req)
		binary.LittleEndian.PutUint32(out, uint32(len(out)-tcpHeader))
		if _, err := c.Write(out); err != nil {
			return err
		}
	}
}

// tcpConn is the tcp kind's client.
type tcpConn struct {
	c     net.Conn
	r     *bufio.Reader
	frame []byte // the header and the request, one write
}

func dialTCP(ctx context.Context, addr string) (rpcConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &tcpConn{c: c, r: bufio.NewReaderSize(c, 64<<10)}, nil
}

func (t *tcpConn) call(req, rep []byte) (int, error) {
	t.frame = append(binary.LittleEndian.AppendUint32(t.frame[:0], uint32(len(req))), req...)
	if _, err := t.c.Write(t.frame); err != nil {
		return 0, err
	}
	var hdr [tcpHeader]byte
	if _, err := io.ReadFull(t.r, hdr[:]); err != nil {
		return 0, err
	}
	n := int(binary.LittleEndian.Uint32(hdr[:]))
	if n > len(rep) {
		return 0, fmt.Errorf("%w: %d bytes", errReplyTooLong, n)
	}
	if _, err := io.ReadFull(t.r, rep[:n]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, err
	}
	return n, nil
}

func (t *tcpConn) close() error { return t.c.Close() }

// grow returns b resliced to n bytes, reallocated if it is too small.
func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}
