package nic

import (
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
)

// Choosing the interface a job's rank opens its link on. A cluster's
// hosts often have several: a management network that carries the
// default route and a fast fabric that joins the job's hosts on a subnet
// of its own. Where nic_interface is not set, each rank publishes the
// IPv4 addresses of its candidates (FormatAddrs) at bootstrap, and every
// rank takes the interface on whose subnet it reaches the most peers
// directly (ChooseInterface): the choice depends only on what every rank
// of a host sees alike, so a host's ranks choose the same.

// Candidate is an interface a rank may open its link on: up, not
// loopback, with its IPv4 addresses, each with its prefix length
// (198.18.5.1/24, not masked).
type Candidate struct {
	Name  string
	Addrs []netip.Prefix
}

// InterfaceChoice is the interface a rank opens its link on and why, in
// words a user reads in the log and in Status.Chosen: "nic_interface",
// "default route", "3 of 3 peers on its subnet 198.18.5.0/24".
type InterfaceChoice struct {
	Name string
	Why  string
}

// maxPublished bounds the addresses FormatAddrs publishes, which keeps a
// rank's bootstrap value within what a PMI value holds whatever the host
// (container bridges can number dozens).
const maxPublished = 8

// LocalCandidates lists the interfaces of the calling thread's network
// namespace a link may open on: up, not loopback, with an IPv4 address;
// in the kernel's order (by index).
func LocalCandidates() ([]Candidate, error) {
	ifcs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("%w: listing interfaces: %v", ErrInterface, err)
	}
	var out []Candidate
	for _, ifc := range ifcs {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		c := Candidate{Name: ifc.Name}
		for _, a := range addrs {
			n, ok := a.(*net.IPNet)
			if !ok || n.IP.To4() == nil {
				continue
			}
			ip, _ := netip.AddrFromSlice(n.IP.To4())
			ones, bits := n.Mask.Size()
			if bits != 32 {
				continue
			}
			c.Addrs = append(c.Addrs, netip.PrefixFrom(ip, ones))
		}
		if len(c.Addrs) > 0 {
			out = append(out, c)
		}
	}
	return out, nil
}

// FormatAddrs writes the addresses of cands, each with its prefix length,
// separated by '+' ("198.18.5.1/24+10.0.0.7/16"): a word a PMI value
// takes (no space, ',' or '='). It writes at most 8, the first ones.
func FormatAddrs(cands []Candidate) string {
	var b strings.Builder
	n := 0
	for _, c := range cands {
		for _, a := range c.Addrs {
			if n == maxPublished {
				return b.String()
			}
			if n > 0 {
				b.WriteByte('+')
			}
			b.WriteString(a.String())
			n++
		}
	}
	return b.String()
}

// ParseAddrs reads what FormatAddrs writes ("" is no address): IPv4
// addresses with their prefix lengths.
func ParseAddrs(s string) ([]netip.Prefix, error) {
	if s == "" {
		return nil, nil
	}
	f := strings.Split(s, "+")
	if len(f) > maxPublished {
		return nil, fmt.Errorf("%w: %d addresses in %.60q, at most %d", ErrConfig, len(f), s, maxPublished)
	}
	out := make([]netip.Prefix, 0, len(f))
	for _, w := range f {
		p, err := netip.ParsePrefix(w)
		if err != nil || !p.Addr().Is4() {
			return nil, fmt.Errorf("%w: %q is not an IPv4 address with its prefix length", ErrConfig, w)
		}
		out = append(out, p)
	}
	return out, nil
}

// ChooseInterface returns the interface this rank opens its link on,
// given the addresses its peers (the job's ranks on other hosts, one
// entry each, as ParseAddrs reads them) published: nic_interface if set;
// else, of LocalCandidates, the one whose subnet holds the most peers
// directly (a peer counts where one of its addresses is on one of the
// interface's subnets and the subnet it gives that address holds the
// interface's address too), ties going to the default route's interface
// and then to the first name in byte order; else, where no interface
// shares a subnet with any peer (or peers is empty), the default route's
// interface, or the first candidate where there is no default route.
// Interfaces are those of the calling thread's network namespace.
func ChooseInterface(peers [][]netip.Prefix) (InterfaceChoice, error) {
	if name := ifaceVar.Get(); name != "" {
		return InterfaceChoice{Name: name, Why: "nic_interface"}, nil
	}
	cands, err := LocalCandidates()
	if err != nil {
		return InterfaceChoice{}, err
	}
	return choose(cands, peers, defaultRoute())
}

// InterfaceSet reports whether nic_interface names the interface a job's
// ranks open their links on, which ChooseInterface then returns whatever
// the peers.
func InterfaceSet() bool { return ifaceVar.Get() != "" }

// DefaultInterface returns the interface a rank with no peers to go by
// opens its link on: ChooseInterface(nil)'s.
func DefaultInterface() (string, error) {
	c, err := ChooseInterface(nil)
	return c.Name, err
}

// choose is ChooseInterface over cands (in the kernel's order), with def
// the default route's interface ("" where there is none).
func choose(cands []Candidate, peers [][]netip.Prefix, def string) (InterfaceChoice, error) {
	type score struct {
		c       Candidate
		n       int
		subnets []string // the subnets the peers were found on, in c's order
	}
	var best *score
	for _, c := range cands {
		s := score{c: c}
		for _, p := range peers {
			if on, ok := reaches(c, p); ok {
				s.n++
				if w := on.String(); !slices.Contains(s.subnets, w) {
					s.subnets = append(s.subnets, w)
				}
			}
		}
		if best == nil || better(s.n, c.Name, best.n, best.c.Name, def) {
			best = &s
		}
	}
	if best != nil && best.n > 0 {
		slices.Sort(best.subnets)
		noun := "subnet"
		if len(best.subnets) > 1 {
			noun = "subnets"
		}
		why := fmt.Sprintf("%d of %d peers on its %s %s", best.n, len(peers), noun, strings.Join(best.subnets, " "))
		return InterfaceChoice{Name: best.c.Name, Why: why}, nil
	}
	shared := ""
	if len(peers) > 0 {
		shared = ", no peer on a subnet of this host's"
	}
	if def != "" {
		return InterfaceChoice{Name: def, Why: "default route" + shared}, nil
	}
	if len(cands) > 0 {
		return InterfaceChoice{Name: cands[0].Name, Why: "first interface up with an IPv4 address" + shared}, nil
	}
	return InterfaceChoice{}, fmt.Errorf("%w: no interface up with an IPv4 address other than loopback (set nic_interface)", ErrInterface)
}

// better reports whether an interface named a that holds n peers beats
// one named b that holds m: more peers, then the default route's (def),
// then the first name in byte order.
func better(n int, a string, m int, b, def string) bool {
	if n != m {
		return n > m
	}
	if (a == def) != (b == def) {
		return a == def
	}
	return cmp.Less(a, b)
}

// reaches reports whether c reaches the peer whose addresses are p on a
// subnet of its own, and which (masked): an address of the peer on one
// of c's subnets, whose own prefix holds c's address, the first such in
// c's order.
func reaches(c Candidate, p []netip.Prefix) (netip.Prefix, bool) {
	for _, mine := range c.Addrs {
		if slices.ContainsFunc(p, func(q netip.Prefix) bool {
			return mine.Contains(q.Addr()) && q.Contains(mine.Addr())
		}) {
			return mine.Masked(), true
		}
	}
	return netip.Prefix{}, false
}
