package mpi1

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestContexts is the seed's Figure 4, D = AB + C^T on two processes:
// the transpose of C starts in the default context (nonblocking sends),
// MATMUL runs in a context ICC from NEWC with the same types and
// wildcard receives and sees none of the transpose's messages, and
// END_TRANSPOSE receives them after POPC. Then INFOC, POPC at the
// default context, an unknown CCID, and contexts discarded by POPG.
func TestContexts(t *testing.T) { both(t, 2, scContexts) }

var scContexts = scenario("contexts", func(p *Proc) error {
	me := p.GETID(p.ALL())
	other := 1 - me
	def := p.defaultCCID()
	icc := p.NEWC()
	if icc <= 0 || icc == def {
		return fmt.Errorf("NEWC = %d (ERROR %d)", icc, p.ERROR())
	}
	// BEGIN_TRANSPOSE: send my half of C, type 1.
	c := []byte{byte('c'), byte(me)}
	tid := p.CSEND(Nonblocking, c, other, 1, 2)
	if tid <= 0 {
		return fmt.Errorf("BEGIN_TRANSPOSE: ERROR %d", p.ERROR())
	}
	if err := expect(p, "PUSHC(ICC)", p.PUSHC(icc), 0, 0); err != nil {
		return err
	}
	// MATMUL: the same type, wildcard receives.
	if err := expect(p, "SYNCG", p.SYNCG(p.ALL()), 0, 0); err != nil {
		return err
	}
	time.Sleep(5 * time.Millisecond) // the transpose's message is pending by now, most likely
	if err := expect(p, "PROBE in ICC", p.PROBE(-1, -1), -1, 0); err != nil {
		return err
	}
	ab := []byte{byte('m'), byte(me)}
	if err := expect(p, "MATMUL's CSEND", p.CSEND(Blocking, ab, other, 1, 2), 2, 0); err != nil {
		return err
	}
	got := make([]byte, 4)
	if err := expect(p, "MATMUL's CRECV", p.CRECV(Blocking, got, -1, -1, 4), 2, 0); err != nil {
		return err
	}
	if got[0] != 'm' || got[1] != byte(other) {
		return fmt.Errorf("MATMUL received %q: the transpose's message crossed contexts", got[:2])
	}
	list := make([]int, 3)
	if err := first(
		expect(p, "INFOC", p.INFOC(3, list), 2, 0),
		fails(p, "INFOC beyond ilist", p.INFOC(4, list), ErrBufSize),
		fails(p, "PUSHC(999)", p.PUSHC(999), ErrCCID),
		expect(p, "POPC", p.POPC(), def, 0),
		expect(p, "POPC at the default", p.POPC(), def, 0),
	); err != nil {
		return err
	}
	if !slices.Equal(list[:2], []int{def, icc}) {
		return fmt.Errorf("INFOC listed %v, want [%d %d]", list[:2], def, icc)
	}
	// END_TRANSPOSE: the message is still there, in the default context.
	if err := first(
		expect(p, "END_TRANSPOSE's CRECV", p.CRECV(Blocking, got, other, 1, 4), 2, 0),
		expect(p, "END_TRANSPOSE's WAIT", p.WAIT(tid), 2, 0),
	); err != nil {
		return err
	}
	if got[0] != 'c' || got[1] != byte(other) {
		return fmt.Errorf("END_TRANSPOSE received %q", got[:2])
	}
	// A group context has contexts of its own: ICC is unknown inside one,
	// and one made inside is gone after POPG.
	// A receive pending in ICC does not forbid PUSHG from the default
	// context, but its ID is unknown inside.
	if err := expect(p, "PUSHC(ICC)", p.PUSHC(icc), 0, 0); err != nil {
		return err
	}
	rid := p.CRECV(Nonblocking, got, other, 50, 4)
	if err := first(
		expect(p, "POPC", p.POPC(), def, 0),
		expect(p, "PUSHG(ALL)", p.PUSHG(p.ALL()), 2, 0),
		fails(p, "STATS of an outer ID", p.STATS(rid), ErrMSGID),
	); err != nil {
		return err
	}
	inner := p.NEWC()
	if err := first(
		fails(p, "PUSHC(ICC) inside", p.PUSHC(icc), ErrCCID),
		expect(p, "INFOC inside", p.INFOC(0, nil), 2, 0),
		expect(p, "PUSHC(inner)", p.PUSHC(inner), 0, 0),
		expect(p, "POPG with a context pushed", p.POPG(), p.ALL(), 0),
		fails(p, "PUSHC(inner) outside", p.PUSHC(inner), ErrCCID),
		expect(p, "CANCEL of the outer ID", p.CANCEL(rid), 0, 0),
		expect(p, "INFOC outside", p.INFOC(0, nil), 2, 0),
	); err != nil {
		return err
	}
	if p.cc.id != def {
		return fmt.Errorf("after POPG the current context is %d, want the default %d", p.cc.id, def)
	}
	// A context pushed again reuses its communicators.
	return first(
		expect(p, "PUSHC(ICC) again", p.PUSHC(icc), 0, 0),
		expect(p, "CSEND in ICC", p.CSEND(Blocking, ab, other, 2, 2), 2, 0),
		expect(p, "CRECV in ICC", p.CRECV(Blocking, got, other, 2, 4), 2, 0),
		expect(p, "POPC", p.POPC(), def, 0),
	)
})
