package mpi1

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/tachyon-hpc/tachyon/cvar"
)

// TestTable1 is the seed's Table 1: ALL's eight processes partitioned
// into PIDs 0-3 and 4-7, each group's context pushed, GCPIDs 0-3 in
// each; "if in the second group process 1 is required to send a message
// to process 3, ... the communication actually takes place between
// processes 5 and 7". Messages inside a group context stay inside it,
// process numbers beyond the group are GCPID errors, and POPG brings
// back the root's numbering and its pending message.
func TestTable1(t *testing.T) { both(t, 8, scTable1) }

var scTable1 = scenario("table1", func(p *Proc) error {
	pid := p.GETID(p.ALL())
	root := p.ALL()
	gid := p.PARTG(root, pid/4)
	if gid <= 0 || gid == root {
		return fmt.Errorf("PARTG = %d (ERROR %d)", gid, p.ERROR())
	}
	if err := first(
		expect(p, "GETID(gid)", p.GETID(gid), pid%4, 0),
		expect(p, "GETID(ALL)", p.GETID(root), pid, 0),
	); err != nil {
		return err
	}
	members := make([]int, 8)
	if err := expect(p, "INFOG", p.INFOG(gid, 8, members), 4, 0); err != nil {
		return err
	}
	if want := []int{pid / 4 * 4, pid/4*4 + 1, pid/4*4 + 2, pid/4*4 + 3}; !slices.Equal(members[:4], want) {
		return fmt.Errorf("INFOG's PIDs %v, want %v", members[:4], want)
	}
	// A message sent at the root, which the group context must not see:
	// process 1 to 3, type 3, the same numbers as inside.
	outer := []byte("root")
	if pid == 1 && p.CSEND(Blocking, outer, 3, 3, 4) != 4 {
		return errors.New("root send failed")
	}
	if err := expect(p, "PUSHG", p.PUSHG(gid), 4, 0); err != nil {
		return err
	}
	if p.ALL() != gid {
		return fmt.Errorf("ALL = %d after PUSHG(%d)", p.ALL(), gid)
	}
	if err := first(
		expect(p, "GETID(ALL) inside", p.GETID(p.ALL()), pid%4, 0),
		expect(p, "INFOG(ALL) inside", p.INFOG(p.ALL(), 8, members), 4, 0),
	); err != nil {
		return err
	}
	if !slices.Equal(members[:4], []int{0, 1, 2, 3}) {
		return fmt.Errorf("INFOG(ALL) inside lists %v, want the GCPIDs 0..3", members[:4])
	}
	if err := fails(p, "GETID(root ALL) inside", p.GETID(root), ErrGID); err != nil {
		return err
	}
	me := p.GETID(p.ALL())
	msg := []byte{byte(pid)}
	switch me {
	case 1:
		if err := expect(p, "CSEND to GCPID 3", p.CSEND(Blocking, msg, 3, 3, 1), 1, 0); err != nil {
			return err
		}
	case 3:
		buf := make([]byte, 8)
		if err := expect(p, "CRECV", p.CRECV(Blocking, buf, -1, -1, 8), 1, 0); err != nil {
			return err
		}
		// The message came from PID pid-2 (5 to 7 in the second group),
		// known here as GCPID 1.
		if buf[0] != byte(pid-2) || p.INFOS() != 1 || p.INFOT() != 3 || p.INFOL() != 1 {
			return fmt.Errorf("PID %d got PID %d's message from GCPID %d type %d, want PID %d's from GCPID 1 type 3",
				pid, buf[0], p.INFOS(), p.INFOT(), pid-2)
		}
		// The root's message to PID 3 (GCPID 3 in the first group) is
		// not pending here.
		if err := expect(p, "PROBE inside", p.PROBE(-1, -1), -1, 0); err != nil {
			return err
		}
	}
	if err := first(
		fails(p, "CSEND to GCPID 4", p.CSEND(Blocking, msg, 4, 0, 1), ErrGCPID),
		fails(p, "CRECV from GCPID -2", p.CRECV(Blocking, msg, -2, 0, 1), ErrGCPID),
		expect(p, "POPG", p.POPG(), root, 0),
	); err != nil {
		return err
	}
	if p.ALL() != root {
		return fmt.Errorf("ALL = %d after POPG, want %d", p.ALL(), root)
	}
	if pid == 3 {
		buf := make([]byte, 8)
		if err := expect(p, "CRECV at root", p.CRECV(Blocking, buf, -1, -1, 8), 4, 0); err != nil {
			return err
		}
		if string(buf[:4]) != "root" || p.INFOS() != 1 {
			return fmt.Errorf("root message %q from %d", buf[:4], p.INFOS())
		}
	}
	if err := fails(p, "CSEND to PID 8", p.CSEND(Blocking, msg, 8, 0, 1), ErrPID); err != nil {
		return err
	}
	return expect(p, "FREEG", p.FREEG(gid), 0, 0)
})

