package mpi

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tachyon-hpc/tachyon/engine"
	"github.com/tachyon-hpc/tachyon/nic"
	"github.com/tachyon-hpc/tachyon/pmi"
	"github.com/tachyon-hpc/tachyon/progress"
)

// Joining a job whose ranks may span hosts. The ranks find one another
// through an exchange: a key-value space with a barrier. Under a PMI
// launcher (MPICH's Hydra, Slurm) that is the launcher's space; for the
// world of a connection between processes started apart (Listen and
// Dial, Comm.Accept and Comm.Connect) it is the roots' TCP connection
// (connect.go). Either way the ranks then talk through shared memory
// within a host and over the network across hosts.

// exchange is a key-value space shared by the ranks of a job being made,
// rank Rank of Size: what one rank Puts, the others Get after the Barrier
// that follows the Put. Allgather puts value as this rank's under key and
// returns every rank's, in rank order: it is collective, and publishes
// what was Put before it as a Barrier does. Under PMI it costs O(N) gets
// for the whole job (pmi.Client.Allgather), where a Get of every rank's
// value by every rank would make N².
type exchange interface {
	Rank() int
	Size() int
	Put(key, value string) error
	Barrier() error
	Get(key string) (string, error)
	Allgather(key, value string) ([]string, error)
}

var _ exchange = (*pmi.Client)(nil)

// Exchange keys through which the ranks of a job find one another: each
// rank's host (engine.HostID) with the addresses of its interfaces
// (nic.FormatAddrs) and, where the job spans hosts, its network card and
// incarnation, both gathered by Allgather; the first rank of each host
// the name of the host's shared-memory segment; rank 0 the job's cookie
// and key.
const (
	pmiKeyCookie  = "tachyon-cookie"
	pmiKeyAuth    = "tachyon-auth" // the job key (engine_net_auth), pmiNone if frames go unauthenticated
	pmiKeyHost    = "tachyon-host" // Allgather of the ranks' hosts: HOST or HOST|ADDRS (hostValue)
	pmiKeySegment = "tachyon-shm-" // + the host's first rank
	pmiKeyCard    = "tachyon-card" // Allgather of the ranks' engine.NetPeer
	pmiNone       = "-"            // the rank could not make what the key names
	pmiPrefix     = "tachyon-pmi-" // starts the names of the job's segments
)

// joinOptions is what a session sets for the endpoints it makes.
type joinOptions struct {
	net      engine.NetLinkConfig
	progress []progress.Option
}

// bootstrapPMI joins the job of a PMI launcher (joinJob over the
// launcher's key-value space); a job of one is a singleton world. The
// launcher's word for two predefined attributes follows: one that does
// not answer leaves MPI_APPNUM unset and the universe the world.
func bootstrapPMI(c *pmi.Client, o joinOptions) (*proc, error) {
	me, n := c.Rank(), c.Size()
	if n == 1 {
		w, err := engine.NewWorld(1, o.progress...)
		if err != nil {
			return nil, &Error{Class: ErrOther, Op: "Init", Detail: fmt.Sprintf("rank %d of %d under PMI: singleton world", me, n), Err: err}
		}
		return newProc(w.Endpoint(0), nil), nil
	}
	p, err := joinJob(c, o, "Init", fmt.Sprintf("rank %d of %d under PMI", me, n))
	if err != nil {
		return nil, err
	}
	if a, err := c.AppNum(); err == nil && a >= 0 {
		p.appNum = a
	} else {
		p.appNum = -1
	}
	if u, err := c.UniverseSize(); err == nil && u >= n {
		p.universe = u
	}
	return p, nil
}

