package mpi

import (
	"fmt"
	"os"
	"sync/atomic"

	"github.com/tachyon-hpc/tachyon/metrics/statshm"
)

// statPub publishes this process's performance variables for tachyonstat
// (package metrics/statshm) from Init to Finalize or Abort; nil when
// metrics_stat is off or the file could not be made. Atomic: Abort, which
// takes no lock, stops it too.
var statPub atomic.Pointer[statshm.Publisher]

// startStat starts publishing this process's performance variables, as
// rank p of its job, unless metrics_stat is off. A failure costs Init
// nothing: it says so on standard error and the job runs unseen. Rank 0
// first removes the files of processes that died without Finalize.
func startStat(p *proc) {
	if !statshm.Enabled() {
		return
	}
	job := os.Getenv(EnvSegment)
	if env.pmi != nil {
		job = env.pmi.KVSName()
	}
	rank := p.ep.Rank()
	if rank == 0 {
		statshm.RemoveStale(statshm.Dir()) // best effort: a leftover only costs a line of tachyonstat
	}
	pub, err := statshm.Start(statshm.Config{Job: job, Rank: rank, Size: p.ep.Size()})
	if err != nil {
		fmt.Fprintf(os.Stderr, "tachyon: rank %d: tachyonstat will not see this process (TACHYON_METRICS_STAT=0 turns publishing off): %v\n", rank, err)
		return
	}
	statPub.Store(pub)
}

// stopStat stops publishing and removes the file, once, from Finalize or
// Abort (a process that exits without either leaves a stale file, which
// tachyonstat reports and the next job's rank 0 removes).
func stopStat() {
	if pub := statPub.Swap(nil); pub != nil {
		if err := pub.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "tachyon: %v\n", err)
		}
	}
}

// runStat is Run(n, fn) for Main, published for tachyonstat as one
// process of n ranks (rank unknown: the process is every rank), unless
// metrics_stat is off. Run alone publishes nothing, so that the many
// short worlds of tests and libraries make no files.
func runStat(n int, fn func(world *Comm) error) error {
	if statshm.Enabled() && n >= 1 {
		pub, err := statshm.Start(statshm.Config{Rank: -1, Size: n})
		if err != nil {
			fmt.Fprintf(os.Stderr, "tachyon: tachyonstat will not see this process (TACHYON_METRICS_STAT=0 turns publishing off): %v\n", err)
		} else {
			defer pub.Stop()
		}
	}
	return Run(n, fn)
}