// TestMatrix is the seed's Figures 1 and 2 (the spectral transform): a
// P x Q = 2 x 3 mesh of processes split into row groups and column
// groups with PARTG, each phase run in its group's context by a routine
// written for processes 0..n-1 (here a sum to GCPID 0 and back), and a
// row of a matrix stored by columns sent with SSEND and received with
// SRECV, as section 3.1 describes.
func TestMatrix(t *testing.T) { both(t, 6, scMatrix) }

const meshP, meshQ = 2, 3

var scMatrix = scenario("matrix", func(p *Proc) error {
	pid := p.GETID(p.ALL())
	root := p.ALL()
	myRow, myCol := pid/meshQ, pid%meshQ
	rowGrp := p.PARTG(p.ALL(), myRow)
	colGrp := p.PARTG(p.ALL(), myCol)
	if rowGrp < 0 || colGrp < 0 {
		return fmt.Errorf("PARTG: ERROR %d", p.ERROR())
	}
	if err := expect(p, "PUSHG(ROWGRP)", p.PUSHG(rowGrp), meshQ, 0); err != nil {
		return err
	}
	if p.GETID(p.ALL()) != myCol {
		return fmt.Errorf("GCPID %d in the row group, want %d", p.GETID(p.ALL()), myCol)
	}
	rowSum, err := sumAll(p, pid)
	if err != nil {
		return err
	}
	if err := expect(p, "POPG", p.POPG(), root, 0); err != nil {
		return err
	}
	if err := expect(p, "PUSHG(COLGRP)", p.PUSHG(colGrp), meshP, 0); err != nil {
		return err
	}
	colSum, err := sumAll(p, pid)
	if err != nil {
		return err
	}
	if err := expect(p, "POPG", p.POPG(), root, 0); err != nil {
		return err
	}
	wantRow := 3*myRow*meshQ + 3 // the PIDs of a row: r*Q, r*Q+1, r*Q+2
	wantCol := 2*myCol + meshQ   // of a column: c, c+Q
	if rowSum != wantRow || colSum != wantCol {
		return fmt.Errorf("PID %d: row sum %d, column sum %d; want %d, %d", pid, rowSum, colSum, wantRow, wantCol)
	}
	// A 4x3 matrix of bytes stored by columns: send its row 2 (every 4th
	// byte from byte 2) to the next process, which stores it as row 1 of
	// its 3x3 matrix stored by columns (every 3rd byte from byte 1).
	a := make([]byte, 12)
	for i := range a {
		a[i] = byte(10*pid + i)
	}
	n := p.INFOG(p.ALL(), 0, nil)
	id := p.SSEND(Nonblocking, a[2:], (pid+1)%n, 5, 1, 4, 3)
	if id <= 0 {
		return fmt.Errorf("SSEND nonblocking = %d, ERROR %d", id, p.ERROR())
	}
	b := make([]byte, 9)
	if err := expect(p, "SRECV", p.SRECV(Blocking, b[1:], (pid+n-1)%n, 5, 1, 3, 3), 3, 0); err != nil {
		return err
	}
	from := (pid + n - 1) % n
	if want := []byte{0, byte(10*from + 2), 0, 0, byte(10*from + 6), 0, 0, byte(10*from + 10), 0}; !slices.Equal(b, want) {
		return fmt.Errorf("SRECV stored %v, want %v", b, want)
	}
	return first(expect(p, "WAIT", p.WAIT(id), 3, 0), expect(p, "FREEG row", p.FREEG(rowGrp), 0, 0),
		expect(p, "FREEG col", p.FREEG(colGrp), 0, 0))
})