// joinJob makes this rank's endpoint in the job whose ranks share x,
// which may span hosts:
//
//  1. Rank 0 publishes the job's cookie and key; every rank's host and
//     the IPv4 addresses of its interfaces are gathered (Allgather).
//  2. The ranks that share a host form its group; the group's first rank
//     creates the group's shared-memory segment and publishes its name.
//     A rank with peers on other hosts opens its network link (o.net):
//     on the interface set, or else on the one whose subnet holds the
//     most of its peers' addresses (nic.ChooseInterface); the ranks'
//     cards are gathered (Allgather), or, where the job has one host, a
//     Barrier publishes the segment's name.
//  3. Every rank attaches to its group's segment and joins the job
//     (engine.Join): shared memory within its host, the network across.
//     Where more of the job's ranks share this rank's machine (hosts that
//     are namespaces of one kernel: engine.MachineOf) than it has CPUs,
//     the rank's waits are an oversubscribed host's: they yield at once.
//     Barrier: then each group's first rank unlinks the segment's name,
//     so that nothing is left behind however the job ends.
//
// Each rank makes O(1) Gets of the exchange but rank 0, which makes O(N)
// in the Allgathers: O(N) for the whole job.
//
// A rank that fails publishes what it could not make as "-" where the
// others wait for it, so that they fail at once rather than wait, and
// returns its error (op's, with who as its first words). Its caller ends
// the job: the launcher when the process exits, the connection's roots
// when one of them hangs up.
func joinJob(x exchange, o joinOptions, op, who string) (*proc, error) {
	me, n := x.Rank(), x.Size()
	fail := func(detail string, err error) (*proc, error) {
		return nil, &Error{Class: ErrOther, Op: op, Detail: who + ": " + detail, Err: err}
	}

	// 1. Hosts, the cookie and the job key.
	host := engine.HostID()
	var err error
	if me == 0 {
		var b [8]byte
		if _, err = rand.Read(b[:]); err == nil {
			err = x.Put(pmiKeyCookie, hex.EncodeToString(b[:]))
		}
		var key []byte
		if err == nil {
			key, err = engine.NewJobKey()
		}
		if err == nil {
			v := pmiNone
			if key != nil {
				v = hex.EncodeToString(key)
			}
			err = x.Put(pmiKeyAuth, v)
		}
	}
	if err != nil {
		return fail("publishing the job's cookie and key", err)
	}
	hosts, err := x.Allgather(pmiKeyHost, hostValue(host))
	if err != nil {
		return fail("gathering the ranks' hosts", err)
	}
	var local []int
	machineRanks := 0          // ranks on this machine: hosts of one kernel share its CPUs
	addrs := make([]string, n) // the ranks' interfaces' addresses, as nic.FormatAddrs writes them
	for r, h := range hosts {
		hosts[r], addrs[r], _ = strings.Cut(h, hostSep)
		if hosts[r] == host {
			local = append(local, r)
		}
		if engine.MachineOf(hosts[r]) == engine.MachineOf(host) {
			machineRanks++
		}
	}
	if !slices.Contains(local, me) {
		return fail("gathering the ranks' hosts", fmt.Errorf("the exchange gave this rank (%d) the host %q, not %q", me, hosts[me], host))
	}
	hexCookie, err := x.Get(pmiKeyCookie)
	cookie, perr := strconv.ParseUint(hexCookie, 16, 64)
	if err != nil || perr != nil {
		return fail("looking up the job's cookie", errors.Join(err, perr))
	}
	var key []byte
	if len(local) < n {
		v, err := x.Get(pmiKeyAuth)
		if err == nil && v != pmiNone {
			key, err = hex.DecodeString(v)
		}
		if err != nil {
			return fail("looking up the job's key", err)
		}
	}

	// 2. The host's segment, and this rank's network link.
	leader := local[0]
	var seg *engine.Segment
	var failed error
	if len(local) > 1 && me == leader {
		engine.RemoveStaleShmJobs(pmiPrefix) // leftovers of jobs whose first rank died before the unlink
		name := fmt.Sprintf("%s%d-%d", pmiPrefix, os.Getpid(), time.Now().UnixNano())
		if seg, failed = engine.CreateShmJob(name, len(local)); failed != nil {
			name = pmiNone
		}
		if err := x.Put(pmiKeySegment+strconv.Itoa(me), name); err != nil && failed == nil {
			failed = err
		}
		if failed != nil {
			failed = fmt.Errorf("creating this host's shared-memory segment: %w", failed)
		}
	}
	var link nic.Link
	var bulk *nic.StreamListener
	var epoch uint32
	var cards []string
	if len(local) < n { // on every rank alike: the job spans hosts
		card := pmiNone
		var err error
		var self engine.NetPeer
		nc := o.net
		nc.Share = nic.Share{Index: slices.Index(local, me), Count: len(local)}
		nc.Ranks = n
		if nc.Interface == "" {
			nc.PeerAddrs, err = peerAddrs(addrs, local)
		}
		if err == nil {
			link, bulk, self, err = engine.OpenNetLink(cookie, nc)
		}
		if err == nil {
			card, epoch = self.String(), self.Epoch
		} else if failed == nil {
			failed = err
		}
		if cards, err = x.Allgather(pmiKeyCard, card); err != nil && failed == nil {
			failed = fmt.Errorf("gathering the ranks' network cards: %w", err)
		}
	} else if err := x.Barrier(); err != nil && failed == nil {
		failed = err
	}
	closeAll := func() {
		if link != nil {
			link.Close()
		}
		if bulk != nil {
			bulk.Close()
		}
		if seg != nil {
			if me == leader {
				seg.Remove()
			}
			seg.Close()
		}
	}
	if failed != nil {
		closeAll()
		return fail("preparing to join the job", failed)
	}

	// 3. Attach and join.
	if len(local) > 1 && me != leader {
		name, err := x.Get(pmiKeySegment + strconv.Itoa(leader))
		if err == nil && name == pmiNone {
			err = fmt.Errorf("rank %d could not create this host's segment (see its error)", leader)
		}
		if err == nil {
			seg, err = engine.OpenShmSegment(name)
		}
		if err != nil {
			closeAll()
			return fail("opening this host's segment", err)
		}
	}
	peers := make([]engine.NetPeer, n)
	if link != nil {
		for r := range n {
			if slices.Contains(local, r) {
				continue
			}
			var err error
			if cards[r] == pmiNone {
				err = errors.New("the rank could not open its network link (see its error)")
			} else {
				peers[r], err = engine.ParseNetPeer(cards[r])
			}
			if err != nil {
				closeAll()
				return fail(fmt.Sprintf("reading rank %d's network card", r), err)
			}
		}
	}
	ep, err := engine.Join(engine.JobSpec{Rank: me, Size: n, Local: local, Seg: seg, Link: link, Bulk: bulk,
		Cookie: cookie, Epoch: epoch, Peers: peers, Key: key, Progress: o.progress, MachineRanks: machineRanks})
	if err != nil {
		closeAll()
		return fail("joining the job", err)
	}
	link, bulk = nil, nil // the endpoint's now
	if err := x.Barrier(); err != nil {
		ep.Close()
		closeAll()
		return fail("waiting for every rank to join", err)
	}
	if seg != nil && me == leader {
		if err := seg.Remove(); err != nil {
			ep.Close()
			seg.Close()
			return fail("unlinking this host's segment", err)
		}
	}
	p := newProc(ep, nil)
	if len(local) < n {
		p.hosts = hostTable(hosts)
	}
	if seg != nil {
		p.closer = func() { seg.Close() }
	}
	return p, nil
}

