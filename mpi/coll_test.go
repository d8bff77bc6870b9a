package mpi

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/internal/testcvar"
)

// The collectives against references computed here: every operation, on
// 1 to 9 ranks, every root, several sizes, with the thresholds at their
// defaults and lowered so that every algorithm runs on small vectors.

// val is rank r's i-th element: small integers, so that float sums are
// exact whatever the order.
func val(r, i int) int64 { return int64((r+1)*1000 + i%977 - 300) }

func vec(r, n int) []int64 {
	v := make([]int64, n)
	for i := range v {
		v[i] = val(r, i)
	}
	return v
}

// matmul is a non-commutative, associative operation on 2x2 matrices of
// uint64 stored in fours: inout = in × inout.
func matmul(in, inout []uint64) {
	for i := 0; i+3 < len(inout); i += 4 {
		a, b := in[i:i+4], inout[i:i+4]
		b[0], b[1], b[2], b[3] = a[0]*b[0]+a[1]*b[2], a[0]*b[1]+a[1]*b[3], a[2]*b[0]+a[3]*b[2], a[2]*b[1]+a[3]*b[3]
	}
}

func matvec(r, n int) []uint64 {
	v := make([]uint64, n)
	for i := range v {
		v[i] = uint64(r*7919+i*31+1) * 0x9E3779B97F4A7C15
	}
	return v
}

