package mpi

import "log/slog"

// The library writes nothing to standard error itself: what it has to
// say (a connection refused or lost, tachyonstat's file that could not
// be made, the error that ends the job under ErrorsAreFatal) goes as a
// log/slog record to the logger of the session it concerns (WithLogger;
// slog.Default() otherwise), with the attribute tachyon_session naming
// the session. Info: what befell one connection (its other side gone);
// Warn: something the session does without, and goes on; Error: what
// ends the job.

// logger returns the logger of p's session, slog.Default() for a proc of
// none.
func (p *proc) logger() *slog.Logger {
	if p.sess != nil && p.sess.cfg.logger != nil {
		return p.sess.cfg.logger
	}
	return slog.Default()
}

// Performance variable labels: each proc's endpoint's pvar.Owner carries
// its session's name and its peer while the proc lives, for the
// exporters that show values per session (metrics/prom).

// Label names and the peer of a session's world.
const (
	labelSession = "session"
	labelPeer    = "peer"
	peerWorld    = "world"
)

// label labels p's performance variables with its session's name and
// peer: "world" for its session's world, the other side's TCP address for
// a connection's.
func (p *proc) label(peer string) {
	if p.sess == nil {
		return
	}
	if peer == "" {
		peer = "unknown"
	}
	// Both values are set: SetLabels cannot refuse them.
	p.ep.PvarOwner().SetLabels(map[string]string{labelSession: p.sess.cfg.name, labelPeer: peer})
}

// unlabel removes p's labels when its endpoint closes; its counts stay in
// the process's values.
func (p *proc) unlabel() { p.ep.PvarOwner().Unlabel() }
