package engine

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/nic"
	"github.com/tachyon-hpc/tachyon/progress"
	"github.com/tachyon-hpc/tachyon/rings"
)

// netForce makes NewWorld join its goroutine ranks over the network
// transport rather than rings in memory: each rank a link of its own on
// the loopback interface (UDP; nic_* apply, faults included), so that the
// facade's whole test suite runs over the network.
var netForce = cvar.NewBool("engine_net_force", false,
	"Whether NewWorld (the ranks of mpi.Run) joins its goroutine ranks over the network transport, each with a UDP link of its own on 127.0.0.1, rather than over rings in memory: for testing the network transport with everything that runs on worlds. Read when a world is made.",
	cvar.WithCategory("engine"))

// newNetWorld is NewWorld over the network transport: a rank's packets to
// itself still go through a ring.
func newNetWorld(n int, opts []progress.Option) (*World, error) {
	size, err := pairRingSize()
	if err != nil {
		return nil, err
	}
	cookie, err := randomUint64()
	if err != nil {
		return nil, err
	}
	key, err := NewJobKey()
	if err != nil {
		return nil, err
	}
	w := &World{eps: make([]*Endpoint, n)}
	devs := make([]*netDev, n)
	cards := make([]nic.Card, n)
	epochs := make([]uint32, n)
	ports := make([]uint16, n)
	fail := func(err error) (*World, error) {
		for _, d := range devs {
			if d != nil {
				d.close()
			}
		}
		return nil, err
	}
	for i := range devs {
		l, err := nic.Open(nic.Config{Mode: nic.ModeUDP, Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), 0), Cookie: cookie})
		if err != nil {
			return fail(fmt.Errorf("%w: rank %d's network link: %v", ErrConfig, i, err))
		}
		e, err := randomUint64()
		if err != nil {
			l.Close()
			return fail(err)
		}
		epochs[i] = uint32(e) | 1
		if devs[i], err = newNetDev(l, cookie, uint32(i), epochs[i], n, key); err != nil {
			l.Close()
			return fail(err)
		}
		cards[i] = l.Card()
		if netBulk.Get() && key == nil { // no lane for authenticated frames
			ln, err := nic.ListenStream(cards[i].IP, n)
			if err != nil {
				return fail(fmt.Errorf("%w: rank %d's bulk lane: %v", ErrConfig, i, err))
			}
			devs[i].bulk = newBulkDev(ln)
			ports[i] = ln.Port()
		}
	}
	for i := 0; i < n; i++ {
		links := make([]Link, n)
		inboxes := make([]Inbox, n)
		counts := make([]transportCounters, n)
		for j := 0; j < n; j++ {
			if j == i {
				continue
			}
			c, err := devs[i].connect(j, cards[j], epochs[j], ports[j])
			if err != nil {
				return fail(err)
			}
			links[j], inboxes[j], counts[j] = c, c, countNet
		}
		prog, err := progress.New(opts...)
		if err != nil {
			return fail(err)
		}
		r, err := newPairRing(rings.AlignedBytes(size))
		if err != nil {
			return fail(fmt.Errorf("%w: %v", ErrConfig, err))
		}
		l, lc, err := r.link(nil)
		if err != nil {
			return fail(err)
		}
		in, ic, err := r.inbox()
		if err != nil {
			return fail(err)
		}
		links[i], inboxes[i], counts[i] = l, in, countSelf
		ep, err := newEndpoint(i, links, inboxes, counts, prog, nil)
		if err != nil {
			return fail(err)
		}
		closeNet := ep.attachNet(devs[i])
		ep.onClose = append(ep.onClose, func() {
			lc.close()
			ic.close()
			closeNet()
			prog.Close()
		})
		w.eps[i] = ep
	}
	return w, nil
}

// randomUint64 returns 64 random bits, for a job's cookie and an
// endpoint's epoch.
func randomUint64() (uint64, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return 0, fmt.Errorf("engine: random bits: %w", err)
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}
