package mpi1

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"
)

func (p *Proc) defaultCCID() int { return p.g.ctxs[0].id }

// TestModes: a synchronized send matches only a synchronized receive
// (even one with wildcards), returns only once the receive has stored
// the message, and is never pending for PROBE; blocking and nonblocking
// sends and receives match in any combination.
func TestModes(t *testing.T) { both(t, 2, scModes) }

var scModes = scenario("modes", func(p *Proc) error {
	buf := make([]byte, 16)
	if p.GETID(p.ALL()) == 0 {
		if err := first(
			expect(p, "CSEND blocking A", p.CSEND(Blocking, []byte("A"), 1, 5, 1), 1, 0),
		); err != nil {
			return err
		}
		t0 := time.Now()
		if err := expect(p, "CSEND synchronized B", p.CSEND(Synchronized, []byte("BB"), 1, 5, 2), 2, 0); err != nil {
			return err
		}
		if d := time.Since(t0); d < 20*time.Millisecond {
			return fmt.Errorf("the synchronized send returned after %v, before its receive (posted after 30ms)", d)
		}
		id := p.CSEND(Nonblocking, []byte("CCC"), 1, 6, 3)
		if id <= 0 {
			return fmt.Errorf("nonblocking CSEND = %d, ERROR %d", id, p.ERROR())
		}
		return first(
			expect(p, "WAIT", p.WAIT(id), 3, 0),
			expect(p, "SSEND synchronized", p.SSEND(Synchronized, []byte("D.D.D"), 1, 7, 1, 2, 3), 3, 0),
			expect(p, "GSEND synchronized", p.GSEND(Synchronized, []byte("xEyEE"), 1, 8, []int{1, 2}, []int{1, 3}, 2), 3, 0),
		)
	}
	// Only the blocking message is pending: the synchronized one is not.
	for p.PROBE(0, 5) < 0 {
		time.Sleep(time.Millisecond)
	}
	if err := expect(p, "INFOL after PROBE", p.INFOL(), 1, 0); err != nil {
		return err
	}
	time.Sleep(30 * time.Millisecond)
	if err := first(
		expect(p, "PROBE", p.PROBE(-1, -1), 1, 0),
		expect(p, "CRECV synchronized", p.CRECV(Synchronized, buf, -1, -1, 16), 2, 0),
	); err != nil {
		return err
	}
	if string(buf[:2]) != "BB" || p.INFOS() != 0 || p.INFOT() != 5 || p.INFOL() != 2 {
		return fmt.Errorf("synchronized receive got %q from %d type %d", buf[:2], p.INFOS(), p.INFOT())
	}
	if err := expect(p, "CRECV blocking", p.CRECV(Blocking, buf, 0, 5, 16), 1, 0); err != nil {
		return err
	}
	if buf[0] != 'A' {
		return fmt.Errorf("blocking receive got %q", buf[:1])
	}
	// A nonblocking send matches a blocking receive.
	if err := expect(p, "CRECV of a nonblocking send", p.CRECV(Blocking, buf, 0, 6, 16), 3, 0); err != nil {
		return err
	}
	if string(buf[:3]) != "CCC" {
		return fmt.Errorf("got %q", buf[:3])
	}
	// Synchronized variants: strided into a contiguous-ish layout,
	// gathered into blocks.
	b := make([]byte, 6)
	if err := expect(p, "SRECV synchronized", p.SRECV(Synchronized, b, 0, 7, 1, 2, 3), 3, 0); err != nil {
		return err
	}
	if string(b) != "D\x00D\x00D\x00" {
		return fmt.Errorf("SRECV stored %q", b)
	}
	g := make([]byte, 4)
	if err := expect(p, "GRECV synchronized", p.GRECV(Synchronized, g, 0, 8, []int{2, 1}, []int{2, 0}, 2), 3, 0); err != nil {
		return err
	}
	if string(g) != "E\x00EE" {
		return fmt.Errorf("GRECV stored %q", g)
	}
	return nil
})

