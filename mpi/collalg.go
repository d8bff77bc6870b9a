package mpi

import (
	"math/bits"

	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// The algorithms of the collectives, each a builder of a schedule
// (collsched.go) from a collective's arguments (coll.go), and how one is
// chosen: by the message's size and the number of ranks, against the
// thresholds below. docs/collectives.md describes them.

// The thresholds (control variables).
var (
	bcastLong = cvar.NewInt("mpi_coll_bcast_long", 256<<10,
		"Smallest broadcast, in bytes, sent by scatter and ring allgather (van de Geijn) rather than down a binomial tree, on more than two ranks.",
		cvar.WithCategory("mpi"), cvar.WithRange(0, 1<<40), cvar.WithUnit("bytes"))
	allreduceLong = cvar.NewInt("mpi_coll_allreduce_long", 4<<10,
		"Smallest allreduce, in bytes, of a commutative operation done by reduce-scatter and allgather (Rabenseifner) rather than by recursive doubling.",
		cvar.WithCategory("mpi"), cvar.WithRange(0, 1<<40), cvar.WithUnit("bytes"))
	allreduceRingMin = cvar.NewInt("mpi_coll_allreduce_ring_min", 1<<20,
		"Smallest allreduce, in bytes, of a commutative operation done by a ring (reduce-scatter, then allgather, between neighbours) on a number of ranks that is not a power of two, rather than by Rabenseifner's algorithm.",
		cvar.WithCategory("mpi"), cvar.WithRange(0, 1<<40), cvar.WithUnit("bytes"))
	allgatherLong = cvar.NewInt("mpi_coll_allgather_long", 512<<10,
		"Smallest allgather result, in bytes, gathered around a ring rather than by recursive doubling (which needs a power of two of ranks).",
		cvar.WithCategory("mpi"), cvar.WithRange(0, 1<<40), cvar.WithUnit("bytes"))
	alltoallShort = cvar.NewInt("mpi_coll_alltoall_short", 256,
		"Largest block, in bytes, of an all-to-all done by Bruck's algorithm (log2(n) rounds, blocks forwarded) rather than pairwise (n-1 rounds), on more than two ranks.",
		cvar.WithCategory("mpi"), cvar.WithRange(0, 1<<40), cvar.WithUnit("bytes"))
)

// Which algorithm ran (performance variables).
var (
	pvBcastBinomial = pvar.NewCounter("mpi_coll_bcast_binomial",
		"Broadcasts sent down a binomial tree.", pvar.WithUnit("calls"))
	pvBcastScatter = pvar.NewCounter("mpi_coll_bcast_scatter_allgather",
		"Broadcasts sent by scatter and ring allgather (mpi_coll_bcast_long).", pvar.WithUnit("calls"))
	pvAllreduceRD = pvar.NewCounter("mpi_coll_allreduce_recursive_doubling",
		"Allreduces done by recursive doubling.", pvar.WithUnit("calls"))
	pvAllreduceRab = pvar.NewCounter("mpi_coll_allreduce_rabenseifner",
		"Allreduces done by Rabenseifner's reduce-scatter and allgather (mpi_coll_allreduce_long).", pvar.WithUnit("calls"))
	pvAllreduceRing = pvar.NewCounter("mpi_coll_allreduce_ring",
		"Allreduces done around a ring (mpi_coll_allreduce_ring_min).", pvar.WithUnit("calls"))
	pvAllgatherRD = pvar.NewCounter("mpi_coll_allgather_recursive_doubling",
		"Allgathers done by recursive doubling.", pvar.WithUnit("calls"))
	pvAllgatherRing = pvar.NewCounter("mpi_coll_allgather_ring",
		"Allgathers (and Allgathervs) done around a ring (mpi_coll_allgather_long).", pvar.WithUnit("calls"))
	pvAlltoallBruck = pvar.NewCounter("mpi_coll_alltoall_bruck",
		"All-to-alls done by Bruck's algorithm (mpi_coll_alltoall_short).", pvar.WithUnit("calls"))
	pvAlltoallPairwise = pvar.NewCounter("mpi_coll_alltoall_pairwise",
		"All-to-alls (and Alltoallvs) done by pairwise exchange.", pvar.WithUnit("calls"))
)

// build fills s with the schedule of a's collective on s.c.
func build(s *sched, a *collArgs) {
	s.k = a.k
	if s.c.IsInter() {
		buildInter(s, a) // intercoll.go
		return
	}
	if a.kind <= collAllreduce {
		if h := hierFor(s.c, a); h != nil {
			switch a.kind {
			case collBarrier:
				hierBarrier(s, h)
			case collBcast:
				hierBcast(s, h, a.recv, a.root)
			case collReduce:
				hierReduce(s, h, a)
			case collAllreduce:
				hierAllreduce(s, h, a)
			}
			return
		}
	}
	switch a.kind {
	case collBarrier:
		buildBarrier(s)
	case collBcast:
		buildBcast(s, a.recv, a.root)
	case collReduce:
		buildReduce(s, a)
	case collAllreduce:
		buildAllreduce(s, a)
	case collGather, collGatherv:
		buildGather(s, a)
	case collScatter, collScatterv:
		buildScatter(s, a)
	case collAllgather, collAllgatherv:
		buildAllgather(s, a)
	case collAlltoall, collAlltoallv:
		buildAlltoall(s, a)
	case collReduceScatter, collReduceScatterBlock:
		buildReduceScatter(s, a)
	case collScan, collExscan:
		buildScan(s, a)
	}
}

// buildBarrier is a dissemination barrier: in round k each rank signals
// rank+2^k and waits for rank-2^k.
func buildBarrier(s *sched) {
	n, r := s.c.size, s.c.rank
	for k := 1; k < n; k <<= 1 {
		s.recv((r-k+n)%n, nil)
		s.send((r+k)%n, nil)
		s.wait()
	}
}

// buildBcast sends root's buf to every rank.
func buildBcast(s *sched, buf []byte, root int) {
	n := s.c.size
	if n == 1 {
		return
	}
	if n > 2 && int64(len(buf)) >= bcastLong.Get() && len(buf) >= n {
		pvBcastScatter.Add(1)
		bcastScatterAllgather(s, buf, root)
		return
	}
	pvBcastBinomial.Add(1)
	bcastBinomial(s, buf, root)
}

// bcastBinomial: each rank receives from its parent in a binomial tree
// rooted at root, then sends to its children, the farthest first.
func bcastBinomial(s *sched, buf []byte, root int) {
	n, r := s.c.size, s.c.rank
	vr := (r - root + n) % n
	mask := 1
	for ; mask < n; mask <<= 1 {
		if vr&mask != 0 {
			s.recv((r-mask+n)%n, buf)
			s.wait()
			break
		}
	}
	sent := false
	for mask >>= 1; mask > 0; mask >>= 1 {
		if vr+mask < n {
			s.send((r+mask)%n, buf)
			sent = true
		}
	}
	if sent {
		s.wait()
	}
}

// bcastScatterAllgather: root's buf, cut in n pieces, is scattered down a
// binomial tree, and the pieces then go round a ring (van de Geijn): each
// rank moves about 2(n-1)/n of the message instead of all of it log2(n)
// times at the root.
func bcastScatterAllgather(s *sched, buf []byte, root int) {
	n, r := s.c.size, s.c.rank
	vr := (r - root + n) % n
	ss := (len(buf) + n - 1) / n
	piece := func(lo, hi int) []byte { // relative ranks [lo, hi)'s pieces
		a, b := min(lo*ss, len(buf)), min(hi*ss, len(buf))
		return buf[a:b]
	}
	real := func(v int) int { return (v + root) % n }
	mask := 1
	for ; mask < n; mask <<= 1 {
		if vr&mask != 0 {
			s.recv(real(vr-mask), piece(vr, min(vr+mask, n)))
			s.wait()
			break
		}
	}
	sent := false
	for mask >>= 1; mask > 0; mask >>= 1 {
		if c := vr + mask; c < n {
			s.send(real(c), piece(c, min(c+mask, n)))
			sent = true
		}
	}
	if sent {
		s.wait()
	}
	left, right := real((vr-1+n)%n), real((vr+1)%n)
	for i := 0; i < n-1; i++ {
		sb, rb := (vr-i+n)%n, (vr-i-1+n)%n
		s.recv(left, piece(rb, rb+1))
		s.send(right, piece(sb, sb+1))
		s.wait()
	}
}

// buildReduce combines every rank's send into root's recv, up a binomial
// tree: rooted at root for a commutative operation; for another, at rank
// 0, where each rank's part covers the ranks below its children's, and
// then sent to root. A leaf sends its vector as it is; a rank copies it
// into a buffer of its own only when it first combines.
func buildReduce(s *sched, a *collArgs) {
	n, r := s.c.size, s.c.rank
	nb := a.count
	mine := a.send
	if r == a.root && a.inPlace {
		mine = a.recv
	}
	if n == 1 {
		s.copy(a.recv, mine)
		return
	}
	commute := a.op.Commutative()
	treeRoot := a.root
	if !commute {
		treeRoot = 0
	}
	// acc is the rank's partial result; owned once it is a buffer the
	// schedule may write (scratch, or root's recv), not the user's send.
	acc, owned := mine, r == a.root && a.inPlace
	var tmp []byte
	vr := (r - treeRoot + n) % n
	for mask := 1; mask < n; mask <<= 1 {
		if vr&mask != 0 {
			s.send((vr-mask+treeRoot)%n, acc)
			s.wait()
			break
		}
		src := vr | mask
		if src >= n {
			continue
		}
		if tmp == nil {
			tmp = s.scratch(nb)
		}
		s.recv((src+treeRoot)%n, tmp)
		s.wait()
		if commute {
			if !owned {
				dst := s.scratch(nb)
				if r == a.root {
					dst = a.recv
				}
				s.copy(dst, acc)
				acc, owned = dst, true
			}
			s.reduce(tmp, acc)
			continue
		}
		// acc holds the ranks below src's: acc op received, into the
		// received buffer, which becomes acc.
		s.reduce(acc, tmp)
		old := acc
		acc, tmp = tmp, nil
		if owned { // the old part's buffer takes the next
			tmp = old
		}
		owned = true
	}
	switch {
	case r == treeRoot && r == a.root:
		s.copy(a.recv, acc)
	case r == treeRoot:
		s.send(a.root, acc)
		s.wait()
	case r == a.root:
		s.recv(treeRoot, a.recv)
		s.wait()
	}
}

// buildAllreduce combines every rank's send into every rank's recv.
func buildAllreduce(s *sched, a *collArgs) {
	n := s.c.size
	buf, src := a.recv, a.recv // the result, and the vector to start from
	if !a.inPlace {
		src = a.send
	}
	nb := len(buf)
	units := nb / a.unit
	pof2 := 1 << (bits.Len(uint(n)) - 1)
	switch {
	case n == 1:
		s.copy(buf, src)
	case !a.op.Commutative() || int64(nb) < allreduceLong.Get() || units < n:
		pvAllreduceRD.Add(1)
		s.copy(buf, src)
		allreduceRD(s, a, buf)
	case pof2 != n && int64(nb) >= allreduceRingMin.Get():
		pvAllreduceRing.Add(1)
		s.copy(buf, src)
		allreduceRing(s, a, buf)
	case pof2 != n:
		pvAllreduceRab.Add(1)
		s.copy(buf, src)
		allreduceRab(s, a, buf, buf, pof2)
	default:
		pvAllreduceRab.Add(1)
		allreduceRab(s, a, src, buf, pof2)
	}
}

// foldIn is the first step of recursive doubling on n ranks not a power
// of two: of the first 2*rem ranks each even one hands its vector to the
// odd one above it and sits out. It returns the rank's place among the
// pof2 that go on, or -1.
func foldIn(s *sched, buf, tmp []byte, pof2 int) int {
	n, r := s.c.size, s.c.rank
	rem := n - pof2
	switch {
	case r >= 2*rem:
		return r - rem
	case r%2 == 0:
		s.send(r+1, buf)
		s.wait()
		return -1
	}
	s.recv(r-1, tmp)
	s.wait()
	s.reduce(tmp, buf) // the lower rank's on the left
	return r / 2
}

// foldOut hands the ranks foldIn set aside the result.
func foldOut(s *sched, buf []byte, pof2 int) {
	n, r := s.c.size, s.c.rank
	rem := n - pof2
	switch {
	case r >= 2*rem:
	case r%2 == 1:
		s.send(r-1, buf)
		s.wait()
	default:
		s.recv(r+1, buf)
		s.wait()
	}
}

// realRank is the rank of the place v among the pof2 of foldIn.
func realRank(v, rem int) int {
	if v < rem {
		return 2*v + 1
	}
	return v + rem
}

// allreduceRD is recursive doubling: log2(n) exchanges of the whole
// vector, each combined in rank order.
func allreduceRD(s *sched, a *collArgs, buf []byte) {
	n, r := s.c.size, s.c.rank
	pof2 := 1 << (bits.Len(uint(n)) - 1)
	rem := n - pof2
	nb := len(buf)
	tmp := s.scratch(nb)
	v := foldIn(s, buf, tmp, pof2)
	if v >= 0 {
		for mask := 1; mask < pof2; mask <<= 1 {
			dst := realRank(v^mask, rem)
			s.recv(dst, tmp)
			s.send(dst, buf)
			s.wait()
			if a.op.Commutative() || dst < r {
				s.reduce(tmp, buf)
			} else {
				s.reduce(buf, tmp)
				s.copy(buf, tmp)
			}
		}
	}
	foldOut(s, buf, pof2)
}

// blocks cuts units units of unit bytes into n blocks as evenly as whole
// units allow, the larger first: block i is [off[i], off[i+1]) in bytes.
func blocks(s *sched, n, units, unit int) []int {
	start := len(s.ints)
	q, rem := units/n, units%n
	at := 0
	for i := 0; i < n; i++ {
		s.ints = append(s.ints, at)
		at += q * unit
		if i < rem {
			at += unit
		}
	}
	s.ints = append(s.ints, at)
	return s.ints[start:]
}

// allreduceRab is Rabenseifner's algorithm: a reduce-scatter by recursive
// halving, then an allgather by recursive doubling, over the pof2 ranks
// foldIn leaves.
//
// The first halving step sends from src, the caller's vector, and copies
// into buf only the half it keeps: on a power of two of ranks buf needs no
// copy of the whole vector first (src is buf where it does).
func allreduceRab(s *sched, a *collArgs, src, buf []byte, pof2 int) {
	n := s.c.size
	rem := n - pof2
	nb := len(buf)
	tmp := s.scratch(nb)
	v := foldIn(s, buf, tmp, pof2)
	if v >= 0 {
		off := blocks(s, pof2, nb/a.unit, a.unit)
		part := func(b []byte, lo, hi int) []byte { return b[off[lo]:off[hi]] }
		sendIdx, recvIdx, lastIdx := 0, 0, pof2
		mask := 1
		for ; mask < pof2; mask <<= 1 {
			dst := realRank(v^mask, rem)
			var sLo, sHi, rLo, rHi int
			if v < v^mask {
				sendIdx = recvIdx + pof2/(mask*2)
				sLo, sHi, rLo, rHi = sendIdx, lastIdx, recvIdx, sendIdx
			} else {
				recvIdx = sendIdx + pof2/(mask*2)
				sLo, sHi, rLo, rHi = sendIdx, recvIdx, recvIdx, lastIdx
			}
			from := buf
			if mask == 1 {
				from = src
			}
			s.recv(dst, part(tmp, rLo, rHi))
			s.send(dst, part(from, sLo, sHi))
			s.wait()
			s.copy(part(buf, rLo, rHi), part(from, rLo, rHi))
			s.reduce(part(tmp, rLo, rHi), part(buf, rLo, rHi))
			sendIdx = recvIdx
			lastIdx = recvIdx + pof2/(mask*2)
		}
		// Each rank holds its block [sendIdx, lastIdx) reduced; gather
		// them back in the reverse order.
		for mask >>= 1; mask > 0; mask >>= 1 {
			dst := realRank(v^mask, rem)
			var sLo, sHi, rLo, rHi int
			if v < v^mask {
				sLo, sHi, rLo, rHi = sendIdx, lastIdx, lastIdx, lastIdx+pof2/(mask*2)
				lastIdx += pof2 / (mask * 2)
			} else {
				sLo, sHi, rLo, rHi = sendIdx, lastIdx, sendIdx-pof2/(mask*2), sendIdx
				sendIdx -= pof2 / (mask * 2)
			}
			s.recv(dst, part(buf, rLo, rHi))
			s.send(dst, part(buf, sLo, sHi))
			s.wait()
		}
	}
	foldOut(s, buf, pof2)
}

// allreduceRing: a reduce-scatter around the ring, each rank adding its
// block to what its left neighbour passes on, then an allgather around
// it; every rank sends 2(n-1)/n of the vector, on any number of ranks.
func allreduceRing(s *sched, a *collArgs, buf []byte) {
	n, r := s.c.size, s.c.rank
	off := blocks(s, n, len(buf)/a.unit, a.unit)
	blk := func(b []byte, i int) []byte { return b[off[i]:off[i+1]] }
	tmp := s.scratch(off[1]) // block 0 is the largest
	left, right := (r-1+n)%n, (r+1)%n
	for i := 0; i < n-1; i++ {
		sb, rb := (r-i+n)%n, (r-i-1+n)%n
		t := tmp[:off[rb+1]-off[rb]]
		s.recv(left, t)
		s.send(right, blk(buf, sb))
		s.wait()
		s.reduce(t, blk(buf, rb))
	}
	for i := 0; i < n-1; i++ {
		sb, rb := (r+1-i+n)%n, (r-i+n)%n
		s.recv(left, blk(buf, rb))
		s.send(right, blk(buf, sb))
		s.wait()
	}
}

// vblocks returns the byte offsets and lengths of a v-form's blocks, the
// counts and displacements in elements of esize bytes, displacements
// packed (the running sum of the counts) where none are given.
func vblocks(s *sched, counts, displs []int, esize int) (off, lens []int) {
	n := len(counts)
	start := len(s.ints)
	at := 0
	for i := 0; i < n; i++ {
		d := at
		if displs != nil {
			d = displs[i]
		}
		s.ints = append(s.ints, d*esize)
		at += counts[i]
	}
	for i := 0; i < n; i++ {
		s.ints = append(s.ints, counts[i]*esize)
	}
	return s.ints[start : start+n], s.ints[start+n : start+2*n]
}

// uniform returns the offsets and lengths of n blocks of b bytes.
func uniform(s *sched, n, b int) (off, lens []int) {
	start := len(s.ints)
	for i := 0; i < n; i++ {
		s.ints = append(s.ints, i*b)
	}
	for i := 0; i < n; i++ {
		s.ints = append(s.ints, b)
	}
	return s.ints[start : start+n], s.ints[start+n : start+2*n]
}

// layout returns the receive (gather) or send (scatter) blocks of a
// rooted or all- collective: uniform blocks of a.count bytes, or the
// v-form's.
func (a *collArgs) layout(s *sched) (off, lens []int) {
	if a.counts != nil {
		return vblocks(s, a.counts, a.displs, a.esize)
	}
	return uniform(s, s.c.size, a.count)
}

// buildGather: every rank sends to root, which receives each block in
// place (linear: root's n-1 receives are posted at once).
func buildGather(s *sched, a *collArgs) {
	r := s.c.rank
	if r != a.root {
		s.send(a.root, a.send)
		s.wait()
		return
	}
	off, lens := a.layout(s)
	for i := range s.c.size {
		b := a.recv[off[i] : off[i]+lens[i]]
		if i == r {
			if !a.inPlace {
				s.copy(b, a.send)
			}
			continue
		}
		s.recv(i, b)
	}
	s.wait()
}

// buildScatter: root sends each rank its block (linear).
func buildScatter(s *sched, a *collArgs) {
	r := s.c.rank
	if r != a.root {
		s.recv(a.root, a.recv)
		s.wait()
		return
	}
	off, lens := a.layout(s)
	for i := range s.c.size {
		b := a.send[off[i] : off[i]+lens[i]]
		if i == r {
			if !a.inPlace {
				s.copy(a.recv, b)
			}
			continue
		}
		s.send(i, b)
	}
	s.wait()
}

// buildAllgather gives every rank every rank's block.
func buildAllgather(s *sched, a *collArgs) {
	n, r := s.c.size, s.c.rank
	off, lens := a.layout(s)
	blk := func(i int) []byte { return a.recv[off[i] : off[i]+lens[i]] }
	if !a.inPlace {
		s.copy(blk(r), a.send)
	}
	if n == 1 {
		return
	}
	if a.counts == nil && n&(n-1) == 0 && int64(len(a.recv)) < allgatherLong.Get() {
		// Recursive doubling: in round k, exchange the 2^k blocks
		// gathered so far with rank^2^k.
		pvAllgatherRD.Add(1)
		b := a.count
		for mask := 1; mask < n; mask <<= 1 {
			dst := r ^ mask
			mine, theirs := (r&^(mask-1))*b, (dst&^(mask-1))*b
			s.recv(dst, a.recv[theirs:theirs+mask*b])
			s.send(dst, a.recv[mine:mine+mask*b])
			s.wait()
		}
		return
	}
	pvAllgatherRing.Add(1)
	left, right := (r-1+n)%n, (r+1)%n
	for i := 0; i < n-1; i++ {
		s.recv(left, blk((r-i-1+n)%n))
		s.send(right, blk((r-i+n)%n))
		s.wait()
	}
}

// buildAlltoall sends block i of every rank's send to rank i.
func buildAlltoall(s *sched, a *collArgs) {
	n, r := s.c.size, s.c.rank
	var soff, slens, roff, rlens []int
	if a.counts != nil {
		soff, slens = vblocks(s, a.sendCounts, a.sendDispls, a.esize)
		roff, rlens = vblocks(s, a.counts, a.displs, a.esize)
	} else {
		soff, slens = uniform(s, n, a.count)
		roff, rlens = soff, slens
	}
	send := a.send
	if a.inPlace {
		// The data to send is in recv: take a copy of it first.
		soff, slens = roff, rlens
		send = s.scratch(len(a.recv))
		s.copy(send, a.recv)
	}
	sblk := func(i int) []byte { return send[soff[i] : soff[i]+slens[i]] }
	rblk := func(i int) []byte { return a.recv[roff[i] : roff[i]+rlens[i]] }
	s.copy(rblk(r), sblk(r))
	if n == 1 {
		return
	}
	if a.counts == nil && n > 2 && int64(a.count) <= alltoallShort.Get() {
		pvAlltoallBruck.Add(1)
		alltoallBruck(s, send, a.recv, a.count)
		return
	}
	pvAlltoallPairwise.Add(1)
	pof2 := n&(n-1) == 0
	for i := 1; i < n; i++ {
		to, from := (r+i)%n, (r-i+n)%n
		if pof2 {
			to, from = r^i, r^i
		}
		s.recv(from, rblk(from))
		s.send(to, sblk(to))
		s.wait()
	}
}

// alltoallBruck is Bruck's all-to-all: after a rotation, in round k every
// rank forwards to rank+2^k the blocks whose index has bit k set, so
// that each block reaches its rank in log2(n) rounds; a last rotation puts
// the blocks in rank order.
func alltoallBruck(s *sched, send, recv []byte, b int) {
	n, r := s.c.size, s.c.rank
	half := (n + 1) / 2
	tmp := s.scratch(n * b)
	pack, unpack := s.scratch(half*b), s.scratch(half*b)
	blk := func(buf []byte, i int) []byte { return buf[i*b : (i+1)*b] }
	for i := 0; i < n; i++ { // tmp[i] = send[(r+i)%n]
		s.copy(blk(tmp, i), blk(send, (r+i)%n))
	}
	for k := 1; k < n; k <<= 1 {
		m := 0
		for i := 0; i < n; i++ {
			if i&k != 0 {
				s.copy(blk(pack, m), blk(tmp, i))
				m++
			}
		}
		s.recv((r-k+n)%n, unpack[:m*b])
		s.send((r+k)%n, pack[:m*b])
		s.wait()
		m = 0
		for i := 0; i < n; i++ {
			if i&k != 0 {
				s.copy(blk(tmp, i), blk(unpack, m))
				m++
			}
		}
	}
	for i := 0; i < n; i++ { // tmp[i] came from rank r-i
		if (r-i+n)%n != r {
			s.copy(blk(recv, (r-i+n)%n), blk(tmp, i))
		}
	}
}

// buildReduceScatter combines every rank's send and gives rank i block i
// of the result: around a ring for a commutative operation, else a
// reduce to rank 0 in rank order and a scatter.
func buildReduceScatter(s *sched, a *collArgs) {
	n, r := s.c.size, s.c.rank
	var off, lens []int
	total := 0
	if a.counts != nil {
		off, lens = vblocks(s, a.counts, nil, a.esize)
		total = off[n-1] + lens[n-1]
	} else {
		off, lens = uniform(s, n, a.count)
		total = n * a.count
	}
	in := a.send
	if a.inPlace {
		in = a.recv[:total]
	}
	mine := a.recv[:lens[r]]
	if !a.op.Commutative() {
		acc := s.scratch(total)
		sub := &collArgs{kind: collReduce, send: in, recv: acc, root: 0, op: a.op, count: total, unit: a.unit, esize: a.esize}
		buildReduce(s, sub)
		buildScatter(s, &collArgs{kind: collScatterv, send: acc, recv: mine, root: 0, counts: a.counts, esize: a.esize, count: a.count})
		return
	}
	acc := s.scratch(total)
	tmp := s.scratch(total)
	s.copy(acc, in)
	blk := func(b []byte, i int) []byte { return b[off[i] : off[i]+lens[i]] }
	left, right := (r-1+n)%n, (r+1)%n
	for i := 0; i < n-1; i++ {
		sb, rb := (r-i-1+n)%n, (r-i-2+2*n)%n
		t := tmp[:lens[rb]]
		s.recv(left, t)
		s.send(right, blk(acc, sb))
		s.wait()
		s.reduce(t, blk(acc, rb))
	}
	s.copy(mine, blk(acc, r))
}

// buildScan is the inclusive (Scan) or exclusive (Exscan) prefix
// reduction by recursive doubling: in round k a rank exchanges the
// reduction of its group of 2^k ranks with rank^2^k, and adds the lower
// group's to its own result.
func buildScan(s *sched, a *collArgs) {
	n, r := s.c.size, s.c.rank
	nb := len(a.recv)
	excl := a.kind == collExscan
	in := a.send
	if a.inPlace {
		in = a.recv
	}
	partial, tmp := s.scratch(nb), s.scratch(nb)
	s.copy(partial, in)
	if !excl {
		s.copy(a.recv, in)
	}
	have := !excl // a.recv holds a result yet
	for mask := 1; mask < n; mask <<= 1 {
		dst := r ^ mask
		if dst >= n {
			continue
		}
		s.recv(dst, tmp)
		s.send(dst, partial)
		s.wait()
		if r > dst { // tmp is the lower ranks'
			s.reduce(tmp, partial)
			if have {
				s.reduce(tmp, a.recv)
			} else {
				s.copy(a.recv, tmp)
				have = true
			}
		} else if a.op.Commutative() {
			s.reduce(tmp, partial)
		} else {
			s.reduce(partial, tmp)
			s.copy(partial, tmp)
		}
	}
}
