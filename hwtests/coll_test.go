//go:build linux

package hwtests

import (
	"fmt"
	"hash/fnv"
	"os"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/engine"
	"github.com/tachyon-hpc/tachyon/internal/nethost"
	"github.com/tachyon-hpc/tachyon/mpi"
	"github.com/tachyon-hpc/tachyon/nic/nictest"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// Collectives across hosts: 4 test hosts of 2 ranks each, under MPICH's
// mpiexec, so that a collective's messages cross the network.

// collJob is one rank of role "colls": broadcasts, reductions, gathers
// and all-to-alls of small and large vectors, every result checked, and
// the transport counters, which must show the network.
func collJob(w *mpi.Comm) error {
	n, r := w.Size(), w.Rank()
	for _, m := range []int{1, 1000, 1 << 17} { // 8 B, 8 KB, 1 MiB of float64
		x := make([]float64, m)
		for i := range x {
			x[i] = float64(r*m + i)
		}
		sum := make([]float64, m)
		if err := mpi.Allreduce(w, x, sum, mpi.Sum); err != nil {
			return fmt.Errorf("Allreduce of %d: %v", m, err)
		}
		for _, i := range []int{0, m / 2, m - 1} {
			if want := float64(n*i + m*n*(n-1)/2); sum[i] != want {
				return fmt.Errorf("Allreduce of %d: [%d] = %v, want %v", m, i, sum[i], want)
			}
		}
		b := make([]float64, m)
		if r == n-1 {
			copy(b, x)
		}
		if err := mpi.Bcast(w, b, n-1); err != nil {
			return fmt.Errorf("Bcast of %d: %v", m, err)
		}
		if b[m-1] != float64((n-1)*m+m-1) {
			return fmt.Errorf("Bcast of %d: wrong data", m)
		}
		if err := mpi.Reduce(w, x, sum, mpi.Max, 2); err != nil {
			return fmt.Errorf("Reduce of %d: %v", m, err)
		}
		if r == 2 && sum[0] != float64((n-1)*m) {
			return fmt.Errorf("Reduce of %d: %v", m, sum[0])
		}
		all := make([]float64, n*m)
		if err := mpi.Allgather(w, x, all); err != nil {
			return fmt.Errorf("Allgather of %d: %v", m, err)
		}
		if all[(n-1)*m] != float64((n-1)*m) {
			return fmt.Errorf("Allgather of %d: wrong data", m)
		}
		a2 := make([]float64, n*m)
		if err := mpi.Alltoall(w, all, a2); err != nil {
			return fmt.Errorf("Alltoall of %d: %v", m, err)
		}
		for k := 0; k < n; k++ { // block k of rank k's all is rank r's x... block r of all is x_r on every rank
			if a2[k*m] != float64(r*m) {
				return fmt.Errorf("Alltoall of %d: block %d = %v", m, k, a2[k*m])
			}
		}
	}
	hier, _ := pvar.Lookup("mpi_coll_hier_bcast")
	if perHost, err := hostColls(w); err != nil {
		return err
	} else if perHost > 1 && hier.Read() == 0 {
		return fmt.Errorf("%d ranks on this host, and no Bcast ran hierarchically", perHost)
	}
	req, err := mpi.Iallreduce(w, []int64{int64(r)}, make([]int64, 1), mpi.Sum)
	if err != nil {
		return err
	}
	if _, err := req.Wait(); err != nil {
		return err
	}
	if err := w.Barrier(); err != nil {
		return err
	}
	if netMsgs, _ := pvar.Lookup("engine_net_messages"); netMsgs.Read() == 0 {
		return fmt.Errorf("no message over the network")
	}
	host, _ := os.Hostname()
	fmt.Printf("colls rank %d of %d on %s ok\n", r, n, host)
	return nil
}

// hostColls splits w by host and runs collectives on each host's ranks:
// their barriers go through the host's shared-memory collective area
// when the host has more than one rank (mpi_coll_shm_barrier counts
// them), the rest too up to mpi_coll_shm_max. It returns the host's
// number of ranks.
func hostColls(w *mpi.Comm) (int, error) {
	h := fnv.New32a()
	h.Write([]byte(engine.HostID()))
	hc, err := w.Split(int(h.Sum32()&0x7fffffff), w.Rank())
	if err != nil {
		return 0, err
	}
	shm, _ := pvar.Lookup("mpi_coll_shm_barrier")
	before := shm.Read()
	m := hc.Size()
	for it := range 100 {
		x := []int64{int64(hc.Rank() + it)}
		sum := make([]int64, 1)
		if err := mpi.Allreduce(hc, x, sum, mpi.Sum); err != nil {
			return 0, fmt.Errorf("Allreduce on the host's ranks: %v", err)
		}
		if want := int64(m*(m-1)/2 + m*it); sum[0] != want {
			return 0, fmt.Errorf("Allreduce on the host's %d ranks: %d, want %d", m, sum[0], want)
		}
		b := make([]float64, 3000)
		if hc.Rank() == it%m {
			b[2999] = float64(it)
		}
		if err := mpi.Bcast(hc, b, it%m); err != nil || b[2999] != float64(it) {
			return 0, fmt.Errorf("Bcast on the host's ranks: %v %v", b[2999], err)
		}
		if err := hc.Barrier(); err != nil {
			return 0, fmt.Errorf("Barrier on the host's ranks: %v", err)
		}
	}
	if m > 1 && shm.Read() == before {
		return 0, fmt.Errorf("the %d ranks of this host ran no Barrier through shared memory", m)
	}
	return m, hc.Free()
}

// TestCollectivesAcrossHosts runs collJob on 4 hosts under mpiexec.mpich:
// 2 ranks a host over UDP, sharing the host's memory (shareHost), so that
// the collectives run hierarchically; 1 over AF_XDP (two ranks of a host
// cannot bind the veth's one receive queue: the second's Init fails,
// every queue "busy").
func TestCollectivesAcrossHosts(t *testing.T) {
	mpiexec := needHostJobs(t)
	for _, c := range []struct {
		mode    string
		perHost int
	}{{"udp", 2}, {"xdp", 1}} {
		t.Run(c.mode, func(t *testing.T) {
			nw := nictest.Network(t, nethost.Config{Hosts: 4})
			job := hostJob{role: "colls", perHost: c.perHost, shareHost: true, env: []string{"TACHYON_NIC_MODE=" + c.mode}}
			out, took := job.run(t, mpiexec, nw, 5*time.Minute, finished("colls", job.ranks(nw)))
			t.Logf("%v:\n%s", took, out)
		})
	}
}