// TestTruncation: a message longer than maxlen (or than an SRECV's or
// GRECV's blocks) is cut to it, the bytes past it untouched, and the
// receive, WAIT, STATS and INFOL report the whole length.
func TestTruncation(t *testing.T) { both(t, 2, scTruncation) }

var scTruncation = scenario("truncation", func(p *Proc) error {
	msg := []byte("0123456789")
	if p.GETID(p.ALL()) == 0 {
		for typ := range 6 {
			if p.CSEND(Blocking, msg, 1, typ, 10) != 10 {
				return fmt.Errorf("CSEND: ERROR %d", p.ERROR())
			}
		}
		return nil
	}
	fresh := func() []byte { return bytes.Repeat([]byte{'.'}, 12) }
	buf := fresh()
	if err := expect(p, "CRECV blocking", p.CRECV(Blocking, buf, 0, 0, 4), 10, 0); err != nil {
		return err
	}
	if string(buf) != "0123........" || p.INFOL() != 10 {
		return fmt.Errorf("CRECV stored %q, INFOL %d", buf, p.INFOL())
	}
	buf = fresh()
	id := p.CRECV(Nonblocking, buf, 0, 1, 3)
	if err := expect(p, "WAIT", p.WAIT(id), 10, 0); err != nil {
		return err
	}
	if string(buf) != "012........." || p.INFOL() != 10 || p.INFOT() != 1 {
		return fmt.Errorf("nonblocking CRECV stored %q, INFOL %d", buf, p.INFOL())
	}
	buf = fresh()
	id = p.CRECV(Nonblocking, buf, 0, 2, 0)
	n := -1
	for n < 0 && p.ERROR() == 0 {
		n = p.STATS(id)
	}
	if err := expect(p, "STATS", n, 10, 0); err != nil {
		return err
	}
	buf = fresh()
	if err := expect(p, "CRECV whole", p.CRECV(Blocking, buf, 0, 3, 12), 10, 0); err != nil {
		return err
	}
	buf = fresh()
	if err := expect(p, "SRECV", p.SRECV(Blocking, buf, 0, 4, 2, 3, 2), 10, 0); err != nil {
		return err
	}
	if string(buf) != "01.23......." {
		return fmt.Errorf("SRECV stored %q", buf)
	}
	buf = fresh()
	if err := expect(p, "GRECV", p.GRECV(Blocking, buf, 0, 5, []int{1, 2}, []int{11, 0}, 2), 10, 0); err != nil {
		return err
	}
	if string(buf) != "12.........0" {
		return fmt.Errorf("GRECV stored %q", buf)
	}
	return nil
})

// TestNonblocking: STATS is -1 (error status 0) until a receive
// completes, then its length, and the message ID is then spent; CANCEL
// of a receive nothing matched leaves its buffer untouched and the
// message for the next receive; a short message fills an SRECV's first
// blocks.
func TestNonblocking(t *testing.T) { both(t, 2, scNonblocking) }

