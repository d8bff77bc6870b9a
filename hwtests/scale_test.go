//go:build linux

package hwtests

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/nethost"
	"github.com/tachyon-hpc/tachyon/mpi"
	"github.com/tachyon-hpc/tachyon/nic/nictest"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// A job of 32 ranks across 8 test hosts of 4 ranks each, under MPICH's
// mpiexec on a machine of a couple of CPUs: far more ranks than CPUs, so
// that it finishes only if the waiting ranks park rather than spin.

// When this rank's mpi.Init began and returned (runRole measures it):
// the job's bootstrap, as the rank saw it. (The test hosts share the
// machine's clock.)
var initBegan, initEnded time.Time

// scaleJob is one rank of role "scale": a message between every ordered
// pair of ranks (each payload checked), an Allreduce and a Barrier
// across all; then rank 0 prints what the bootstrap cost, the slowest
// rank's Init and the PMI gets of rank 0, of the busiest other rank and
// of all together (pmi_gets). The bootstrap's time is from the last rank's
// call of Init to the last return, the time the ranks spent on one
// another rather than on starting.
func scaleJob(w *mpi.Comm) error {
	me, n := w.Rank(), w.Size()
	pattern := func(from, to, size int) []byte {
		b := make([]byte, size)
		for k := range b {
			b[k] = byte(from*31 + to*7 + k)
		}
		return b
	}
	buf := make([]byte, 8192)
	// A rank still in the pairs after stallAfter says where it is and what
	// its network transport counted, so that a stalled job shows which
	// pair it stalled on before it is killed.
	var at atomic.Int64
	watch := time.AfterFunc(stallAfter, func() {
		fmt.Fprintf(os.Stderr, "scale rank %d of %d still at step %d after %v:\n%s", me, n, at.Load(), stallAfter, pvar.Format("engine_net_"))
	})
	defer watch.Stop()
	for step := 1; step < n; step++ {
		at.Store(int64(step))
		dest, src := (me+step)%n, (me-step+n)%n
		size := 8 + step%3*2000 // 8 B, and eager messages of more than a frame
		st, err := w.Sendrecv(pattern(me, dest, size), dest, step, buf, src, step)
		if err != nil {
			return fmt.Errorf("step %d (to rank %d, from rank %d): %v", step, dest, src, err)
		}
		if st.Count != size || !bytes.Equal(buf[:st.Count], pattern(src, me, size)) {
			return fmt.Errorf("step %d: %d bytes from rank %d, want %d of its pattern", step, st.Count, src, size)
		}
	}
	x := make([]int64, 1000)
	for i := range x {
		x[i] = int64(me*i + 1)
	}
	sum := make([]int64, len(x))
	if err := mpi.Allreduce(w, x, sum, mpi.Sum); err != nil {
		return fmt.Errorf("Allreduce: %v", err)
	}
	for i := range sum {
		if want := int64(i*n*(n-1)/2 + n); sum[i] != want {
			return fmt.Errorf("Allreduce: [%d] = %d, want %d", i, sum[i], want)
		}
	}
	if err := w.Barrier(); err != nil {
		return fmt.Errorf("Barrier: %v", err)
	}

	gets := pvarRead("pmi_gets") // -1 before pmi_gets existed
	other := int64(0)
	if me != 0 {
		other = gets
	}
	in := []int64{int64(initEnded.Sub(initBegan)), gets, other, initBegan.UnixNano(), initEnded.UnixNano()}
	maxes, sums := make([]int64, len(in)), make([]int64, len(in))
	if err := mpi.Allreduce(w, in, maxes, mpi.Max); err != nil {
		return err
	}
	if err := mpi.Allreduce(w, in, sums, mpi.Sum); err != nil {
		return err
	}
	if me == 0 {
		fmt.Printf("scale bootstrap of %d ranks: %v after the last rank's Init began, slowest Init %v; PMI gets: rank 0 %d, most of another rank %d, all %d\n",
			n, time.Duration(maxes[4]-maxes[3]).Round(time.Millisecond), time.Duration(maxes[0]).Round(time.Millisecond), gets, maxes[2], sums[1])
	}
	host, _ := os.Hostname()
	fmt.Printf("scale rank %d of %d on %s ok\n", me, n, host)
	return nil
}

// stallAfter is how long scaleJob's pairs may take before a rank reports
// where it is: far more than a run of them takes (well under a second).
const stallAfter = 20 * time.Second

// scaleLine is rank 0's report of the bootstrap.
var scaleLine = regexp.MustCompile(`scale bootstrap of (\d+) ranks: (\S+) after the last rank's Init began, slowest Init (\S+); PMI gets: rank 0 (-?\d+), most of another rank (-?\d+), all (-?\d+)`)

// TestNetns32Ranks runs scaleJob on 8 test hosts of 4 ranks each, and
// on 4 such hosts, under mpiexec.mpich: shared memory within a host (its
// ranks share a segment directory), UDP between hosts (AF_XDP is not
// what is tested here). The job must finish within its limit, killed
// otherwise, and its bootstrap must make O(N) PMI gets: rank 0 gathers
// each allgather's N values, the others read a few chunks.
func TestNetns32Ranks(t *testing.T) {
	mpiexec := needHostJobs(t)
	const perHost = 4
	for _, hosts := range []int{8, 4} {
		n := hosts * perHost
		t.Run(fmt.Sprintf("%dx%d", hosts, perHost), func(t *testing.T) {
			nw := nictest.Network(t, nethost.Config{Hosts: hosts})
			limit := 2 * time.Minute
			if raceEnabled {
				limit = 5 * time.Minute
			}
			job := hostJob{role: "scale", perHost: perHost, shareHost: true, env: []string{"TACHYON_NIC_MODE=udp"}}
			out, took := job.run(t, mpiexec, nw, limit, finished("scale", n))
			m := scaleLine.FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("rank 0 did not report the bootstrap:\n%s", out)
			}
			t.Logf("%d ranks on %d hosts in %v: %s", n, hosts, took, m[0])
			rank0, other, all := atoi(m[4]), atoi(m[5]), atoi(m[6])
			// Two allgathers (hosts, then cards): rank 0 gets the N-1
			// other values of each; every rank a few chunks of each and
			// the job's cookie, key and its host's segment.
			if rank0 > 2*n+8 || other > 16 || all > rank0+(n-1)*other {
				t.Errorf("PMI gets: rank 0 %d (want at most %d), another rank %d (want at most 16), all %d", rank0, 2*n+8, other, all)
			}
		})
	}
}

func atoi(s string) int {
	v, _ := strconv.Atoi(s)
	return v
}
