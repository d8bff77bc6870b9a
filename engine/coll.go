package engine

// SendsEagerly reports whether a standard send of n bytes to rank dest
// goes by the eager protocol: it completes once its bytes are on the link
// (or queued for it), whether or not a receive is posted, so that a caller
// may send before it posts its receive without waiting for the peer to
// post its own: both ranks of an exchange can send first (mpi's
// collectives take the receive's direct path so, with no request).
func (ep *Endpoint) SendsEagerly(dest, n int) bool {
	if uint(dest) >= uint(len(ep.peers)) {
		return false
	}
	p := &ep.peers[dest]
	return n <= int(eagerLimit.Get()) && (p.eager == 0 || n <= p.eager)
}