var scNonblocking = scenario("nonblocking", func(p *Proc) error {
	var go1 [1]byte
	if p.GETID(p.ALL()) == 1 {
		// Wait for the go, then send type 2, then the type 9 message that
		// a cancelled receive must not have taken, then a short one.
		if p.CRECV(Blocking, go1[:], 0, 1, 1) != 0 {
			return fmt.Errorf("go: ERROR %d", p.ERROR())
		}
		return first(
			expect(p, "CSEND 2", p.CSEND(Nonblocking, []byte("late"), 0, 2, 4), p.next, 0),
			expect(p, "WAIT", p.WAIT(p.next), 4, 0),
			expect(p, "CSEND 9", p.CSEND(Blocking, []byte("nine"), 0, 9, 4), 4, 0),
			expect(p, "CSEND short", p.CSEND(Blocking, []byte("abc"), 0, 3, 3), 3, 0),
		)
	}
	buf := []byte("....")
	id := p.CRECV(Nonblocking, buf, 1, 2, 4)
	if id <= 0 {
		return fmt.Errorf("CRECV nonblocking = %d, ERROR %d", id, p.ERROR())
	}
	if err := expect(p, "STATS before the send", p.STATS(id), -1, 0); err != nil {
		return err
	}
	cancelled := []byte("keep")
	cid := p.CRECV(Nonblocking, cancelled, 1, 9, 4)
	if err := first(
		expect(p, "CANCEL", p.CANCEL(cid), 0, 0),
		fails(p, "STATS after CANCEL", p.STATS(cid), ErrMSGID),
		fails(p, "CANCEL again", p.CANCEL(cid), ErrMSGID),
	); err != nil {
		return err
	}
	if string(cancelled) != "keep" {
		return fmt.Errorf("the cancelled receive's buffer holds %q", cancelled)
	}
	if p.CSEND(Blocking, nil, 1, 1, 0) != 0 {
		return fmt.Errorf("go: ERROR %d", p.ERROR())
	}
	n := -1
	for n < 0 && p.ERROR() == 0 {
		n = p.STATS(id)
	}
	if err := expect(p, "STATS", n, 4, 0); err != nil {
		return err
	}
	if string(buf) != "late" || p.INFOS() != 1 || p.INFOT() != 2 || p.INFOL() != 4 {
		return fmt.Errorf("got %q from %d type %d length %d", buf, p.INFOS(), p.INFOT(), p.INFOL())
	}
	if err := first(
		fails(p, "STATS spent", p.STATS(id), ErrMSGID),
		fails(p, "WAIT spent", p.WAIT(id), ErrMSGID),
		fails(p, "WAIT(0)", p.WAIT(0), ErrMSGID),
		expect(p, "CRECV type 9", p.CRECV(Blocking, buf, 1, 9, 4), 4, 0),
	); err != nil {
		return err
	}
	if string(buf) != "nine" {
		return fmt.Errorf("type 9 got %q", buf)
	}
	s := []byte("......")
	if err := expect(p, "SRECV short", p.SRECV(Blocking, s, 1, 3, 2, 3, 2), 3, 0); err != nil {
		return err
	}
	if string(s) != "ab.c.." {
		return fmt.Errorf("short SRECV stored %q", s)
	}
	return nil
})

// TestCancelSend: a nonblocking send CANCEL withdraws is never received;
// CANCEL returns 0 and spends the ID whether or not it took effect.
func TestCancelSend(t *testing.T) { both(t, 2, scCancelSend) }

var scCancelSend = scenario("cancel-send", func(p *Proc) error {
	big := make([]byte, 1<<20) // past any eager limit: it waits for its receive
	if p.GETID(p.ALL()) == 0 {
		id := p.CSEND(Nonblocking, big, 1, 4, len(big))
		if err := first(
			expect(p, "CANCEL send", p.CANCEL(id), 0, 0),
			fails(p, "WAIT cancelled", p.WAIT(id), ErrMSGID),
			expect(p, "SYNCG", p.SYNCG(p.ALL()), 0, 0),
			expect(p, "CSEND after", p.CSEND(Blocking, []byte("z"), 1, 4, 1), 1, 0),
		); err != nil {
			return err
		}
		return nil
	}
	if err := expect(p, "SYNCG", p.SYNCG(p.ALL()), 0, 0); err != nil {
		return err
	}
	n := p.CRECV(Blocking, big, 0, 4, len(big))
	if n != 1 || big[0] != 'z' {
		return fmt.Errorf("the first type-4 message has %d bytes (ERROR %d): the cancelled send arrived", n, p.ERROR())
	}
	return nil
})

// TestP2PErrors: every send and receive routine's argument errors.
func TestP2PErrors(t *testing.T) { both(t, 2, scP2PErrors) }

