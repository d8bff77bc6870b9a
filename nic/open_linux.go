package nic

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tachyon-hpc/tachyon/asm"
)

// Open opens a link as cfg says; with nic_dup_rate or nic_reorder_rate
// set, one that injects those faults (WithFaults). In ModeAuto (after
// nic_mode) it tries XDP and falls back to UDP when AF_XDP cannot be had:
// no privilege, a kernel without XDP sockets, an interface that refuses,
// or no receive queue left for the link (other links hold them, or the
// interface has fewer queues than Share.Count); the link's Status says
// why, and a log record (log/slog, level Info) too. Other errors (a missing interface, an address in
// use) fail in every mode. Sockets, attachments and frame memory belong
// to the network namespace of the calling thread.
func Open(cfg Config) (Link, error) {
	l, err := open(cfg)
	if err != nil {
		return nil, err
	}
	if f := (Faults{Duplicate: dupRateVar.Get(), Reorder: reorderRateVar.Get()}); f != (Faults{}) {
		fl, err := WithFaults(l, f, cfg.Cookie)
		if err != nil {
			l.Close()
			return nil, err
		}
		return fl, nil
	}
	return l, nil
}

func open(cfg Config) (Link, error) {
	mode := cfg.Mode
	if mode == ModeAuto {
		mode = Mode(modeVar.Index())
	}
	// Each case returns a nil Link, not a nil pointer in one, on error.
	switch mode {
	case ModeXDP:
		if l, err := openXDP(cfg); err == nil {
			return l, nil
		} else {
			return nil, err
		}
	case ModeUDP:
		return udpOrNil(openUDP(cfg, ""))
	case ModeAuto:
		l, err := openXDP(cfg)
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, ErrNoPrivilege) && !errors.Is(err, ErrNoXSK) && !errors.Is(err, ErrRefused) &&
			!(cfg.Interface == "" && errors.Is(err, ErrConfig)) {
			return nil, err
		}
		slog.Info("nic: AF_XDP cannot be had; the link is a UDP socket", "interface", cfg.Interface, "why", err.Error())
		return udpOrNil(openUDP(cfg, err.Error()))
	}
	return nil, fmt.Errorf("%w: mode %v", ErrConfig, cfg.Mode)
}

func udpOrNil(l *udpLink, err error) (Link, error) {
	if err != nil {
		return nil, err
	}
	return l, nil
}

// defaultRoute returns the interface of the default IPv4 route of the
// calling thread's network namespace (/proc/thread-self/net/route), ""
// where there is none.
func defaultRoute() string {
	b, err := os.ReadFile("/proc/thread-self/net/route")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 2 && f[1] == "00000000" && f[0] != "lo" {
			return f[0]
		}
	}
	return ""
}

// lookupInterface finds the interface named name and its IPv4 address:
// want if given (which must be one of its addresses), else its first.
// It returns the address's subnet too.
func lookupInterface(name string, want netip.Addr) (*net.Interface, netip.Addr, netip.Prefix, error) {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return nil, netip.Addr{}, netip.Prefix{}, fmt.Errorf("%w: %s: %v", ErrInterface, name, err)
	}
	if ifc.Flags&net.FlagUp == 0 {
		return nil, netip.Addr{}, netip.Prefix{}, fmt.Errorf("%w: %s is down", ErrInterface, name)
	}
	if want.IsValid() && !want.Unmap().Is4() {
		return nil, netip.Addr{}, netip.Prefix{}, fmt.Errorf("%w: %v is not an IPv4 address (IPv6 is not supported yet)", ErrConfig, want)
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return nil, netip.Addr{}, netip.Prefix{}, fmt.Errorf("%w: %s's addresses: %v", ErrInterface, name, err)
	}
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || n.IP.To4() == nil {
			continue
		}
		ip, _ := netip.AddrFromSlice(n.IP.To4())
		ones, _ := n.Mask.Size()
		if !want.IsValid() || ip == want.Unmap() {
			return ifc, ip, netip.PrefixFrom(ip, ones).Masked(), nil
		}
	}
	if want.IsValid() {
		return nil, netip.Addr{}, netip.Prefix{}, fmt.Errorf("%w: %v is not an address of %s", ErrConfig, want, name)
	}
	return nil, netip.Addr{}, netip.Prefix{}, fmt.Errorf("%w: %s has no IPv4 address", ErrInterface, name)
}

// driverName asks the kernel (ETHTOOL_GDRVINFO, in the calling thread's
// network namespace) for the driver of the interface named ifc and its
// version, "" if it cannot tell.
func driverName(ifc string) (name, version string) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return "", ""
	}
	defer unix.Close(fd)
	d, err := unix.IoctlGetEthtoolDrvinfo(fd, ifc)
	if err != nil {
		return "", ""
	}
	return unix.ByteSliceToString(d.Driver[:]), unix.ByteSliceToString(d.Version[:])
}

// driverString is driverName's answer for Status: "veth 1.0".
func driverString(ifc string) string {
	n, v := driverName(ifc)
	if v != "" {
		n += " " + v
	}
	return n
}

// udpSocket opens a non-blocking IPv4 UDP socket bound to ap, and to the
// interface dev if it is not "".
func udpSocket(ap netip.AddrPort, dev string) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("socket: %w", err)
	}
	if dev != "" {
		if err := unix.SetsockoptString(fd, unix.SOL_SOCKET, unix.SO_BINDTODEVICE, dev); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("binding to %s: %w", dev, err)
		}
	}
	sa := &unix.SockaddrInet4{Port: int(ap.Port())}
	if ap.Addr().IsValid() {
		sa.Addr = ap.Addr().Unmap().As4()
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("bind %v: %w", ap, err)
	}
	return fd, nil
}

// boundPort returns the port fd is bound to.
func boundPort(fd int) (uint16, error) {
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return 0, fmt.Errorf("nic: getsockname: %w", err)
	}
	in, ok := sa.(*unix.SockaddrInet4)
	if !ok {
		return 0, fmt.Errorf("nic: socket bound to %T", sa)
	}
	return uint16(in.Port), nil
}

// setsockopt sets an AF_XDP option from a struct.
func setsockopt(fd, opt int, p unsafe.Pointer, n uintptr) error {
	if _, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(opt), uintptr(p), n, 0); e != 0 {
		return e
	}
	return nil
}

// classifyBPF maps a failure to load the XDP program to Open's errors.
func classifyBPF(err error) error {
	if errors.Is(err, unix.EPERM) {
		return fmt.Errorf("%w: %v", ErrNoPrivilege, err)
	}
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("%w: %v", ErrNoXSK, err)
	}
	return err
}

// asmLoad reads a ring index the kernel writes.
func asmLoad(p *uint32) uint32 { return asm.LoadAcquire32(p) }
