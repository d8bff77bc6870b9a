package nictest

import (
	"testing"

	"github.com/tachyon-hpc/tachyon/internal/nethost"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
	"github.com/tachyon-hpc/tachyon/nic"
)

// Hosts makes two test hosts, network namespaces joined by a veth pair,
// removed when t ends; it skips t (testskip.NoNamespaces) where this
// process cannot make them (not root).
func Hosts(t testing.TB) *nethost.Network {
	t.Helper()
	return Network(t, nethost.Config{})
}

// JumboHosts makes two test hosts as Hosts does, their veth pair of MTU
// mtu.
func JumboHosts(t testing.TB, mtu int) *nethost.Network {
	t.Helper()
	return Network(t, nethost.Config{MTU: mtu, Prefix: "tj"})
}

// RoutedHosts makes two test hosts on two subnets joined by a router
// namespace (nethost.Config.Routed), as Hosts does.
func RoutedHosts(t testing.TB) *nethost.Network {
	t.Helper()
	return Network(t, nethost.Config{Routed: true, Prefix: "rt"})
}

// Network makes the test hosts cfg describes, removed when t ends (after
// the cleanups registered later, such as those that kill the processes
// in the hosts); it skips t as Hosts does.
func Network(t testing.TB, cfg nethost.Config) *nethost.Network {
	t.Helper()
	if err := nethost.Available(); err != nil {
		testskip.Skip(t, testskip.NoNamespaces, err)
	}
	nw, err := nethost.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nw.Close() })
	return nw
}

// OpenOn opens a link of mode on h's interface, inside h's namespace,
// closed when t ends; a link that does not open fails t.
func OpenOn(t testing.TB, h *nethost.Host, mode nic.Mode, cookie uint64) nic.Link {
	t.Helper()
	var l nic.Link
	if err := h.Do(func() (err error) {
		l, err = nic.Open(nic.Config{Interface: h.Iface, Mode: mode, Cookie: cookie})
		return err
	}); err != nil {
		t.Fatalf("opening a %v link on %s: %v", mode, h.Name, err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}