var scP2PErrors = scenario("p2p-errors", func(p *Proc) error {
	buf := make([]byte, 8)
	nl, il := []int{2}, []int{0}
	for _, mode := range []string{"fast", "", "Blocking"} {
		if err := first(
			fails(p, "CSEND "+mode, p.CSEND(mode, buf, 1, 0, 1), ErrMode),
			fails(p, "CRECV "+mode, p.CRECV(mode, buf, 1, 0, 1), ErrMode),
			fails(p, "SSEND "+mode, p.SSEND(mode, buf, 1, 0, 1, 1, 1), ErrMode),
			fails(p, "SRECV "+mode, p.SRECV(mode, buf, 1, 0, 1, 1, 1), ErrMode),
			fails(p, "GSEND "+mode, p.GSEND(mode, buf, 1, 0, nl, il, 1), ErrMode),
			fails(p, "GRECV "+mode, p.GRECV(mode, buf, 1, 0, nl, il, 1), ErrMode),
		); err != nil {
			return err
		}
	}
	return first(
		fails(p, "CSEND beyond buf", p.CSEND(Blocking, buf, 1, 0, 9), ErrBufSize),
		fails(p, "CSEND negative length", p.CSEND(Blocking, buf, 1, 0, -1), ErrBufSize),
		fails(p, "CRECV beyond buf", p.CRECV(Blocking, buf, 1, 0, 9), ErrBufSize),
		fails(p, "CSEND to -1", p.CSEND(Blocking, buf, -1, 0, 1), ErrPID),
		fails(p, "CSEND to 2", p.CSEND(Nonblocking, buf, 2, 0, 1), ErrPID),
		fails(p, "CRECV from 2", p.CRECV(Blocking, buf, 2, 0, 1), ErrPID),
		fails(p, "CRECV from -2", p.CRECV(Blocking, buf, -2, 0, 1), ErrPID),
		fails(p, "PROBE from 5", p.PROBE(5, 0), ErrPID),
		fails(p, "PROBE from -3", p.PROBE(-3, 0), ErrPID),
		fails(p, "CSEND type -1", p.CSEND(Blocking, buf, 1, -1, 1), ErrType),
		fails(p, "CSEND type MaxInt", p.CSEND(Blocking, buf, 1, math.MaxInt, 1), ErrType),
		fails(p, "CRECV type -2", p.CRECV(Blocking, buf, 1, -2, 1), ErrType),
		fails(p, "PROBE type -2", p.PROBE(-1, -2), ErrType),
		fails(p, "SSEND type -1", p.SSEND(Blocking, buf, 1, -1, 1, 1, 1), ErrType),
		fails(p, "SSEND stride -1", p.SSEND(Blocking, buf, 1, 0, 1, -1, 1), ErrStride),
		fails(p, "SSEND lenblk -1", p.SSEND(Blocking, buf, 1, 0, -1, 1, 1), ErrBlockSize),
		fails(p, "SSEND nblks -1", p.SSEND(Blocking, buf, 1, 0, 1, 1, -1), ErrItemSize),
		fails(p, "SSEND beyond buf", p.SSEND(Blocking, buf, 1, 0, 2, 4, 3), ErrBufSize),
		fails(p, "SRECV overlapping", p.SRECV(Blocking, buf, 1, 0, 2, 1, 2), ErrStride),
		fails(p, "SRECV from -2", p.SRECV(Blocking, buf, -2, 0, 1, 1, 1), ErrPID),
		fails(p, "GSEND nblks 2", p.GSEND(Blocking, buf, 1, 0, nl, il, 2), ErrItemSize),
		fails(p, "GSEND negative length", p.GSEND(Blocking, buf, 1, 0, []int{-1}, il, 1), ErrBlockSize),
		fails(p, "GSEND negative offset", p.GSEND(Blocking, buf, 1, 0, nl, []int{-1}, 1), ErrBufSize),
		fails(p, "GSEND beyond buf", p.GSEND(Blocking, buf, 1, 0, nl, []int{7}, 1), ErrBufSize),
		fails(p, "GRECV overlapping", p.GRECV(Blocking, buf, 1, 0, []int{2, 2}, []int{0, 1}, 2), ErrItemSize),
		fails(p, "GRECV type -5", p.GRECV(Blocking, buf, 1, -5, nl, il, 1), ErrType),
		expect(p, "PROBE nothing", p.PROBE(-1, -1), -1, 0),
		expect(p, "INFOL after an empty PROBE", p.INFOL(), -1, 0),
		expect(p, "INFOS after an empty PROBE", p.INFOS(), -1, 0),
		expect(p, "INFOT after an empty PROBE", p.INFOT(), -1, 0),
		expect(p, "SYNCG", p.SYNCG(p.ALL()), 0, 0),
	)
})

