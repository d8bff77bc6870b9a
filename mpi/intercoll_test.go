package mpi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// The collectives on intercommunicators against references computed
// here: groups of 1×1, 1×3, 3×1, 2×3 and 3×4 ranks (split from one
// connection between a world of 3 and a world of 4, local ranks in
// reverse order of the world's), every root on both sides; and one
// connection between jobs of processes started apart.

// interGid names rank r of side s (0 accepted, 1 connected) in the
// data: its vectors are vec(interGid(s, r), n).
func interGid(s, r int) int { return 100*s + r }

// interShapes are the groups' sizes, accepting side first, split from a
// connection of 3 and 4 ranks.
var interShapes = [][2]int{{1, 1}, {1, 3}, {3, 1}, {2, 3}, {3, 4}}

// TestIntercommCollectives runs every collective on intercommunicators of
// every shape, then the error cases.
func TestIntercommCollectives(t *testing.T) {
	run := func(side int) func(inter *Comm) error {
		return func(inter *Comm) error {
			// Every split first, so that a check that fails leaves
			// waiting only the ranks of its own intercommunicator.
			me := inter.Rank()
			ics := make([]*Comm, len(interShapes))
			var errs []error
			for i, sh := range interShapes {
				color := Undefined
				if me < sh[side] {
					color = 0
				}
				var err error
				ics[i], err = inter.Split(color, -me) // reversed: local ranks differ from the world's
				if err != nil {
					return err
				}
			}
			for i, ic := range ics {
				if ic == nil {
					continue
				}
				sh := interShapes[i]
				for _, m := range []int{0, 4, 20} {
					if err := interCollCheck(ic, side, m); err != nil {
						errs = append(errs, fmt.Errorf("%d×%d, m %d: %w", sh[0], sh[1], m, err))
					}
				}
				if err := interNonblockingCheck(ic, side); err != nil {
					errs = append(errs, fmt.Errorf("%d×%d: %w", sh[0], sh[1], err))
				}
				errs = append(errs, ic.Free())
			}
			return errors.Join(append(errs, interErrorsCheck(inter))...)
		}
	}
	twoWorlds(t, 3, 4, run(0), run(1))
}

