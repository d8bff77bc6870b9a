package engine

// What a network device's poll walks. A rank may have thousands of
// network peers while it talks to a few: every poll's work is the
// connections that have some, never the job's size. The device keeps
// three lists and a heap, each entry a connection that has work, put
// there by whatever gave it the work and taken off once it is done:
//
//   - work: connections with frames numbered and not yet sent (a frame
//     left open for more packets, one the link had no room for) or an
//     acknowledgement owed now; the device's service walks it.
//   - ready: connections with packets in order not yet given to the
//     endpoint, or given and not yet released; the endpoint's poll walks
//     it (pollNet) instead of looking at every network peer's inbox.
//   - lanes: connections with bulk lane transfers due either way
//     (netbulk.go); pollBulk walks it.
//   - timers: a binary min-heap of the connections whose retransmission
//     timer or delayed acknowledgement runs, by the earliest due. An
//     entry's key is never later than its connection's own timers (a
//     timer moved later leaves the key where it was, one moved earlier
//     moves the key), so a service pops what is due, handles it and
//     pushes the connection again at its next timer, if any: a timer
//     pushed back at every acknowledgement costs nothing until it runs
//     out.
//
// An idle connection is on none of them. Its silence is judged where the
// endpoint waits on it (Check, with probes engine_net_probe_interval
// apart), as before.

// touch puts c on the work list, if it is not there.
func (d *netDev) touch(c *netConn) {
	if !c.inWork {
		c.inWork = true
		d.work = append(d.work, c)
	}
}

// markReady puts c on the ready list, if it is not there.
func (d *netDev) markReady(c *netConn) {
	if !c.inReady {
		c.inReady = true
		d.ready = append(d.ready, c)
	}
}

// unready takes the j-th connection off the ready list; the last takes
// its place.
func (d *netDev) unready(j int) {
	d.ready[j].inReady = false
	last := len(d.ready) - 1
	d.ready[j] = d.ready[last]
	d.ready[last] = nil
	d.ready = d.ready[:last]
}

// markLane puts c on the list of connections with lane transfers due.
func (d *netDev) markLane(c *netConn) {
	if !c.inLanes {
		c.inLanes = true
		d.lanes = append(d.lanes, c)
	}
}

// netTimers is a binary min-heap of connections by timerAt, each at
// index hidx-1 (hidx 0: not in the heap).
type netTimers struct{ h []*netConn }

// top returns the earliest key, 0 if the heap is empty.
func (t *netTimers) top() uint64 {
	if len(t.h) == 0 {
		return 0
	}
	return t.h[0].timerAt
}

// arm makes c's key at most at: it pushes c, or moves it earlier.
func (t *netTimers) arm(c *netConn, at uint64) {
	if c.hidx == 0 {
		c.timerAt = at
		t.h = append(t.h, c)
		c.hidx = int32(len(t.h))
		t.up(len(t.h) - 1)
	} else if at < c.timerAt {
		c.timerAt = at
		t.up(int(c.hidx) - 1)
	}
}

// pop takes the connection with the earliest key off the heap.
func (t *netTimers) pop() *netConn {
	c := t.h[0]
	last := len(t.h) - 1
	t.swap(0, last)
	t.h[last] = nil
	t.h = t.h[:last]
	c.hidx = 0
	if last > 0 {
		t.down(0)
	}
	return c
}

func (t *netTimers) swap(i, j int) {
	t.h[i], t.h[j] = t.h[j], t.h[i]
	t.h[i].hidx, t.h[j].hidx = int32(i+1), int32(j+1)
}

func (t *netTimers) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if t.h[p].timerAt <= t.h[i].timerAt {
			return
		}
		t.swap(i, p)
		i = p
	}
}

func (t *netTimers) down(i int) {
	n := len(t.h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && t.h[r].timerAt < t.h[l].timerAt {
			m = r
		}
		if t.h[i].timerAt <= t.h[m].timerAt {
			return
		}
		t.swap(i, m)
		i = m
	}
}