// hostTable returns, by rank, the lowest rank on the same host as it: the
// proc's table of hosts (collhier.go).
func hostTable(hosts []string) []int32 {
	first := make(map[string]int32, len(hosts))
	t := make([]int32, len(hosts))
	for r, h := range hosts {
		if _, ok := first[h]; !ok {
			first[h] = int32(r)
		}
		t[r] = first[h]
	}
	return t
}

// hostSep parts a rank's host from its addresses in its value under
// pmiKeyHost; engine.HostID has no '|'.
const hostSep = "|"

// hostValue is what this rank publishes under pmiKeyHost: its host, and
// the IPv4 addresses of its interfaces (nic.LocalCandidates, written by
// nic.FormatAddrs) after hostSep where it has any, by which its peers
// choose the interface they reach it on.
func hostValue(host string) string {
	cands, err := nic.LocalCandidates()
	if err != nil || len(cands) == 0 {
		return host
	}
	return host + hostSep + nic.FormatAddrs(cands)
}

// peerAddrs reads the addresses of the ranks not in local from addrs, by
// rank: one entry for each such rank, in rank order.
func peerAddrs(addrs []string, local []int) ([][]netip.Prefix, error) {
	out := make([][]netip.Prefix, 0, len(addrs)-len(local))
	for r, a := range addrs {
		if slices.Contains(local, r) {
			continue
		}
		p, err := nic.ParseAddrs(a)
		if err != nil {
			return nil, fmt.Errorf("reading rank %d's interface addresses: %w", r, err)
		}
		out = append(out, p)
	}
	return out, nil
}