// sumAll is a routine written for processes 0..n-1 of ALL: each sends x
// to process 0, which adds them and sends the sum back.
func sumAll(p *Proc, x int) (int, error) {
	var buf [8]byte
	n := p.INFOG(p.ALL(), 0, nil)
	if p.GETID(p.ALL()) != 0 {
		buf[0] = byte(x)
		if p.CSEND(Blocking, buf[:], 0, 7, 1) != 1 || p.CRECV(Blocking, buf[:], 0, 8, 8) != 1 {
			return 0, fmt.Errorf("sumAll: ERROR %d", p.ERROR())
		}
		return int(buf[0]), nil
	}
	sum := x
	for range n - 1 {
		if p.CRECV(Blocking, buf[:], -1, 7, 8) != 1 {
			return 0, fmt.Errorf("sumAll: ERROR %d", p.ERROR())
		}
		sum += int(buf[0])
	}
	buf[0] = byte(sum)
	for i := 1; i < n; i++ {
		if p.CSEND(Blocking, buf[:], i, 8, 1) != 1 {
			return 0, fmt.Errorf("sumAll: ERROR %d", p.ERROR())
		}
	}
	return sum, nil
}

// TestDEFNGMembers: DEFNG is called by the listed processes alone, as the
// seed asks. On 4 processes, {0,1} and {3,2} form at the same time, each
// by its own members; then {0,1} forms again while 1 goes on to form
// {1,2} with 2, which may start before 1 is done with {0,1}, and 3 calls
// no DEFNG at all. Each group carries a message between its two members
// inside its pushed context.
func TestDEFNGMembers(t *testing.T) { both(t, 4, scDEFNGMembers) }

var scDEFNGMembers = scenario("defng-members", func(p *Proc) error {
	pid := p.GETID(p.ALL())
	pair := []int{0, 1}
	if pid >= 2 {
		pair = []int{3, 2}
	}
	if err := exchangeIn(p, "first pair", pair); err != nil {
		return err
	}
	if pid <= 1 {
		if err := exchangeIn(p, "{0,1} again", []int{0, 1}); err != nil {
			return err
		}
	}
	if pid == 1 || pid == 2 {
		if err := exchangeIn(p, "{1,2}", []int{1, 2}); err != nil {
			return err
		}
	}
	return expect(p, "SYNCG(ALL)", p.SYNCG(p.ALL()), 0, 0)
})

// exchangeIn has the calling member of plist (two PIDs) make the group
// with DEFNG, push it, swap its GCPID with the other member's, and pop
// and free it.
func exchangeIn(p *Proc, what string, plist []int) error {
	pid := p.GETID(p.ALL())
	g := p.DEFNG(len(plist), plist)
	if g < 0 {
		return fmt.Errorf("%s: DEFNG: ERROR %d (%v)", what, p.ERROR(), p.Cause())
	}
	me := slices.Index(plist, pid)
	if err := first(
		expect(p, what+": GETID", p.GETID(g), me, 0),
		expect(p, what+": PUSHG", p.PUSHG(g), 2, 0),
	); err != nil {
		return err
	}
	var out, in [1]byte
	out[0] = byte(pid)
	if me == 0 {
		if err := first(
			expect(p, what+": CSEND", p.CSEND(Blocking, out[:], 1, 3, 1), 1, 0),
			expect(p, what+": CRECV", p.CRECV(Blocking, in[:], 1, 3, 1), 1, 0),
		); err != nil {
			return err
		}
	} else if err := first(
		expect(p, what+": CRECV", p.CRECV(Blocking, in[:], 0, 3, 1), 1, 0),
		expect(p, what+": CSEND", p.CSEND(Blocking, out[:], 0, 3, 1), 1, 0),
	); err != nil {
		return err
	}
	if want := plist[1-me]; int(in[0]) != want {
		return fmt.Errorf("%s: got PID %d, want %d", what, in[0], want)
	}
	p.POPG()
	return expect(p, what+": FREEG", p.FREEG(g), 0, 0)
}