// collCheck runs every collective on c with vectors of m elements and
// checks the results; m is a multiple of 4.
func collCheck(c *Comm, m int) error {
	n, r := c.Size(), c.Rank()
	sum := func(lo, hi, i int) int64 {
		var s int64
		for k := lo; k < hi; k++ {
			s += val(k, i)
		}
		return s
	}
	for root := 0; root < n; root++ {
		// Bcast
		buf := make([]int64, m)
		if r == root {
			copy(buf, vec(root, m))
		}
		if err := Bcast(c, buf, root); err != nil {
			return fmt.Errorf("Bcast root %d: %w", root, err)
		}
		if !slices.Equal(buf, vec(root, m)) {
			return fmt.Errorf("Bcast root %d m %d: wrong data", root, m)
		}
		// Reduce, in place at root every other root
		out := make([]int64, m)
		send := vec(r, m)
		if r == root && root%2 == 1 {
			copy(out, send)
			send = nil
		}
		if err := Reduce(c, send, out, Sum, root); err != nil {
			return fmt.Errorf("Reduce root %d: %w", root, err)
		}
		if r == root {
			for i := range out {
				if out[i] != sum(0, n, i) {
					return fmt.Errorf("Reduce root %d m %d: [%d] = %d, want %d", root, m, i, out[i], sum(0, n, i))
				}
			}
		}
		// Reduce, non-commutative
		mo, ms := make([]uint64, m), matvec(r, m)
		if r == root && root%2 == 1 { // in place
			copy(mo, ms)
			ms = nil
		}
		if err := Reduce(c, ms, mo, NewReduceOp(matmul, false), root); err != nil {
			return fmt.Errorf("Reduce matmul root %d: %w", root, err)
		}
		if r == root {
			want := matvec(n-1, m)
			for k := n - 2; k >= 0; k-- {
				matmul(matvec(k, m), want)
			}
			if !slices.Equal(mo, want) {
				return fmt.Errorf("Reduce matmul root %d m %d: wrong result", root, m)
			}
		}
		// Gather
		g := make([]int64, n*m)
		gs := vec(r, m)
		if r == root && root%2 == 1 {
			copy(g[r*m:], gs)
			gs = nil
		}
		if err := Gather(c, gs, g, root); err != nil {
			return fmt.Errorf("Gather root %d: %w", root, err)
		}
		if r == root {
			for k := 0; k < n; k++ {
				if !slices.Equal(g[k*m:(k+1)*m], vec(k, m)) {
					return fmt.Errorf("Gather root %d: block %d wrong", root, k)
				}
			}
		}
		// Gatherv: rank k sends k%3 * m/4 elements, blocks reversed
		counts, displs := make([]int, n), make([]int, n)
		at := 0
		for k := n - 1; k >= 0; k-- {
			counts[k] = (k % 3) * m / 4
			displs[k] = at
			at += counts[k]
		}
		gv := make([]int64, at)
		if err := Gatherv(c, vec(r, counts[r]), gv, counts, displs, root); err != nil {
			return fmt.Errorf("Gatherv root %d: %w", root, err)
		}
		if r == root {
			for k := 0; k < n; k++ {
				if !slices.Equal(gv[displs[k]:displs[k]+counts[k]], vec(k, counts[k])) {
					return fmt.Errorf("Gatherv root %d: block %d wrong", root, k)
				}
			}
		}
		// Scatter, in place at odd roots
		sc := make([]int64, n*m)
		for k := 0; k < n; k++ {
			copy(sc[k*m:], vec(k, m))
		}
		rb := make([]int64, m)
		if r == root && root%2 == 1 {
			rb = nil
		}
		if err := Scatter(c, sc, rb, root); err != nil {
			return fmt.Errorf("Scatter root %d: %w", root, err)
		}
		if rb != nil && !slices.Equal(rb, vec(r, m)) {
			return fmt.Errorf("Scatter root %d: wrong block", root)
		}
		// Scatterv, with Gatherv's layout
		svs := make([]int64, at)
		for k := 0; k < n; k++ {
			copy(svs[displs[k]:], vec(k, counts[k]))
		}
		svr := make([]int64, counts[r])
		if err := Scatterv(c, svs, counts, displs, svr, root); err != nil {
			return fmt.Errorf("Scatterv root %d: %w", root, err)
		}
		if !slices.Equal(svr, vec(r, counts[r])) {
			return fmt.Errorf("Scatterv root %d: wrong block", root)
		}
	}
	// Allreduce: every op on int64, Sum on float64, in place and not.
	for _, op := range []ReduceOp{Sum, Prod, Max, Min, Land, Lor, Lxor, Band, Bor, Bxor} {
		out := make([]int64, m)
		if err := Allreduce(c, vec(r, m), out, op); err != nil {
			return fmt.Errorf("Allreduce %v: %w", op, err)
		}
		want := vec(n-1, m)
		for k := n - 2; k >= 0; k-- {
			kernels[op.kind][dtInt64](AsBytes(vec(k, m)), AsBytes(want))
		}
		if !slices.Equal(out, want) {
			return fmt.Errorf("Allreduce %v m %d: wrong result", op, m)
		}
	}
	f := make([]float64, m)
	for i := range f {
		f[i] = float64(val(r, i))
	}
	if err := Allreduce(c, nil, f, Sum); err != nil {
		return fmt.Errorf("Allreduce in place: %w", err)
	}
	for i := range f {
		if f[i] != float64(sum(0, n, i)) {
			return fmt.Errorf("Allreduce float64 in place m %d: [%d] = %v, want %d", m, i, f[i], sum(0, n, i))
		}
	}
	mo := make([]uint64, m)
	if err := Allreduce(c, matvec(r, m), mo, NewReduceOp(matmul, false)); err != nil {
		return fmt.Errorf("Allreduce matmul: %w", err)
	}
	want := matvec(n-1, m)
	for k := n - 2; k >= 0; k-- {
		matmul(matvec(k, m), want)
	}
	if !slices.Equal(mo, want) {
		return fmt.Errorf("Allreduce matmul m %d: wrong result", m)
	}
	// MaxLoc: pairs (value, rank)
	loc := make([]float64, m)
	for i := 0; i < m; i += 2 {
		loc[i], loc[i+1] = float64((r*37+i)%5), float64(r)
	}
	if err := Allreduce(c, nil, loc, MaxLoc); err != nil {
		return fmt.Errorf("Allreduce MaxLoc: %w", err)
	}
	for i := 0; i < m; i += 2 {
		best, at := math.Inf(-1), -1.0
		for k := 0; k < n; k++ {
			if v := float64((k*37 + i) % 5); v > best {
				best, at = v, float64(k)
			}
		}
		if loc[i] != best || loc[i+1] != at {
			return fmt.Errorf("MaxLoc m %d: pair %d = (%v, %v), want (%v, %v)", m, i/2, loc[i], loc[i+1], best, at)
		}
	}
	// Allgather, in place for odd ranks
	ag := make([]int64, n*m)
	as := vec(r, m)
	if r%2 == 1 {
		copy(ag[r*m:], as)
		as = nil
	}
	if err := Allgather(c, as, ag); err != nil {
		return fmt.Errorf("Allgather: %w", err)
	}
	for k := 0; k < n; k++ {
		if !slices.Equal(ag[k*m:(k+1)*m], vec(k, m)) {
			return fmt.Errorf("Allgather m %d: block %d wrong", m, k)
		}
	}
	// Allgatherv
	counts := make([]int, n)
	total := 0
	for k := range counts {
		counts[k] = (k%3 + 1) * m / 4
		total += counts[k]
	}
	agv := make([]int64, total)
	if err := Allgatherv(c, vec(r, counts[r]), agv, counts, nil); err != nil {
		return fmt.Errorf("Allgatherv: %w", err)
	}
	at := 0
	for k := 0; k < n; k++ {
		if !slices.Equal(agv[at:at+counts[k]], vec(k, counts[k])) {
			return fmt.Errorf("Allgatherv m %d: block %d wrong", m, k)
		}
		at += counts[k]
	}
	// Alltoall: block k of rank r is val(r*n+k, ...); in place on odd ranks
	blk := func(from, to int) []int64 { return vec(from*n+to, m) }
	a2s := make([]int64, n*m)
	for k := 0; k < n; k++ {
		copy(a2s[k*m:], blk(r, k))
	}
	a2r := make([]int64, n*m)
	var a2send []int64
	if r%2 == 1 {
		copy(a2r, a2s)
	} else {
		a2send = a2s
	}
	if err := Alltoall(c, a2send, a2r); err != nil {
		return fmt.Errorf("Alltoall: %w", err)
	}
	for k := 0; k < n; k++ {
		if !slices.Equal(a2r[k*m:(k+1)*m], blk(k, r)) {
			return fmt.Errorf("Alltoall m %d: block from %d wrong", m, k)
		}
	}
	// Alltoallv: rank r sends (r+k)%3 * m/4 elements to rank k.
	cnt := func(from, to int) int { return ((from + to) % 3) * m / 4 }
	sc, rc := make([]int, n), make([]int, n)
	var sv []int64
	rtotal := 0
	for k := 0; k < n; k++ {
		sc[k], rc[k] = cnt(r, k), cnt(k, r)
		sv = append(sv, blk(r, k)[:sc[k]]...)
		rtotal += rc[k]
	}
	if sv == nil {
		sv = []int64{}
	}
	rv := make([]int64, rtotal)
	if err := Alltoallv(c, sv, sc, nil, rv, rc, nil); err != nil {
		return fmt.Errorf("Alltoallv: %w", err)
	}
	at = 0
	for k := 0; k < n; k++ {
		if !slices.Equal(rv[at:at+rc[k]], blk(k, r)[:rc[k]]) {
			return fmt.Errorf("Alltoallv m %d: block from %d wrong", m, k)
		}
		at += rc[k]
	}
	// ReduceScatterBlock and ReduceScatter, commutative and not.
	rsb := make([]int64, m)
	if err := ReduceScatterBlock(c, vec(r, n*m), rsb, Sum); err != nil {
		return fmt.Errorf("ReduceScatterBlock: %w", err)
	}
	for i := range rsb {
		if rsb[i] != sum(0, n, r*m+i) {
			return fmt.Errorf("ReduceScatterBlock m %d: [%d] = %d, want %d", m, i, rsb[i], sum(0, n, r*m+i))
		}
	}
	rcounts := make([]int, n)
	rtot := 0
	for k := range rcounts {
		rcounts[k] = (k % 3) * m / 4
		rtot += rcounts[k]
	}
	off := 0
	for k := 0; k < r; k++ {
		off += rcounts[k]
	}
	rs := make([]int64, rcounts[r])
	if err := ReduceScatter(c, vec(r, rtot), rs, rcounts, Sum); err != nil {
		return fmt.Errorf("ReduceScatter: %w", err)
	}
	for i := range rs {
		if rs[i] != sum(0, n, off+i) {
			return fmt.Errorf("ReduceScatter m %d: wrong [%d]", m, i)
		}
	}
	rsm := make([]uint64, rcounts[r])
	if err := ReduceScatter(c, matvec(r, rtot), rsm, rcounts, NewReduceOp(matmul, false)); err != nil {
		return fmt.Errorf("ReduceScatter matmul: %w", err)
	}
	wm := matvec(n-1, rtot)
	for k := n - 2; k >= 0; k-- {
		matmul(matvec(k, rtot), wm)
	}
	if !slices.Equal(rsm, wm[off:off+rcounts[r]]) {
		return fmt.Errorf("ReduceScatter matmul m %d: wrong result", m)
	}
	// Scan and Exscan, commutative and not.
	sn := make([]int64, m)
	if err := Scan(c, vec(r, m), sn, Sum); err != nil {
		return fmt.Errorf("Scan: %w", err)
	}
	ex := vec(r, m)
	if err := Exscan(c, nil, ex, Sum); err != nil {
		return fmt.Errorf("Exscan: %w", err)
	}
	for i := range sn {
		if sn[i] != sum(0, r+1, i) {
			return fmt.Errorf("Scan m %d: [%d] = %d, want %d", m, i, sn[i], sum(0, r+1, i))
		}
		if r > 0 && ex[i] != sum(0, r, i) {
			return fmt.Errorf("Exscan m %d: [%d] = %d, want %d", m, i, ex[i], sum(0, r, i))
		}
	}
	smm := make([]uint64, m)
	if err := Scan(c, matvec(r, m), smm, NewReduceOp(matmul, false)); err != nil {
		return fmt.Errorf("Scan matmul: %w", err)
	}
	wm = matvec(r, m)
	for k := r - 1; k >= 0; k-- {
		matmul(matvec(k, m), wm)
	}
	if !slices.Equal(smm, wm) {
		return fmt.Errorf("Scan matmul m %d: wrong result", m)
	}
	return nil
}