// TestFreed: after Free every routine that communicates fails with
// ErrCommFailed and Cause says why.
func TestFreed(t *testing.T) { both(t, 1, scFreed) }

var scFreed = scenario("freed", func(p *Proc) error {
	if err := p.Free(); err != nil {
		return err
	}
	if err := fails(p, "CSEND after Free", p.CSEND(Blocking, nil, 0, 0, 0), ErrCommFailed); err != nil {
		return err
	}
	if p.Cause() == nil {
		return errors.New("Cause is nil after ErrCommFailed")
	}
	if err := first(
		fails(p, "PROBE after Free", p.PROBE(-1, -1), ErrCommFailed),
		fails(p, "SYNCG after Free", p.SYNCG(p.ALL()), ErrCommFailed),
	); err != nil {
		return err
	}
	_, err := New(nil)
	if err == nil {
		return errors.New("New(nil) succeeded")
	}
	return errFreed
})

// TestLayoutsNonblocking: SSEND and GSEND in nonblocking mode, completed
// by STATS (which then returns the bytes sent), received by SRECV and
// GRECV in nonblocking mode and completed by WAIT; and a contiguous
// message received into blocks and the other way round.
func TestLayoutsNonblocking(t *testing.T) { both(t, 2, scLayoutsNonblocking) }

var scLayoutsNonblocking = scenario("layouts-nonblocking", func(p *Proc) error {
	if p.GETID(p.ALL()) == 0 {
		src := []byte("a-b-c-d")
		s1 := p.SSEND(Nonblocking, src, 1, 1, 1, 2, 4)
		s2 := p.GSEND(Nonblocking, src, 1, 2, []int{1, 1}, []int{6, 0}, 2)
		if s1 <= 0 || s2 <= 0 {
			return fmt.Errorf("nonblocking SSEND/GSEND: ERROR %d", p.ERROR())
		}
		for _, c := range []struct{ id, n int }{{s1, 4}, {s2, 2}} {
			n := -1
			for n < 0 && p.ERROR() == 0 {
				n = p.STATS(c.id)
			}
			if err := expect(p, "STATS of a send", n, c.n, 0); err != nil {
				return err
			}
		}
		return first(
			expect(p, "CSEND to blocks", p.CSEND(Blocking, []byte("xyz"), 1, 3, 3), 3, 0),
			expect(p, "SSEND to contiguous", p.SSEND(Blocking, src, 1, 4, 1, 2, 4), 4, 0),
		)
	}
	a, b := make([]byte, 8), make([]byte, 3)
	r1 := p.SRECV(Nonblocking, a, 0, 1, 1, 2, 4)
	r2 := p.GRECV(Nonblocking, b, 0, 2, []int{1, 1}, []int{2, 0}, 2)
	if r1 <= 0 || r2 <= 0 {
		return fmt.Errorf("nonblocking SRECV/GRECV: ERROR %d", p.ERROR())
	}
	if err := first(
		expect(p, "WAIT GRECV", p.WAIT(r2), 2, 0),
		expect(p, "INFOT", p.INFOT(), 2, 0),
		expect(p, "WAIT SRECV", p.WAIT(r1), 4, 0),
	); err != nil {
		return err
	}
	if string(a) != "a\x00b\x00c\x00d\x00" || string(b) != "a\x00d" {
		return fmt.Errorf("SRECV stored %q, GRECV %q", a, b)
	}
	c := make([]byte, 6)
	if err := expect(p, "GRECV of a contiguous message", p.GRECV(Blocking, c, 0, 3, []int{2, 1}, []int{4, 0}, 2), 3, 0); err != nil {
		return err
	}
	d := make([]byte, 4)
	if err := expect(p, "CRECV of a strided message", p.CRECV(Blocking, d, 0, 4, 4), 4, 0); err != nil {
		return err
	}
	if string(c) != "z\x00\x00\x00xy" || string(d) != "abcd" {
		return fmt.Errorf("GRECV stored %q, CRECV %q", c, d)
	}
	return nil
})