// interCollCheck runs every collective on intercommunicator c, whose
// local group is side side, with vectors of m elements (a multiple of 4),
// and checks the results.
func interCollCheck(c *Comm, side, m int) error {
	// A result that is wrong is noted and the calls go on, so that
	// every rank stays in step and the test fails rather than hangs.
	var bad error
	note := func(format string, args ...any) {
		if bad == nil {
			bad = fmt.Errorf(format, args...)
		}
	}
	nl, me, other := c.Size(), c.Rank(), 1-side
	nr, err := c.RemoteSize()
	if err != nil {
		return err
	}
	sizeOf := func(s int) int {
		if s == side {
			return nl
		}
		return nr
	}
	sumOf := func(s, i int) int64 { // the reduction of side s's vectors
		var v int64
		for r := range sizeOf(s) {
			v += val(interGid(s, r), i)
		}
		return v
	}
	matOf := func(s int) []uint64 { // side s's vectors by matmul, in rank order
		want := matvec(interGid(s, sizeOf(s)-1), m)
		for r := sizeOf(s) - 2; r >= 0; r-- {
			matmul(matvec(interGid(s, r), m), want)
		}
		return want
	}
	const junk = -7
	filled := func(n int) []int64 {
		b := make([]int64, n)
		for i := range b {
			b[i] = junk
		}
		return b
	}
	isJunk := func(b []int64) bool {
		for _, x := range b {
			if x != junk {
				return false
			}
		}
		return true
	}
	mine := vec(interGid(side, me), m)
	// vcounts are rank j of side s's counts in the v-forms, and revDispls
	// the displacements that lay the blocks out in reverse order with a
	// gap of one.
	vcount := func(s, j int) int { return (j+s)%3 + m/4 }
	revDispls := func(counts []int) ([]int, int) {
		d := make([]int, len(counts))
		at := 1
		for j := len(counts) - 1; j >= 0; j-- {
			d[j] = at
			at += counts[j] + 1
		}
		return d, at
	}

	for rs := range 2 {
		for root := range sizeOf(rs) {
			arg := root
			if rs == side {
				arg = ProcNull
				if me == root {
					arg = Root
				}
			}
			where := fmt.Sprintf("root %d of side %d (passing %d)", root, rs, arg)
			rootVec := vec(interGid(rs, root), m)

			// Bcast
			buf := filled(m)
			if arg == Root {
				copy(buf, rootVec)
			}
			if err := Bcast(c, buf, arg); err != nil {
				note("Bcast %s: %w", where, err)
			}
			if arg == ProcNull && !isJunk(buf) || arg != ProcNull && !slices.Equal(buf, rootVec) {
				note("Bcast %s: got %v", where, buf)
			}

			// Reduce, Sum and matmul; Root and ProcNull pass a nil send.
			out, send := filled(m), mine
			if arg < 0 {
				send = nil
			}
			if err := Reduce(c, send, out, Sum, arg); err != nil {
				note("Reduce %s: %w", where, err)
			}
			switch arg {
			case Root:
				for i := range out {
					if out[i] != sumOf(other, i) {
						note("Reduce %s: [%d] = %d, want %d", where, i, out[i], sumOf(other, i))
					}
				}
			default:
				if !isJunk(out) {
					note("Reduce %s: recv written at a rank that is not the root", where)
				}
			}
			mo, ms := make([]uint64, m), matvec(interGid(side, me), m)
			if arg < 0 {
				ms = nil
			}
			if err := Reduce(c, ms, mo, NewReduceOp(matmul, false), arg); err != nil {
				note("Reduce matmul %s: %w", where, err)
			}
			if arg == Root && !slices.Equal(mo, matOf(other)) {
				note("Reduce matmul %s: wrong result", where)
			}

			// Gather and Scatter: blocks of m elements, one per remote rank.
			var g []int64
			if arg == Root {
				g = filled(nr * m)
			}
			send = mine
			if arg < 0 {
				send = nil
			}
			if err := Gather(c, send, g, arg); err != nil {
				note("Gather %s: %w", where, err)
			}
			if arg == Root {
				for j := range nr {
					if !slices.Equal(g[j*m:(j+1)*m], vec(interGid(other, j), m)) {
						note("Gather %s: block %d wrong", where, j)
					}
				}
			}
			var sc []int64
			if arg == Root {
				for j := range nr {
					sc = append(sc, vec(500+j, m)...)
				}
			}
			rb := filled(m)
			if arg < 0 {
				rb = nil
			}
			if err := Scatter(c, sc, rb, arg); err != nil {
				note("Scatter %s: %w", where, err)
			}
			if arg >= 0 && !slices.Equal(rb, vec(500+me, m)) {
				note("Scatter %s: got %v", where, rb)
			}

			// Gatherv and Scatterv: remote rank j's block of vcount
			// elements, laid out in reverse order at the root.
			var counts, displs []int
			var gv []int64
			if arg == Root {
				for j := range nr {
					counts = append(counts, vcount(other, j))
				}
				var n int
				displs, n = revDispls(counts)
				gv = filled(n)
			}
			send = []int64{}
			if arg >= 0 {
				send = vec(interGid(side, me), vcount(side, me))
			}
			if err := Gatherv(c, send, gv, counts, displs, arg); err != nil {
				note("Gatherv %s: %w", where, err)
			}
			if arg == Root {
				for j := range nr {
					if !slices.Equal(gv[displs[j]:displs[j]+counts[j]], vec(interGid(other, j), counts[j])) {
						note("Gatherv %s: block %d wrong", where, j)
					}
				}
			}
			sv := gv
			if arg == Root {
				for j := range nr {
					copy(sv[displs[j]:], vec(600+j, counts[j]))
				}
			}
			rv := []int64{}
			if arg >= 0 {
				rv = filled(vcount(side, me))
			}
			if err := Scatterv(c, sv, counts, displs, rv, arg); err != nil {
				note("Scatterv %s: %w", where, err)
			}
			if arg >= 0 && !slices.Equal(rv, vec(600+me, len(rv))) {
				note("Scatterv %s: got %v", where, rv)
			}
		}
	}

	// Allreduce: each group gets the other's reduction.
	out := filled(m)
	if err := Allreduce(c, mine, out, Sum); err != nil {
		note("Allreduce: %w", err)
	}
	for i := range out {
		if out[i] != sumOf(other, i) {
			note("Allreduce: [%d] = %d, want %d", i, out[i], sumOf(other, i))
		}
	}
	mo := make([]uint64, m)
	if err := Allreduce(c, matvec(interGid(side, me), m), mo, NewReduceOp(matmul, false)); err != nil {
		note("Allreduce matmul: %w", err)
	}
	if !slices.Equal(mo, matOf(other)) {
		note("Allreduce matmul: wrong result")
	}

	// Allgather: side s sends m+s elements, so the two groups' blocks
	// differ in size.
	bs := func(s int) int { return m + s }
	ag := filled(nr * bs(other))
	if err := Allgather(c, vec(interGid(side, me), bs(side)), ag); err != nil {
		note("Allgather: %w", err)
	}
	for j := range nr {
		b := bs(other)
		if !slices.Equal(ag[j*b:(j+1)*b], vec(interGid(other, j), b)) {
			note("Allgather: block %d wrong: %v", j, ag)
		}
	}
	// Allgatherv, packed and at displacements.
	counts := make([]int, nr)
	for j := range counts {
		counts[j] = vcount(other, j)
	}
	displs, n := revDispls(counts)
	for _, d := range [][]int{nil, displs} {
		agv := filled(n)
		if err := Allgatherv(c, vec(interGid(side, me), vcount(side, me)), agv, counts, d); err != nil {
			note("Allgatherv (displs %v): %w", d, err)
		}
		at := 0
		for j := range nr {
			if d != nil {
				at = d[j]
			}
			if !slices.Equal(agv[at:at+counts[j]], vec(interGid(other, j), counts[j])) {
				note("Allgatherv (displs %v): block %d wrong: %v", d, j, agv)
			}
			at += counts[j]
		}
	}

	// Alltoall: side s sends blocks of m/4+s+1 elements; the block from
	// rank a of side s to remote rank b holds vec(1000*(s+1)+10*a+b).
	ab := func(s int) int { return m/4 + s + 1 }
	blockOf := func(s, a, b, n int) []int64 { return vec(1000*(s+1)+10*a+b, n) }
	var as []int64
	for j := range nr {
		as = append(as, blockOf(side, me, j, ab(side))...)
	}
	ar := filled(nr * ab(other))
	if err := Alltoall(c, as, ar); err != nil {
		note("Alltoall: %w", err)
	}
	for j := range nr {
		b := ab(other)
		if !slices.Equal(ar[j*b:(j+1)*b], blockOf(other, j, me, b)) {
			note("Alltoall: block from %d wrong: %v", j, ar[j*b:(j+1)*b])
		}
	}
	// Alltoallv: from rank a of side s to remote rank b, (a+2b+s)%3
	// elements; received in reverse order.
	tc := func(s, a, b int) int { return (a + 2*b + s) % 3 }
	scounts, rcounts := make([]int, nr), make([]int, nr)
	avs := []int64{}
	for j := range nr {
		scounts[j], rcounts[j] = tc(side, me, j), tc(other, j, me)
		avs = append(avs, blockOf(side, me, j, scounts[j])...)
	}
	rdispls, rn := revDispls(rcounts)
	avr := filled(rn)
	if err := Alltoallv(c, avs, scounts, nil, avr, rcounts, rdispls); err != nil {
		note("Alltoallv: %w", err)
	}
	for j := range nr {
		if !slices.Equal(avr[rdispls[j]:rdispls[j]+rcounts[j]], blockOf(other, j, me, rcounts[j])) {
			note("Alltoallv: block from %d wrong", j)
		}
	}

	// ReduceScatterBlock: both groups reduce t = 2·nl·nr·(m/4+1)
	// elements; each scatters the other's over its ranks, in blocks of
	// t/nl.
	k := m/4 + 1
	t := 2 * nl * nr * k
	rsb := filled(t / nl)
	if err := ReduceScatterBlock(c, vec(interGid(side, me), t), rsb, Sum); err != nil {
		note("ReduceScatterBlock: %w", err)
	}
	for i := range rsb {
		if w := sumOf(other, me*len(rsb)+i); rsb[i] != w {
			note("ReduceScatterBlock: [%d] = %d, want %d", i, rsb[i], w)
		}
	}
	// ReduceScatter: the same vectors, in blocks of 1 or 2 elements and
	// the rest to local rank 0.
	rc := make([]int, nl)
	rest := t
	for i := 1; i < nl; i++ {
		rc[i] = i%2 + 1
		rest -= rc[i]
	}
	rc[0] = rest
	rs := filled(rc[me])
	if err := ReduceScatter(c, vec(interGid(side, me), t), rs, rc, Sum); err != nil {
		note("ReduceScatter: %w", err)
	}
	at := 0
	for i := range me {
		at += rc[i]
	}
	for i := range rs {
		if w := sumOf(other, at+i); rs[i] != w {
			note("ReduceScatter: [%d] = %d, want %d", i, rs[i], w)
		}
	}
	if err := c.Barrier(); err != nil {
		note("Barrier: %w", err)
	}
	return bad
}

