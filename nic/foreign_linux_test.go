package nic_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"

	"github.com/tachyon-hpc/tachyon/internal/testcvar"
	"github.com/tachyon-hpc/tachyon/nic"
	"github.com/tachyon-hpc/tachyon/nic/nictest"
)

// TestXDPForeignProgram: an XDP program that is not Tachyon's holds the
// interface, attached through netlink in the driver's hook as Cilium
// and ip link attach theirs. A link in ModeXDP fails with ErrRefused,
// saying another program may hold the interface; in ModeAuto it is a
// UDP link whose Status().Fallback says so; the other program stays
// attached. (docs/nic.md, On a real NIC.)
func TestXDPForeignProgram(t *testing.T) {
	nw := nictest.Hosts(t)
	h := nw.Hosts[1]
	testcvar.Set(t, "nic_rebind_wait", "50ms")
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "foreign_pass", Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2), asm.Return()}, // XDP_PASS
	})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	nlh, err := netlink.NewHandleAt(h.NS)
	if err != nil {
		t.Fatal(err)
	}
	defer nlh.Close()
	lk, err := nlh.LinkByName(h.Iface)
	if err != nil {
		t.Fatal(err)
	}
	setXDP := func(fd int) error {
		return h.Do(func() error { return netlink.LinkSetXdpFdWithFlags(lk, fd, nl.XDP_FLAGS_DRV_MODE) })
	}
	if err := setXDP(prog.FD()); err != nil {
		t.Fatal(err)
	}
	defer setXDP(-1)
	open := func(mode nic.Mode) (nic.Link, error) {
		var l nic.Link
		err := h.Do(func() (err error) {
			l, err = nic.Open(nic.Config{Interface: h.Iface, Mode: mode, Cookie: 7})
			return err
		})
		return l, err
	}
	if l, err := open(nic.ModeXDP); !errors.Is(err, nic.ErrRefused) || !strings.Contains(err.Error(), "another program may hold it") {
		if l != nil {
			l.Close()
		}
		t.Fatalf("ModeXDP beside another program: %v, want ErrRefused naming another program", err)
	}
	l, err := open(nic.ModeAuto)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if st := l.Status(); st.Mode != nic.ModeUDP || !strings.Contains(st.Fallback, "another program may hold it") {
		t.Fatalf("ModeAuto beside another program: %+v, want UDP saying why", st)
	}
	t.Logf("fallback: %s", l.Status().Fallback)
	if on, err := h.XDPAttached(); err != nil || !on {
		t.Fatalf("the other program is no longer attached (%v)", err)
	}
}
