package mpi1

// PROBE reports whether a message of type typ (-1: any) from process
// source (-1: any) is pending: sent in blocking or nonblocking mode in
// the current communication context and not yet received (MPI_PROBE).
// It does not block. If one is, it returns its length and INFOL, INFOS
// and INFOT describe it; if none is, it returns -1 with error status 0,
// and they return -1. Synchronized messages are never pending (the seed:
// they are not buffered), so PROBE does not see them.
func (p *Proc) PROBE(source, typ int) int {
	if source < -1 {
		return p.fail(p.pidErr())
	}
	if typ < -1 {
		return p.fail(ErrType)
	}
	st, found, err := p.cc.reg.Iprobe(source, typ)
	if err != nil {
		return p.failed(err)
	}
	if !found {
		p.length, p.source, p.typ = -1, -1, -1
		return p.ok(-1)
	}
	p.length, p.source, p.typ = st.Count, st.Source, st.Tag
	return p.ok(st.Count)
}

// INFOL returns the length in bytes of the message the last blocking or
// synchronized receive, completing WAIT or STATS received (its whole
// length, if truncated), or of the one the last PROBE found (MPI_INFOL);
// -1 after a PROBE that found none, and before any message.
func (p *Proc) INFOL() int { return p.length }

// INFOS returns the PID (GCPID, in a pushed group context) of the
// process that sent the message INFOL describes (MPI_INFOS), or -1.
func (p *Proc) INFOS() int { return p.source }

// INFOT returns the type of the message INFOL describes (MPI_INFOT), or
// -1.
func (p *Proc) INFOT() int { return p.typ }