// TestGroups: DEFNG in plist's order, called by the listed processes
// alone while another makes a group of its own; nested group
// contexts (PARTG inside a pushed context, pushed in turn), ALL following
// each push, groups of one context unknown in another, SYNCG, negative
// PARTG keys, and each routine's errors.
func TestGroups(t *testing.T) { both(t, 3, scGroups) }

var scGroups = scenario("groups", func(p *Proc) error {
	pid := p.GETID(p.ALL())
	root := p.ALL()
	plist := []int{2, 0}
	if err := first(
		fails(p, "DEFNG beyond plist", p.DEFNG(3, plist), ErrBufSize),
		fails(p, "DEFNG with PID 3", p.DEFNG(2, []int{0, 3}), ErrPID),
		fails(p, "DEFNG twice PID 0", p.DEFNG(2, []int{0, 0}), ErrPID),
	); err != nil {
		return err
	}
	list := make([]int, 3)
	if pid == 1 { // not listed: a group of its own, which it makes alone
		if err := fails(p, "DEFNG by a process not listed", p.DEFNG(2, plist), ErrPID); err != nil {
			return err
		}
		own := p.DEFNG(1, []int{1})
		if own <= 0 {
			return fmt.Errorf("DEFNG of its own: ERROR %d", p.ERROR())
		}
		if err := first(
			expect(p, "GETID of its own", p.GETID(own), 0, 0),
			expect(p, "INFOG of its own", p.INFOG(own, 3, list), 1, 0),
			expect(p, "SYNCG of its own", p.SYNCG(own), 0, 0),
			expect(p, "FREEG", p.FREEG(own), 0, 0),
			fails(p, "FREEG again", p.FREEG(own), ErrGID),
			fails(p, "GETID freed", p.GETID(own), ErrGID),
			fails(p, "FREEG(ALL)", p.FREEG(root), ErrGID),
			fails(p, "POPG at the root", p.POPG(), ErrGroups),
		); err != nil {
			return err
		}
		if list[0] != 1 {
			return fmt.Errorf("INFOG of its own: %v", list[:1])
		}
		return groupsTail(p, root)
	}
	g := p.DEFNG(2, plist)
	if g <= 0 {
		return fmt.Errorf("DEFNG: ERROR %d", p.ERROR())
	}
	if err := first(
		expect(p, "GETID", p.GETID(g), map[int]int{2: 0, 0: 1}[pid], 0),
		expect(p, "INFOG", p.INFOG(g, 3, list), 2, 0),
		fails(p, "INFOG beyond plist", p.INFOG(g, 4, list), ErrBufSize),
		fails(p, "GETID(99)", p.GETID(99), ErrGID),
		expect(p, "SYNCG", p.SYNCG(g), 0, 0),
	); err != nil {
		return err
	}
	if !slices.Equal(list[:2], plist) {
		return fmt.Errorf("INFOG's PIDs %v, want %v", list[:2], plist)
	}
	// An outstanding receive forbids PUSHG; its ID is unknown inside.
	id := p.CRECV(Nonblocking, list2bytes(list), -1, 77, 1)
	if err := fails(p, "PUSHG with a receive pending", p.PUSHG(g), ErrPending); err != nil {
		return err
	}
	if err := expect(p, "CANCEL", p.CANCEL(id), 0, 0); err != nil {
		return err
	}
	if err := expect(p, "PUSHG", p.PUSHG(g), 2, 0); err != nil {
		return err
	}
	if err := first(
		expectNot(p.ALL(), root, g),
		fails(p, "SYNCG(root ALL) inside", p.SYNCG(root), ErrGID),
		fails(p, "FREEG(g) inside g", p.FREEG(g), ErrGID),
	); err != nil {
		return err
	}
	// Nested: partition the pushed group by a negative key into one
	// subgroup, push it, and the numbering is the subgroup's.
	sub := p.PARTG(p.ALL(), -5-pid)
	if sub < 0 {
		return fmt.Errorf("PARTG inside: ERROR %d", p.ERROR())
	}
	if err := first(
		expect(p, "INFOG(sub)", p.INFOG(sub, 0, nil), 1, 0),
		expect(p, "PUSHG(sub)", p.PUSHG(sub), 1, 0),
		expect(p, "GETID(ALL) in sub", p.GETID(p.ALL()), 0, 0),
		fails(p, "CSEND to GCPID 1 in sub", p.CSEND(Blocking, nil, 1, 0, 0), ErrGCPID),
		expect(p, "POPG from sub", p.POPG(), g, 0),
		expect(p, "POPG from g", p.POPG(), root, 0),
		fails(p, "PUSHG(sub) at the root", p.PUSHG(sub), ErrGID),
		expect(p, "FREEG", p.FREEG(g), 0, 0),
		fails(p, "GETID after FREEG", p.GETID(g), ErrGID),
	); err != nil {
		return err
	}
	return groupsTail(p, root)
})