// interNonblockingCheck runs nonblocking, persistent, Context and Layout
// forms on intercommunicator c of side side, several in flight at once.
func interNonblockingCheck(c *Comm, side int) error {
	// A result that is wrong is noted and the calls go on, so that
	// every rank stays in step and the test fails rather than hangs.
	var bad error
	note := func(format string, args ...any) {
		if bad == nil {
			bad = fmt.Errorf(format, args...)
		}
	}
	nl, me, other := c.Size(), c.Rank(), 1-side
	nr, _ := c.RemoteSize()
	const m = 8
	var wantSum [m]int64
	for r := range nr {
		for i := range wantSum {
			wantSum[i] += val(interGid(other, r), i)
		}
	}
	// An Ibcast from each side's rank 0, an Iallreduce, an Iallgather and
	// an Ibarrier in flight together.
	bcasts := [2][]int64{make([]int64, m), make([]int64, m)}
	var reqs []*Request
	for rs := range 2 {
		arg := 0
		if rs == side {
			arg = ProcNull
			if me == 0 {
				arg = Root
				copy(bcasts[rs], vec(interGid(rs, 0), m))
			}
		}
		r, err := Ibcast(c, bcasts[rs], arg)
		if err != nil {
			note("Ibcast from side %d: %w", rs, err)
		}
		reqs = append(reqs, r)
	}
	ar := make([]int64, m)
	r, err := Iallreduce(c, vec(interGid(side, me), m), ar, Sum)
	if err != nil {
		note("Iallreduce: %w", err)
	}
	reqs = append(reqs, r)
	ag := make([]int64, nr*m)
	if r, err = Iallgather(c, vec(interGid(side, me), m), ag); err != nil {
		note("Iallgather: %w", err)
	}
	reqs = append(reqs, r)
	if r, err = c.Ibarrier(); err != nil {
		note("Ibarrier: %w", err)
	}
	reqs = append(reqs, r)
	if _, err := Waitall(reqs); err != nil {
		note("Waitall: %w", err)
	}
	for rs := range 2 {
		if (rs != side || me == 0) && !slices.Equal(bcasts[rs], vec(interGid(rs, 0), m)) {
			note("Ibcast from side %d: got %v", rs, bcasts[rs])
		}
	}
	if !slices.Equal(ar, wantSum[:]) {
		note("Iallreduce: got %v, want %v", ar, wantSum)
	}
	for j := range nr {
		if !slices.Equal(ag[j*m:(j+1)*m], vec(interGid(other, j), m)) {
			note("Iallgather: block %d wrong", j)
		}
	}

	// AllreduceInit, started twice on new data.
	send, recv := make([]int64, m), make([]int64, m)
	p, err := AllreduceInit(c, send, recv, Sum)
	if err != nil {
		note("AllreduceInit: %w", err)
	}
	for round := range 2 {
		for i := range send {
			send[i] = int64(round + me + i)
		}
		if err := p.Start(); err != nil {
			return err
		}
		if _, err := p.Wait(); err != nil {
			note("AllreduceInit round %d: %w", round, err)
		}
		for i := range recv {
			if w := int64(nr*(round+i) + nr*(nr-1)/2); recv[i] != w {
				note("AllreduceInit round %d: [%d] = %d, want %d", round, i, recv[i], w)
			}
		}
	}
	if err := p.Free(); err != nil {
		return err
	}

	// AllreduceContext under a deadline that does not pass.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := AllreduceContext(ctx, c, vec(interGid(side, me), m), ar, Sum); err != nil || !slices.Equal(ar, wantSum[:]) {
		note("AllreduceContext: %v, %v", ar, err)
	}

	// BcastLayout, GatherLayout and ScatterLayout from side 0's last
	// rank: every other byte of a buffer of 2·m.
	l, err := Strided(m, 1, 2)
	if err != nil {
		return err
	}
	rootRank := nlOf(side, 0, nl, nr) - 1
	arg := rootRank
	if side == 0 {
		arg = ProcNull
		if me == rootRank {
			arg = Root
		}
	}
	b := make([]byte, 2*m)
	if arg == Root {
		for i := range m {
			b[2*i] = byte(10 + i)
		}
	}
	if err := c.BcastLayout(b, l, arg); err != nil {
		note("BcastLayout: %w", err)
	}
	for i := range 2 * m {
		want := byte(0)
		if i%2 == 0 && arg != ProcNull {
			want = byte(10 + i/2)
		}
		if b[i] != want {
			note("BcastLayout (passing %d): byte %d is %d, want %d", arg, i, b[i], want)
		}
	}
	g := make([]byte, 2*m*nr)
	gl, err := Strided(m*nr, 1, 2)
	if err != nil {
		return err
	}
	mineB := make([]byte, 2*m)
	for i := range m {
		mineB[2*i] = byte(me*m + i)
	}
	if err := c.GatherLayout(mineB, l, g, gl, arg); err != nil {
		note("GatherLayout: %w", err)
	}
	if arg == Root {
		for i := range m * nr {
			if g[2*i] != byte(i) || g[2*i+1] != 0 {
				note("GatherLayout: %v", g)
			}
		}
	}
	// Scatter back what was gathered, plus one.
	for i := range m * nr {
		g[2*i]++
	}
	sb := make([]byte, 2*m)
	if err := c.ScatterLayout(g, gl, sb, l, arg); err != nil {
		note("ScatterLayout: %w", err)
	}
	for i := range 2 * m {
		want := byte(0)
		if i%2 == 0 && arg >= 0 {
			want = byte(me*m + i/2 + 1)
		}
		if sb[i] != want {
			note("ScatterLayout (passing %d): byte %d is %d, want %d", arg, i, sb[i], want)
		}
	}
	if err := c.Barrier(); err != nil {
		note("Barrier: %w", err)
	}
	return bad
}

