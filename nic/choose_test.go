package nic

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/tachyon-hpc/tachyon/internal/testcvar"
)

func prefixes(s ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(s))
	for i, w := range s {
		out[i] = netip.MustParsePrefix(w)
	}
	return out
}

// TestChoose: the interface whose subnet holds the most peers, ties to
// the default route's and then by name; the default route's where no
// peer shares a subnet.
func TestChoose(t *testing.T) {
	mgmt := Candidate{"eth0", prefixes("10.1.7.5/24")}
	fabric := Candidate{"ib0", prefixes("198.18.5.3/24")}
	fabric2 := Candidate{"ib1", prefixes("198.19.5.3/24")}
	both := Candidate{"bond0", prefixes("198.18.5.3/24", "198.19.0.3/16")}
	peer := func(s ...string) []netip.Prefix { return prefixes(s...) }
	for _, c := range []struct {
		name  string
		cands []Candidate
		peers [][]netip.Prefix
		def   string
		want  string
		why   string
	}{
		{"fabric holds every peer", []Candidate{mgmt, fabric}, [][]netip.Prefix{
			peer("10.2.7.6/24", "198.18.5.4/24"), peer("10.3.7.7/24", "198.18.5.5/24")}, "eth0",
			"ib0", "2 of 2 peers on its subnet 198.18.5.0/24"},
		{"most peers win", []Candidate{mgmt, fabric, fabric2}, [][]netip.Prefix{
			peer("198.18.5.4/24"), peer("198.19.5.9/24"), peer("198.19.5.10/24")}, "eth0",
			"ib1", "2 of 3 peers on its subnet 198.19.5.0/24"},
		{"a tie goes to the default route", []Candidate{fabric, mgmt}, [][]netip.Prefix{
			peer("10.1.7.6/24", "198.18.5.4/24")}, "eth0",
			"eth0", "1 of 1 peers on its subnet 10.1.7.0/24"},
		{"then to the first name", []Candidate{fabric2, fabric}, [][]netip.Prefix{
			peer("198.18.5.4/24", "198.19.5.4/24")}, "eth0",
			"ib0", "1 of 1 peers on its subnet 198.18.5.0/24"},
		{"no shared subnet: the default route", []Candidate{mgmt, fabric}, [][]netip.Prefix{
			peer("10.9.7.6/24", "198.20.5.4/24")}, "eth0",
			"eth0", "default route, no peer on a subnet of this host's"},
		{"no shared subnet, no default route: the first", []Candidate{fabric, mgmt}, [][]netip.Prefix{
			peer("10.9.7.6/24")}, "",
			"ib0", "first interface up with an IPv4 address, no peer on a subnet of this host's"},
		{"no peers", []Candidate{mgmt, fabric}, nil, "eth0", "eth0", "default route"},
		{"a peer that published nothing counts for none", []Candidate{mgmt, fabric}, [][]netip.Prefix{
			nil, peer("198.18.5.9/24")}, "eth0",
			"ib0", "1 of 2 peers on its subnet 198.18.5.0/24"},
		{"the peer's own prefix must hold this address", []Candidate{mgmt, fabric}, [][]netip.Prefix{
			peer("198.18.5.9/30")}, "eth0",
			"eth0", "default route, no peer on a subnet of this host's"},
		{"an interface of two subnets counts a peer once", []Candidate{both, fabric2}, [][]netip.Prefix{
			peer("198.18.5.4/24", "198.19.5.4/16"), peer("198.19.5.5/16"), peer("198.18.5.6/24")}, "",
			"bond0", "3 of 3 peers on its subnets 198.18.5.0/24 198.19.0.0/16"},
		{"a peer whose /24 does not hold this /16 address", []Candidate{both, fabric2}, [][]netip.Prefix{
			peer("198.19.5.5/24"), peer("198.19.5.6/24")}, "",
			"ib1", "2 of 2 peers on its subnet 198.19.5.0/24"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := choose(c.cands, c.peers, c.def)
			if err != nil || got.Name != c.want || got.Why != c.why {
				t.Fatalf("choose = %+v, %v; want %s (%s)", got, err, c.want, c.why)
			}
			// Every rank of a host sees the peers in the same order; the
			// choice must not depend on it anyway.
			rev := slices.Clone(c.peers)
			slices.Reverse(rev)
			if again, _ := choose(c.cands, rev, c.def); again.Name != got.Name {
				t.Fatalf("with the peers reversed: %s, not %s", again.Name, got.Name)
			}
		})
	}
	if _, err := choose(nil, nil, ""); !errors.Is(err, ErrInterface) {
		t.Fatalf("no candidates: %v, want ErrInterface", err)
	}
}

// TestFormatAddrs: what FormatAddrs writes ParseAddrs reads, at most 8
// addresses; anything else is ErrConfig.
func TestFormatAddrs(t *testing.T) {
	cands := []Candidate{{"eth0", prefixes("10.1.7.5/24", "10.1.8.5/16")}, {"ib0", prefixes("198.18.5.3/24")}}
	s := FormatAddrs(cands)
	if s != "10.1.7.5/24+10.1.8.5/16+198.18.5.3/24" {
		t.Fatalf("FormatAddrs = %q", s)
	}
	got, err := ParseAddrs(s)
	if err != nil || !slices.Equal(got, prefixes("10.1.7.5/24", "10.1.8.5/16", "198.18.5.3/24")) {
		t.Fatalf("ParseAddrs(%q) = %v, %v", s, got, err)
	}
	if got, err := ParseAddrs(""); err != nil || got != nil {
		t.Fatalf("ParseAddrs(\"\") = %v, %v", got, err)
	}
	var many []Candidate
	for i := range 12 {
		many = append(many, Candidate{"d", []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte(i), 1}), 24)}})
	}
	if got, err := ParseAddrs(FormatAddrs(many)); err != nil || len(got) != maxPublished {
		t.Fatalf("12 addresses: parsed %d (want %d), %v", len(got), maxPublished, err)
	}
	for _, bad := range []string{"10.0.0.1", "fd00::1/64", "10.0.0.1/24+", "x/24", "10.0.0.1/24+10.0.0.2/24+10.0.0.3/24+10.0.0.4/24+10.0.0.5/24+10.0.0.6/24+10.0.0.7/24+10.0.0.8/24+10.0.0.9/24"} {
		if _, err := ParseAddrs(bad); !errors.Is(err, ErrConfig) {
			t.Errorf("ParseAddrs(%q): %v, want ErrConfig", bad, err)
		}
	}
}

// TestChooseInterfaceSet: nic_interface wins whatever the peers.
func TestChooseInterfaceSet(t *testing.T) {
	testcvar.Set(t, "nic_interface", "fab7")
	c, err := ChooseInterface([][]netip.Prefix{prefixes("198.18.5.4/24")})
	if err != nil || c != (InterfaceChoice{Name: "fab7", Why: "nic_interface"}) || !InterfaceSet() {
		t.Fatalf("ChooseInterface with nic_interface=fab7: %+v, %v (InterfaceSet %v)", c, err, InterfaceSet())
	}
}
