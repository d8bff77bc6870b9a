package nic_test

import (
	"fmt"
	"testing"

	"github.com/tachyon-hpc/tachyon/internal/affinity"
	"github.com/tachyon-hpc/tachyon/internal/nethost"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
	"github.com/tachyon-hpc/tachyon/nic"
	"github.com/tachyon-hpc/tachyon/nic/nictest"
	"golang.org/x/sys/unix"
)

// BenchmarkKernelTCP streams blocking writes of one size over a kernel
// TCP connection from host 0 (CPU 0) to host 1 (CPU 1), two test hosts
// joined by a veth pair of MTU 9000 as the bench's -net hosts are, and
// reports MB/s: what the engine's bulk lane, such a connection, costs the
// kernel. In plain no XDP program is attached; in xdp each host has an
// AF_XDP link open, so every segment meets the link's program at the
// generic hook, which copies it first (on a veth the segments are clones
// TCP keeps for retransmission). docs/network.md compares them with the
// lane.
func BenchmarkKernelTCP(b *testing.B) {
	for _, attach := range []bool{false, true} {
		name := "plain"
		if attach {
			name = "xdp"
		}
		b.Run(name, func(b *testing.B) {
			if err := nethost.Available(); err != nil {
				testskip.Skip(b, testskip.NoNamespaces, err)
			}
			nw, err := nethost.New(nethost.Config{MTU: 9000})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { nw.Close() })
			if attach {
				for _, h := range nw.Hosts {
					nictest.OpenOn(b, h, nic.ModeXDP, testCookie)
				}
			}
			for _, size := range []int{64 << 10, 256 << 10, 1 << 20} {
				b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
					b.SetBytes(int64(size))
					if err := streamTCP(b, nw, size); err != nil {
						b.Fatal(err)
					}
				})
			}
		})
	}
}

// streamTCP sends b.N writes of size bytes from host 0 to host 1 and
// waits for the receiver to say it has read them all.
func streamTCP(b *testing.B, nw *nethost.Network, size int) error {
	srv, cli := nw.Hosts[1], nw.Hosts[0]
	total := b.N * size
	port := make(chan int, 1)
	wait := srv.Go(func() error {
		defer close(port)
		if _, err := affinity.Bind(serverCPU); err != nil {
			return err
		}
		ln, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(ln)
		if err := unix.Bind(ln, &unix.SockaddrInet4{Addr: srv.IP.As4()}); err != nil {
			return err
		}
		if err := unix.Listen(ln, 1); err != nil {
			return err
		}
		sa, err := unix.Getsockname(ln)
		if err != nil {
			return err
		}
		port <- sa.(*unix.SockaddrInet4).Port
		fd, _, err := unix.Accept(ln)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		buf := make([]byte, size)
		for got := 0; got < total; {
			n, err := unix.Read(fd, buf)
			if err != nil {
				return err
			}
			if n == 0 {
				return fmt.Errorf("connection closed after %d of %d bytes", got, total)
			}
			got += n
		}
		_, err = unix.Write(fd, buf[:1])
		return err
	})
	p, ok := <-port
	if !ok {
		return wait()
	}
	err := cli.Do(func() error {
		if _, err := affinity.Bind(clientCPU); err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.Connect(fd, &unix.SockaddrInet4{Addr: srv.IP.As4(), Port: p}); err != nil {
			return err
		}
		buf := make([]byte, size)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			for off := 0; off < size; {
				n, err := unix.Write(fd, buf[off:])
				if err != nil {
					return err
				}
				off += n
			}
		}
		if _, err := unix.Read(fd, buf[:1]); err != nil {
			return err
		}
		b.StopTimer()
		return nil
	})
	if werr := wait(); err == nil {
		err = werr
	}
	return err
}