// groupsTail is the part of scGroups every process runs: POPG refused
// while a send is pending in the group context, and a message ID spent
// and then unknown.
func groupsTail(p *Proc, root int) error {
	all := p.PARTG(p.ALL(), 0)
	if err := expect(p, "PUSHG(all)", p.PUSHG(all), 3, 0); err != nil {
		return err
	}
	me := p.GETID(p.ALL())
	id := p.CSEND(Nonblocking, []byte{byte(me)}, (me+1)%3, 1, 1)
	if err := fails(p, "POPG with a send pending", p.POPG(), ErrPending); err != nil {
		return err
	}
	var b [1]byte
	return first(
		expect(p, "CRECV", p.CRECV(Blocking, b[:], -1, 1, 1), 1, 0),
		expect(p, "WAIT", p.WAIT(id), 1, 0),
		expect(p, "POPG", p.POPG(), root, 0),
		fails(p, "WAIT spent outside", p.WAIT(id), ErrMSGID),
		expect(p, "SYNCG(ALL)", p.SYNCG(root), 0, 0),
	)
}

// TestLimits: PUSHG beyond mpi1_max_group_depth is error status 12, and
// NEWC or PUSHC beyond mpi1_max_contexts 11.
func TestLimits(t *testing.T) { both(t, 1, scLimits) }

var scLimits = scenario("limits", func(p *Proc) error {
	for name, v := range map[string]string{"mpi1_max_group_depth": "1", "mpi1_max_contexts": "3"} {
		if err := cvar.Set(name, v); err != nil {
			return err
		}
	}
	defer cvar.Set("mpi1_max_group_depth", "64")
	defer cvar.Set("mpi1_max_contexts", "1024")
	c1, c2 := p.NEWC(), p.NEWC()
	if c1 < 0 || c2 < 0 {
		return fmt.Errorf("NEWC: ERROR %d", p.ERROR())
	}
	if err := first(
		fails(p, "a third NEWC", p.NEWC(), ErrContexts),
		expect(p, "PUSHC", p.PUSHC(c1), 0, 0),
		expect(p, "PUSHC", p.PUSHC(c2), 0, 0),
		fails(p, "a third PUSHC", p.PUSHC(c1), ErrContexts),
		expect(p, "POPC", p.POPC(), c1, 0),
		expect(p, "POPC", p.POPC(), p.defaultCCID(), 0),
		expect(p, "PUSHG 1 deep", p.PUSHG(p.ALL()), 1, 0),
		fails(p, "PUSHG 2 deep", p.PUSHG(p.ALL()), ErrGroups),
		expect(p, "POPG", p.POPG(), p.ALL(), 0),
	); err != nil {
		return err
	}
	return nil
})

func expectNot(all, root, g int) error {
	if all != g || all == root {
		return fmt.Errorf("ALL = %d after PUSHG(%d)", all, g)
	}
	return nil
}

func list2bytes(l []int) []byte { return make([]byte, len(l)) }