// nlOf returns the size of side s seen from side side, of local and
// remote sizes nl and nr.
func nlOf(side, s, nl, nr int) int {
	if s == side {
		return nl
	}
	return nr
}

// interErrorsCheck: wrong roots, Scan and Exscan, in place, and counts
// for the wrong group, each found before anything is sent; the
// intercommunicator stays usable.
func interErrorsCheck(c *Comm) error {
	var bad error
	note := func(format string, args ...any) {
		if bad == nil {
			bad = fmt.Errorf(format, args...)
		}
	}
	nr, _ := c.RemoteSize()
	buf := make([]int64, 4)
	for _, root := range []int{nr, -4, Undefined, AnySource} {
		if err := Bcast(c, buf, root); !errors.Is(err, ErrRoot) {
			note("Bcast root %d: %v, want ErrRoot", root, err)
		}
		if err := Reduce(c, buf, buf, Sum, root); !errors.Is(err, ErrRoot) {
			note("Reduce root %d: %v, want ErrRoot", root, err)
		}
		if _, err := Igather(c, buf, buf, root); !errors.Is(err, ErrRoot) {
			note("Igather root %d: %v, want ErrRoot", root, err)
		}
	}
	out := make([]int64, 4)
	if err := Scan(c, buf, out, Sum); !errors.Is(err, ErrComm) {
		note("Scan: %v, want ErrComm", err)
	}
	if err := Exscan(c, buf, out, Sum); !errors.Is(err, ErrComm) {
		note("Exscan: %v, want ErrComm", err)
	}
	if _, err := Iscan(c, buf, out, Sum); !errors.Is(err, ErrComm) {
		note("Iscan: %v, want ErrComm", err)
	}
	if err := Allreduce(c, InPlace[int64](), out, Sum); !errors.Is(err, ErrBuffer) {
		note("Allreduce in place: %v, want ErrBuffer", err)
	}
	if err := Alltoall(c, nil, make([]int64, nr)); !errors.Is(err, ErrBuffer) {
		note("Alltoall in place: %v, want ErrBuffer", err)
	}
	if err := Reduce(c, nil, out, Sum, 0); !errors.Is(err, ErrBuffer) {
		note("Reduce in place at a sending rank: %v, want ErrBuffer", err)
	}
	if err := Gatherv(c, []int64{}, out, make([]int, nr+1), nil, Root); !errors.Is(err, ErrCount) {
		note("Gatherv with counts for %d ranks of a remote group of %d: %v, want ErrCount", nr+1, nr, err)
	}
	if err := Gather(c, []int64{}, make([]int64, nr+1), Root); nr > 1 && !errors.Is(err, ErrCount) {
		note("Gather at Root, recv not RemoteSize() blocks: %v, want ErrCount", err)
	}
	// On an intracommunicator Root is no root.
	if m, err := c.Merge(false); err != nil {
		return err
	} else if err := Bcast(m, buf, Root); !errors.Is(err, ErrRoot) {
		note("Bcast on an intracommunicator with Root: %v, want ErrRoot", err)
	} else if err := m.Free(); err != nil {
		return err
	}
	// Nothing was sent: a collective across still works.
	if err := Allreduce(c, []int64{1}, out[:1], Sum); err != nil || out[0] != int64(nr) {
		note("Allreduce after the errors: %d, %v", out[0], err)
	}
	return bad
}