// lowThresholds sets every algorithm threshold low, so that small
// vectors take the algorithms for large ones, and returns the undo.
func lowThresholds(t testing.TB) func() {
	names := map[string]string{"mpi_coll_bcast_long": "64", "mpi_coll_allreduce_long": "32",
		"mpi_coll_allreduce_ring_min": "128", "mpi_coll_allgather_long": "64", "mpi_coll_alltoall_short": "0",
		"mpi_coll_shm": "false"} // the algorithms by messages, on ranks that share memory too
	var undo []func()
	for name, v := range names {
		old, _ := cvar.Lookup(name)
		def := old.Default()
		if err := cvar.Set(name, v); err != nil {
			t.Fatal(err)
		}
		undo = append(undo, func() { cvar.Set(name, def) })
	}
	return func() {
		for _, u := range undo {
			u()
		}
	}
}

func TestCollectives(t *testing.T) {
	for _, low := range []bool{false, true} {
		for n := 1; n <= 9; n++ {
			t.Run(fmt.Sprintf("low=%v/n=%d", low, n), func(t *testing.T) {
				if low {
					defer lowThresholds(t)()
				}
				err := Run(n, func(c *Comm) error {
					for _, m := range []int{0, 4, 40, 1000} {
						if err := collCheck(c, m); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

var _ = errors.Is

// TestCollectivesLarge: 4 MiB vectors with the default thresholds, which
// take the large algorithms (scatter-allgather broadcast; Rabenseifner on
// 4 ranks, the ring on 3; the ring allgather), and Allreduce with a
// vector just over and under the thresholds.
func TestCollectivesLarge(t *testing.T) {
	// The algorithms by messages: the shared-memory reduce-scatter would
	// take these allreduces (TestCollShmAllreduceScatterDefault).
	testcvar.Set(t, "mpi_coll_shm_allreduce_long", "1099511627776")
	const m = 1 << 19 // float64s: 4 MiB
	ring, rab, scatter := pvAllreduceRing.Value(), pvAllreduceRab.Value(), pvBcastScatter.Value()
	defer func() {
		if pvAllreduceRing.Value() == ring || pvAllreduceRab.Value() == rab || pvBcastScatter.Value() == scatter {
			t.Error("the large algorithms did not all run")
		}
	}()
	for _, n := range []int{3, 4} {
		err := Run(n, func(c *Comm) error {
			r := c.Rank()
			buf := make([]float64, m)
			if r == 1 {
				for i := range buf {
					buf[i] = float64(i)
				}
			}
			if err := Bcast(c, buf, 1); err != nil {
				return err
			}
			for i := range buf {
				if buf[i] != float64(i) {
					return fmt.Errorf("Bcast 4 MiB: [%d] = %v", i, buf[i])
				}
			}
			for _, k := range []int{m, 1<<17 + 3, 1<<17 - 3, 513, 511} {
				out := make([]float64, k)
				if err := Allreduce(c, buf[:k], out, Sum); err != nil {
					return err
				}
				for i := range out {
					if out[i] != float64(n*i) {
						return fmt.Errorf("Allreduce of %d: [%d] = %v, want %v", k, i, out[i], n*i)
					}
				}
			}
			ag := make([]float64, n*(m/8))
			if err := Allgather(c, buf[:m/8], ag); err != nil {
				return err
			}
			if ag[(n-1)*(m/8)+5] != 5 {
				return fmt.Errorf("Allgather 512 KiB: wrong")
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%d ranks: %v", n, err)
		}
	}
}
