package mpi

import (
	"log/slog"
	"os"
	"sync"

	"github.com/tachyon-hpc/tachyon/metrics/statshm"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// Each session publishes its performance variables for tachyonstat
// (package metrics/statshm) from NewSession (Init) to Close (Finalize,
// Abort): one file a session, which names it, holding its own endpoints'
// values (its world's and its connections').

// publishers holds the publishers of the process's sessions, so that
// Abort, which takes no lock, stops them all.
var publishers sync.Map // *statshm.Publisher -> struct{}

// startStat starts publishing s's performance variables, unless
// WithStat(false), or metrics_stat is off and WithStat was not given. A
// failure costs the session nothing: it is logged and the session runs
// unseen. The rank 0 of a world first removes the files of processes that
// died without closing theirs.
func (s *Session) startStat() {
	on := statshm.Enabled()
	if s.cfg.stat != nil {
		on = *s.cfg.stat
	}
	if !on {
		return
	}
	job := ""
	switch {
	case s.pmi != nil:
		job = s.pmi.KVSName()
	case !s.cfg.standalone:
		job = os.Getenv(EnvSegment) // "" when not launched
	}
	rank := s.world.ep.Rank()
	if rank == 0 {
		statshm.RemoveStale(statshm.Dir()) // best effort: a leftover only costs a line of tachyonstat
	}
	pub, err := statshm.Start(statshm.Config{Job: job, Rank: rank, Size: s.world.ep.Size(), Session: s.cfg.name, Owners: s.pvarOwners})
	if err != nil {
		s.cfg.logger.Warn("tachyon: tachyonstat will not see this session (WithStat(false) or TACHYON_METRICS_STAT=0 turns publishing off)", "rank", rank, "err", err)
		return
	}
	s.pub = pub
	publishers.Store(pub, struct{}{})
}

// pvarOwners returns the owners of the performance variables of s's
// endpoints: its world's and its connections'.
func (s *Session) pvarOwners() []*pvar.Owner {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*pvar.Owner, 0, 1+len(s.conns))
	out = append(out, s.world.ep.PvarOwner())
	for k := range s.conns {
		out = append(out, k.p.ep.PvarOwner())
	}
	return out
}

// stopStat stops s's publishing and removes its file, once: from Close
// or Finalize (a process that exits without either, or Abort, leaves a
// stale file, which tachyonstat reports and a later world's rank 0
// removes).
func (s *Session) stopStat() {
	if s.pub != nil {
		stopPublisher(s.pub, s.cfg.logger)
	}
}

// stopPublisher stops pub unless it was stopped, logging a failure on lg.
func stopPublisher(pub *statshm.Publisher, lg *slog.Logger) {
	if _, ok := publishers.LoadAndDelete(pub); !ok {
		return
	}
	if err := pub.Stop(); err != nil {
		lg.Warn("tachyon: removing the tachyonstat file", "path", pub.Path(), "err", err)
	}
}

// stopAllStat stops every session's publishing: Abort's, before the
// process ends.
func stopAllStat(lg *slog.Logger) {
	publishers.Range(func(k, _ any) bool {
		stopPublisher(k.(*statshm.Publisher), lg)
		return true
	})
}

// runStat is Run(n, fn) for Main, published for tachyonstat as one
// process of n ranks (rank unknown: the process is every rank; the values
// the process's), unless metrics_stat is off. Run alone publishes
// nothing, so that the many short worlds of tests and libraries make no
// files.
func runStat(n int, fn func(world *Comm) error) error {
	if statshm.Enabled() && n >= 1 {
		pub, err := statshm.Start(statshm.Config{Rank: -1, Size: n})
		if err != nil {
			slog.Default().Warn("tachyon: tachyonstat will not see this process (TACHYON_METRICS_STAT=0 turns publishing off)", "err", err)
		} else {
			publishers.Store(pub, struct{}{})
			defer stopPublisher(pub, slog.Default())
		}
	}
	return Run(n, fn)
}