// TestIntercommCollectiveAllocs: in steady state the blocking
// collectives on an intercommunicator (2×3) allocate nothing, the v-forms
// (built again at every call) included.
func TestIntercommCollectiveAllocs(t *testing.T) {
	skipCollAllocs(t)
	run := func(side int) func(*Comm) error {
		return func(c *Comm) error {
			nr, err := c.RemoteSize()
			if err != nil {
				return err
			}
			small, out := []float64{1}, make([]float64, 1)
			// 1 KiB, not more: a wait long enough to park boxes its
			// waiter (progress/wait.go), which the network transport's
			// larger messages meet now and then.
			big, bigOut := make([]float64, 128), make([]float64, 128)
			ag := make([]float64, nr)
			counts := make([]int, nr)
			for i := range counts {
				counts[i] = 1
			}
			a2s, a2 := make([]float64, nr*64), make([]float64, nr*64)
			root := 0 // side 0's rank 0 is the root
			if side == 0 {
				root = ProcNull
				if c.Rank() == 0 {
					root = Root
				}
			}
			cases := []struct {
				name string
				fn   func() error
			}{
				{"Allreduce8", func() error { return Allreduce(c, small, out, Sum) }},
				{"Allreduce1K", func() error { return Allreduce(c, big, bigOut, Sum) }},
				{"Bcast8", func() error { return Bcast(c, small, root) }},
				{"Reduce1K", func() error { return Reduce(c, big, bigOut, Max, root) }},
				{"Allgatherv", func() error { return Allgatherv(c, small, ag, counts, nil) }},
				{"Alltoall", func() error { return Alltoall(c, a2s, a2) }},
			}
			for _, k := range cases {
				allocs, err := leastAllocs(100, k.fn)
				if err != nil {
					return fmt.Errorf("%s: %w", k.name, err)
				}
				if allocs != 0 && side == 0 && c.Rank() == 0 {
					t.Errorf("%s allocates %v times a call", k.name, allocs)
				}
			}
			return nil
		}
	}
	twoWorlds(t, 2, 3, run(0), run(1))
}

// Two jobs of processes started apart, connected (the scenarios
// intercoll-accept and intercoll-connect), run the collectives across.
var scInterAccept = scenario("intercoll-accept", func(w *Comm) error {
	inter, err := acceptService(w)
	if err != nil {
		return err
	}
	return interJob(inter, 0)
})

var scInterConnect = scenario("intercoll-connect", func(w *Comm) error {
	inter, err := connectService(w)
	if err != nil {
		return err
	}
	return interJob(inter, 1)
})

func interJob(inter *Comm, side int) error {
	if err := interCollCheck(inter, side, 8); err != nil {
		return err
	}
	if err := interNonblockingCheck(inter, side); err != nil {
		return err
	}
	return inter.Disconnect()
}

// TestIntercommCollectivesJobs: a job of 2 processes and one of 3,
// started apart, connect and run every collective across.
func TestIntercommCollectivesJobs(t *testing.T) {
	serviceJobs(t, "intercoll", [2]int{2, 3}, [2]string{scInterAccept, scInterConnect})
}
