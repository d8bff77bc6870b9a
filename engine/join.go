package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/tachyon-hpc/tachyon/nic"
	"github.com/tachyon-hpc/tachyon/progress"
	"github.com/tachyon-hpc/tachyon/rings"
)

// NetPeer is where a rank on another host listens: its link's card, its
// incarnation, and the port of its bulk lane's listener, on the card's
// address (0: it has none), as it published them.
type NetPeer struct {
	Card  nic.Card
	Epoch uint32
	Bulk  uint16
}

// String returns the peer in the form ParseNetPeer reads: its card, its
// epoch and its bulk port, separated by commas, with no space or '='
// (what a PMI value allows).
func (p NetPeer) String() string { return fmt.Sprintf("%s,%d,%d", p.Card, p.Epoch, p.Bulk) }

// ParseNetPeer reads a NetPeer in the form String writes.
func ParseNetPeer(s string) (NetPeer, error) {
	f := strings.Split(s, ",")
	if len(f) != 3 {
		return NetPeer{}, fmt.Errorf("%w: malformed network peer %q (want card,epoch,bulk port)", ErrConfig, s)
	}
	c, err := nic.ParseCard(f[0])
	if err != nil {
		return NetPeer{}, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	e, err := strconv.ParseUint(f[1], 10, 32)
	if err != nil {
		return NetPeer{}, fmt.Errorf("%w: malformed epoch in %q", ErrConfig, s)
	}
	b, err := strconv.ParseUint(f[2], 10, 16)
	if err != nil {
		return NetPeer{}, fmt.Errorf("%w: malformed bulk port in %q", ErrConfig, s)
	}
	return NetPeer{Card: c, Epoch: uint32(e), Bulk: uint16(b)}, nil
}

// NetLinkConfig says how OpenNetLink opens a link. Its zero value takes
// the control variables: the interface nic.ChooseInterface chooses, in
// nic_mode.
type NetLinkConfig struct {
	// Interface is the interface the link opens on; "" lets
	// nic.ChooseInterface choose by PeerAddrs (nic_interface if set).
	Interface string
	// PeerAddrs are the addresses the job's ranks on other hosts
	// published (nic.FormatAddrs, nic.ParseAddrs), one entry a rank:
	// where Interface is "", the link opens on the interface whose
	// subnet holds the most of them.
	PeerAddrs [][]netip.Prefix
	Mode      nic.Mode // nic.ModeAuto: nic_mode
	// Share is the rank's place among the ranks of its host, which
	// share the interface's receive queues (nic.Config.Share); the zero
	// value: the rank is alone on its host.
	Share nic.Share
	// Ranks is the job's size, which sizes the bulk lane listener's
	// queue: every peer may dial at once (0: the least, 128).
	Ranks int
}

// OpenNetLink opens this process's network link for a job with cookie,
// as cfg says (AF_XDP where it can be had in ModeAuto; UDP with
// engine_net_force, whose hosts share one address); the listener of its
// bulk lane (engine_net_bulk, not with engine_net_auth; nil when off);
// and draws its incarnation. It returns the link, the listener and what
// the other ranks need to reach them.
func OpenNetLink(cookie uint64, cfg NetLinkConfig) (nic.Link, *nic.StreamListener, NetPeer, error) {
	choice := nic.InterfaceChoice{Name: cfg.Interface, Why: "set by the program"}
	if choice.Name == "" {
		var err error
		if choice, err = nic.ChooseInterface(cfg.PeerAddrs); err != nil {
			return nil, nil, NetPeer{}, fmt.Errorf("choosing the network interface: %w", err)
		}
	}
	ifc := choice.Name
	slog.Debug("engine: this rank's network interface", "interface", ifc, "why", choice.Why)
	ncfg := nic.Config{Interface: ifc, Cookie: cookie, Mode: cfg.Mode, Share: cfg.Share, Chosen: choice.Why}
	if netForce.Get() {
		// Every process a host of its own on one machine: AF_XDP sends
		// on the wire and never reaches this host's own address, so the
		// kernel's UDP carries the frames, whatever nic_mode says.
		ncfg.Mode = nic.ModeUDP
	}
	l, err := nic.Open(ncfg)
	if err != nil {
		return nil, nil, NetPeer{}, fmt.Errorf("opening the network link on %s: %w", ifc, err)
	}
	logLinkPath(l)
	e, err := randomUint64()
	if err != nil {
		l.Close()
		return nil, nil, NetPeer{}, err
	}
	self := NetPeer{Card: l.Card(), Epoch: uint32(e) | 1}
	var ln *nic.StreamListener
	if netBulk.Get() && !netAuth.Get() {
		if ln, err = nic.ListenStream(self.Card.IP, cfg.Ranks); err != nil {
			l.Close()
			return nil, nil, NetPeer{}, fmt.Errorf("opening the bulk lane's listener: %w", err)
		}
		self.Bulk = ln.Port()
	}
	return l, ln, self, nil
}

// JobSpec is one rank's place in a job whose ranks may span hosts: the
// ranks of its own host talk through a shared-memory segment, the others
// over the network transport. A launcher's bootstrap (mpi's, under PMI)
// gathers it from what every rank published.
type JobSpec struct {
	Rank, Size int
	// Local lists the ranks on this rank's host, ascending, Rank among
	// them; Seg is their shared-memory job (CreateShmJob of len(Local)
	// ranks, the i-th of which is Local[i]), nil when Local is Rank
	// alone.
	Local []int
	Seg   *Segment
	// Link is this rank's network link, which the endpoint owns from
	// Join on (nil when every rank is local); Cookie is the job's, Epoch
	// this rank's incarnation, and Peers, by rank, the ranks elsewhere.
	Link   nic.Link
	Bulk   *nic.StreamListener // the bulk lane's listener (nil: none), the endpoint's from Join on
	Cookie uint64
	Epoch  uint32
	Peers  []NetPeer
	// Key is the job key under which frames are authenticated
	// (engine_net_auth, NewJobKey): nil when they are not. Every rank
	// must have the same.
	Key []byte
	// Progress configures the endpoint's progress engine (its idle
	// strategy, say) beyond the control variables.
	Progress []progress.Option
	// MachineRanks is how many ranks of the job run on this rank's
	// machine (MachineOf its HostID): hosts that are namespaces of one
	// kernel share its CPUs. More than the machine's CPUs make the
	// endpoint's waits yield at once, as on an oversubscribed host
	// (progress.WithOversubscribed). 0 counts Local alone.
	MachineRanks int
}

// MachineOf returns the machine part of a HostID: its kernel's boot id
// (or hostname), which hosts made of namespaces of one kernel share.
func MachineOf(hostID string) string {
	m, _, _ := strings.Cut(hostID, "/")
	return m
}

// Join makes the endpoint of spec.Rank in a job that may span hosts. The
// segment must stay open while the endpoint is in use.
func Join(spec JobSpec) (*Endpoint, error) {
	n, rank := spec.Size, spec.Rank
	if n < 1 || rank < 0 || rank >= n || !slices.IsSorted(spec.Local) || !slices.Contains(spec.Local, rank) ||
		len(spec.Local) > n || spec.Local[0] < 0 || spec.Local[len(spec.Local)-1] >= n {
		return nil, fmt.Errorf("%w: rank %d of %d with local ranks %v", ErrConfig, rank, n, spec.Local)
	}
	if len(spec.Local) > 1 && spec.Seg == nil {
		return nil, fmt.Errorf("%w: %d ranks on this host and no segment", ErrConfig, len(spec.Local))
	}
	remote := n - len(spec.Local)
	if remote > 0 && (spec.Link == nil || len(spec.Peers) != n) {
		return nil, fmt.Errorf("%w: %d ranks elsewhere, and no link or no card for each", ErrConfig, remote)
	}
	local := make([]int, n) // a rank's index in Local, -1 if elsewhere
	for i := range local {
		local[i] = -1
	}
	for i, g := range spec.Local {
		local[g] = i
	}
	opts := spec.Progress
	if spec.MachineRanks > len(spec.Local) && spec.MachineRanks > HostCPUs() {
		// After the segment's own view, which counts its host's ranks.
		opts = append(slices.Clip(opts), progress.WithOversubscribed(true))
	}
	links := make([]Link, n)
	inboxes := make([]Inbox, n)
	counts := make([]transportCounters, n)
	var side *shmSide
	var prog *progress.Engine
	var closers []func()
	fail := func(err error) (*Endpoint, error) {
		for _, c := range closers {
			c()
		}
		return nil, err
	}
	if spec.Seg != nil {
		a, err := attachShm(spec.Seg, local[rank], opts)
		if err != nil {
			return nil, err
		}
		if a.job.n != len(spec.Local) {
			a.close()
			return nil, fmt.Errorf("%w: segment %q holds %d ranks, this host has %d", ErrConfig, spec.Seg.Name(), a.job.n, len(spec.Local))
		}
		side, prog = a, a.prog
		closers = append(closers, a.close)
		for i, g := range spec.Local {
			links[g], inboxes[g], counts[g] = a.links[i], a.inboxes[i], a.counts[i]
		}
	} else {
		var err error
		if prog, err = progress.New(opts...); err != nil {
			return nil, err
		}
		closers = append(closers, func() { prog.Close() })
		if links[rank], inboxes[rank], err = selfRing(&closers); err != nil {
			return fail(err)
		}
		counts[rank] = countSelf
	}
	var dev *netDev
	if remote > 0 {
		var err error
		if dev, err = newNetDev(spec.Link, spec.Cookie, uint32(rank), spec.Epoch, n, spec.Key); err != nil {
			return fail(err)
		}
		if spec.Bulk != nil {
			if spec.Key == nil {
				dev.bulk = newBulkDev(spec.Bulk)
			} else {
				spec.Bulk.Close() // no lane for authenticated frames
			}
		}
		for g := range n {
			if local[g] >= 0 {
				continue
			}
			c, err := dev.connect(g, spec.Peers[g].Card, spec.Peers[g].Epoch, spec.Peers[g].Bulk)
			if err != nil {
				dev.close()
				return fail(err)
			}
			links[g], inboxes[g], counts[g] = c, c, countNet
		}
	}
	var reader remoteReader
	var rd *shmReader
	if side != nil {
		rd = &shmReader{job: side.job, self: local[rank]}
		reader = &localReader{shm: rd, local: local}
	}
	ep, err := newEndpoint(rank, links, inboxes, counts, prog, reader)
	if err != nil {
		if dev != nil {
			dev.close()
		}
		return fail(err)
	}
	if rd != nil {
		rd.ep = ep
		host := side.hostColl(spec.Local, n)
		ep.hostColl = func() *HostColl { return host }
		side.joined()
	}
	if dev != nil {
		ep.onClose = append(ep.onClose, ep.attachNet(dev))
	}
	ep.onClose = append(ep.onClose, closers...)
	return ep, nil
}

// selfRing makes a rank's ring to itself in ordinary memory, adding its
// ends' close to closers.
func selfRing(closers *[]func()) (Link, Inbox, error) {
	size, err := pairRingSize()
	if err != nil {
		return nil, nil, err
	}
	r, err := newPairRing(rings.AlignedBytes(size))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	l, lc, err := r.link(nil)
	if err != nil {
		return nil, nil, err
	}
	in, ic, err := r.inbox()
	if err != nil {
		lc.close()
		return nil, nil, err
	}
	*closers = append(*closers, lc.close, ic.close)
	return l, in, nil
}

// localReader is the remote reader of a job that spans hosts: it copies
// across processes of this host (shmReader, by the segment's ranks) and
// refuses the ranks elsewhere, whose rendezvous messages stream.
type localReader struct {
	shm   *shmReader
	local []int // a rank's index in the segment, -1 if elsewhere
}

var errElsewhere = errors.New("the peer is on another host: streamed")

func (r *localReader) readRemote(peer int, sreq, addr uint64, dst []byte) error {
	if r.local[peer] < 0 {
		return errElsewhere
	}
	return r.shm.readRemote(r.local[peer], sreq, addr, dst)
}

func (r *localReader) splitAt(peer, n int) int {
	if r.local[peer] < 0 {
		return n
	}
	return r.shm.splitAt(r.local[peer], n)
}

func (r *localReader) readPart(peer int, addr uint64, dst []byte) error {
	if r.local[peer] < 0 {
		return errElsewhere
	}
	return r.shm.readPart(r.local[peer], addr, dst)
}

func (r *localReader) writeRemote(peer int, addr uint64, src []byte) error {
	if r.local[peer] < 0 {
		return errElsewhere
	}
	return r.shm.writeRemote(r.local[peer], addr, src)
}
