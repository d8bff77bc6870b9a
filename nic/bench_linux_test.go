package nic_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/affinity"
	"github.com/tachyon-hpc/tachyon/internal/nethost"
	"github.com/tachyon-hpc/tachyon/internal/testcvar"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
	"github.com/tachyon-hpc/tachyon/nic"
	"github.com/tachyon-hpc/tachyon/nic/nictest"
	"github.com/tachyon-hpc/tachyon/progress"
)

// The frame-level benchmarks run between two test hosts joined by a veth
// pair (root: go test -run XXX -bench . ./nic), the client pinned to CPU
// 0 in host 0 and the server to CPU 1 in host 1.
//
// BenchmarkPingPong reports the one-way latency of frames with an 8-byte
// payload (half the round trip) as p50-ns and p99-ns; ns/op is the round
// trip. Its go-udp case is the same ping-pong over Go's net.UDPConn with
// busy-polling reads, the anchor measured in the same run; c-xsk and
// c-udp run the C anchors where TACHYON_NIC_ANCHORS says they are (their
// ns/op counts the whole program, start-up and warm-up included).
//
// BenchmarkFrameRate sends frames with an 8-byte payload one way, the
// receiver granting credit every 32 frames so that none is lost for lack
// of room, and reports Mframes/s.

const benchPayload = 8

var clientCPU, serverCPU = 0, 1

func BenchmarkPingPong(b *testing.B) {
	for _, mode := range []nic.Mode{nic.ModeXDP, nic.ModeUDP} {
		b.Run(mode.String(), func(b *testing.B) {
			nw := nictest.Hosts(b)
			benchLinks(b, nw, mode, nictest.Echo, func(cl nic.Link, peer nic.Peer) error {
				p := nictest.NewPinger(cl, peer, testCookie, benchPayload, 1<<26)
				before := cl.Stats()
				err := measure(b, p.Prepare, p.RoundTrip)
				after := cl.Stats()
				rts := float64(b.N + 20000)
				b.ReportMetric(float64(after.Kicks-before.Kicks)/rts, "kicks/rt")
				b.ReportMetric(float64(after.RxWakeups-before.RxWakeups)/rts, "wakeups/rt")
				return err
			})
		})
	}
	b.Run("go-udp", benchGoUDP)
	b.Run("c-xsk", func(b *testing.B) {
		benchAnchor(b, "xsk_pingpong", func(srv, cli *nethost.Host) ([]string, []string) {
			return []string{"-S", "-i", srv.Iface, "-m", "skb", "-P", "own"},
				[]string{"-C", "-i", cli.Iface, "-d", srv.MAC.String(), "-s", cli.IP.String(), "-D", srv.IP.String(),
					"-m", "skb", "-P", "own", "-t", "100000"}
		})
	})
	b.Run("c-udp", func(b *testing.B) {
		benchAnchor(b, "udp_pingpong", func(srv, cli *nethost.Host) ([]string, []string) {
			return []string{"-S", "-B", "-l", srv.IP.String()}, []string{"-C", "-B", "-r", srv.IP.String()}
		})
	})
}

// anchorDir is a folder with the C anchors that
// ../shared/anchors/xsk/xsk-anchor.sh builds (xsk_pingpong with
// xsk_redir.bpf.o, udp_pingpong; BUILD=dir keeps them there): with
// TACHYON_NIC_ANCHORS naming it, PingPong runs them too, between hosts
// made the same way, as c-xsk (AF_XDP on libxdp, the generic hook) and
// c-udp (busy-polling kernel UDP), so that every figure and its anchor
// come from one run.
var anchorDir = os.Getenv("TACHYON_NIC_ANCHORS")

// benchAnchor runs C anchor prog's server in host 1 on CPU 1 and its
// client in host 0 on CPU 0 for b.N round trips after 20000 of warm-up,
// and reports what the client prints as p50-ns and p99-ns.
func benchAnchor(b *testing.B, prog string, args func(srv, cli *nethost.Host) (server, client []string)) {
	if anchorDir == "" {
		testskip.Skip(b, testskip.NoAnchors, "TACHYON_NIC_ANCHORS names no folder of C anchors")
	}
	bin := filepath.Join(anchorDir, prog)
	if _, err := os.Stat(bin); errors.Is(err, fs.ErrNotExist) {
		testskip.Skip(b, testskip.NoAnchors, err)
	} else if err != nil {
		b.Fatal(err)
	}

	nw := nictest.Hosts(b)
	srv, cli := nw.Hosts[1], nw.Hosts[0]
	sargs, cargs := args(srv, cli)
	server := exec.Command("taskset", append([]string{"-c", strconv.Itoa(serverCPU), bin}, sargs...)...)
	server.Dir = anchorDir
	out, err := server.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Start(server); err != nil {
		b.Fatal(err)
	}
	defer func() {
		server.Process.Kill()
		server.Wait()
	}()
	if cue, err := bufio.NewReader(out).ReadString('\n'); err != nil || !strings.HasPrefix(cue, "server:") {
		b.Fatalf("%s server: %q, %v", prog, cue, err)
	}
	go io.Copy(io.Discard, out)
	n := strconv.Itoa(b.N)
	client := exec.Command("taskset", append(append([]string{"-c", strconv.Itoa(clientCPU), bin}, cargs...),
		"-n", n, "-w", "20000", "-L", prog)...)
	client.Dir = anchorDir
	var stdout bytes.Buffer
	client.Stdout = &stdout
	if err := cli.Start(client); err != nil {
		b.Fatal(err)
	}
	if err := client.Wait(); err != nil {
		b.Fatalf("%s client: %v: %s", prog, err, stdout.String())
	}
	// "anchor NAME 8 p50=1.03 p99=1.13 mean=... us(one-way) ..."
	var p50, p99 float64
	for _, f := range strings.Fields(stdout.String()) {
		if v, ok := strings.CutPrefix(f, "p50="); ok {
			p50, _ = strconv.ParseFloat(v, 64)
		} else if v, ok := strings.CutPrefix(f, "p99="); ok {
			p99, _ = strconv.ParseFloat(v, 64)
		}
	}
	if p50 == 0 {
		b.Fatalf("%s client printed no figures: %s", prog, stdout.String())
	}
	b.ReportMetric(p50*1000, "p50-ns")
	b.ReportMetric(p99*1000, "p99-ns")
}

// benchLinks runs server on host 1 and client on host 0, each on its own
// CPU, with links of mode that know each other. server returns when stop
// reports true, which it does once client has returned.
func benchLinks(b *testing.B, nw *nethost.Network, mode nic.Mode,
	server func(l nic.Link, peer nic.Peer, stop func() bool) error, client func(nic.Link, nic.Peer) error) {
	cards := make(chan nic.Card, 1)
	var stop atomic.Bool
	srvHost, cliHost := nw.Hosts[1], nw.Hosts[0]
	wait := srvHost.Go(func() error {
		defer close(cards)
		if _, err := affinity.Bind(serverCPU); err != nil {
			return err
		}
		l, err := nic.Open(nic.Config{Interface: srvHost.Iface, Mode: mode, Cookie: testCookie})
		if err != nil {
			return err
		}
		defer l.Close()
		cards <- l.Card()
		cc, ok := <-cards
		if !ok {
			return nil
		}
		peer, err := l.AddPeer(cc)
		if err != nil {
			return err
		}
		return server(l, peer, stop.Load)
	})
	srvCard, ok := <-cards
	if !ok {
		b.Fatal(wait())
	}
	err := cliHost.Do(func() error {
		if _, err := affinity.Bind(clientCPU); err != nil {
			return err
		}
		l, err := nic.Open(nic.Config{Interface: cliHost.Iface, Mode: mode, Cookie: testCookie})
		if err != nil {
			return err
		}
		defer l.Close()
		if l.Status().Mode != mode {
			return fmt.Errorf("asked for %v, got %+v", mode, l.Status())
		}
		peer, err := l.AddPeer(srvCard)
		if err != nil {
			return err
		}
		cards <- l.Card()
		return client(l, peer)
	})
	stop.Store(true)
	if werr := wait(); err == nil {
		err = werr
	}
	if err != nil {
		b.Fatal(err)
	}
}

// measure runs rt b.N times after a warm-up and reports the one-way
// latency percentiles. Each round trip's clock starts after prepare, as
// the C anchor's starts after it has taken its frame back.
func measure(b *testing.B, prepare func(), rt func() error) error {
	for range 20000 {
		if err := rt(); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	rtts := make([]uint64, b.N)
	b.ResetTimer()
	for i := range rtts {
		prepare()
		t0 := progress.Now()
		if err := rt(); err != nil {
			return fmt.Errorf("round trip %d: %w", i, err)
		}
		rtts[i] = progress.Now() - t0
	}
	b.StopTimer()
	slices.Sort(rtts)
	pct := func(p float64) float64 { return progress.CountsToSeconds(rtts[int(p*float64(len(rtts)-1))]) * 1e9 / 2 }
	b.ReportMetric(pct(0.50), "p50-ns")
	b.ReportMetric(pct(0.99), "p99-ns")
	b.ReportMetric(pct(0.90), "p90-ns")
	b.ReportMetric(pct(0.999), "p999-ns")
	return nil
}

// benchGoUDP is the ping-pong over Go's net.UDPConn, both sides reading
// without blocking (syscall.RawConn) in a busy loop, as the anchors'
// "Go net.UDPConn busy-polling" does.
func benchGoUDP(b *testing.B) {
	nw := nictest.Hosts(b)
	srvHost, cliHost := nw.Hosts[1], nw.Hosts[0]
	var stop atomic.Bool
	ready := make(chan error, 1)
	wait := srvHost.Go(func() error {
		if _, err := affinity.Bind(serverCPU); err != nil {
			ready <- err
			return err
		}
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: srvHost.IP.AsSlice(), Port: 7778})
		ready <- err
		if err != nil {
			return err
		}
		defer c.Close()
		buf := make([]byte, 2048)
		for !stop.Load() {
			n, from, err := busyRead(c, buf, &stop)
			if err != nil || n < 0 {
				return err
			}
			if _, err := c.WriteToUDPAddrPort(buf[:n], from); err != nil {
				return err
			}
		}
		return nil
	})
	if err := <-ready; err != nil {
		b.Fatal(err)
	}
	err := cliHost.Do(func() error {
		if _, err := affinity.Bind(clientCPU); err != nil {
			return err
		}
		c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: srvHost.IP.AsSlice(), Port: 7778})
		if err != nil {
			return err
		}
		defer c.Close()
		msg := make([]byte, nic.HeaderLen+benchPayload)
		buf := make([]byte, 2048)
		var never atomic.Bool
		return measure(b, func() {}, func() error {
			if _, err := c.Write(msg); err != nil {
				return err
			}
			_, _, err := busyRead(c, buf, &never)
			return err
		})
	})
	stop.Store(true)
	wait()
	if err != nil {
		b.Fatal(err)
	}
}

// busyRead reads one datagram from c without blocking, retrying until
// one comes or stop is set (then n is -1).
func busyRead(c *net.UDPConn, buf []byte, stop *atomic.Bool) (n int, from netip.AddrPort, err error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, from, err
	}
	for {
		var rerr error
		err = rc.Read(func(fd uintptr) bool {
			var sa syscall.Sockaddr
			n, sa, rerr = syscall.Recvfrom(int(fd), buf, syscall.MSG_DONTWAIT)
			if in, ok := sa.(*syscall.SockaddrInet4); ok {
				from = netip.AddrPortFrom(netip.AddrFrom4(in.Addr), uint16(in.Port))
			}
			return true
		})
		if err != nil {
			return 0, from, err
		}
		if rerr == nil {
			return n, from, nil
		}
		if !errors.Is(rerr, syscall.EAGAIN) {
			return 0, from, rerr
		}
		if stop.Load() {
			return -1, from, nil
		}
	}
}

func BenchmarkFrameRate(b *testing.B) {
	for _, mode := range []nic.Mode{nic.ModeXDP, nic.ModeUDP} {
		b.Run(mode.String(), func(b *testing.B) {
			nw := nictest.Hosts(b)
			benchRate(b, nw, mode, benchPayload, 1)
		})
	}
}

// BenchmarkJumbo: messages of 4 and 8 KiB one way as frames over a veth
// pair of MTU 9000, each in as few frames as the link's MTU allows: with
// nic_max_mtu at 3826 (one 4 KiB UMEM chunk a frame, 3,798 bytes) and
// at 9000 (8,972 bytes, multi-buffer AF_XDP), in one run; MB/s of
// message bytes.
func BenchmarkJumbo(b *testing.B) {
	for _, mode := range []nic.Mode{nic.ModeXDP, nic.ModeUDP} {
		for _, size := range []int{4096, 8192} {
			for _, capMTU := range []int{3826, 9000} {
				b.Run(fmt.Sprintf("%v/%dB/mtu-%d", mode, size, capMTU), func(b *testing.B) {
					testcvar.Set(b, "nic_max_mtu", strconv.Itoa(capMTU))
					nw := nictest.JumboHosts(b, 9000)
					k := (size + capMTU - 28 - nic.HeaderLen - 1) / (capMTU - 28 - nic.HeaderLen) // frames a message
					benchRate(b, nw, mode, (size+k-1)/k, k)
				})
			}
		}
	}
}

// benchRate: host 0 sends b.N times perOp frames of payload bytes after
// the header to host 1, which grants credit for every 32 it receives;
// the sender keeps at most 192 outstanding, well within the rings, so
// that none is lost for lack of room.
func benchRate(b *testing.B, nw *nethost.Network, mode nic.Mode, payload, perOp int) {
	const window, grant = 192, 32
	total := b.N * perOp
	benchLinks(b, nw, mode, func(l nic.Link, peer nic.Peer, stop func() bool) error {
		var rx [64]nic.RxDesc
		var rel [64]nic.Frame
		var fs [1]nic.Frame
		var tx [1]nic.TxDesc
		got, granted := 0, 0
		for got < total {
			n := l.Receive(rx[:])
			for i := range n {
				rel[i] = rx[i].Frame
			}
			l.Release(rel[:n])
			got += n
			if got-granted >= grant || got == total {
				for l.Alloc(fs[:]) == 0 {
					if l.Poll(); stop() {
						return nil
					}
				}
				h := nic.Header{Type: nic.TypeAck, Cookie: testCookie, Ack: uint32(got)}
				h.Put(l.Bytes(fs[0]))
				tx[0] = nic.TxDesc{Frame: fs[0], Len: nic.HeaderLen, Peer: peer}
				for k, _ := l.Send(tx[:]); k == 0; k, _ = l.Send(tx[:]) {
					if l.Poll(); stop() {
						return nil
					}
				}
				granted = got
			}
			if n == 0 && stop() {
				return nil // the client has given up and says why
			}
		}
		return nil
	}, func(l nic.Link, peer nic.Peer) error {
		var fs [32]nic.Frame
		var tx [32]nic.TxDesc
		var rx [8]nic.RxDesc
		var rel [8]nic.Frame
		sent, acked := 0, 0
		b.ResetTimer()
		t0 := time.Now()
		progress := t0
		for acked < total {
			if now := time.Now(); now.Sub(progress) > 10*time.Second {
				return fmt.Errorf("sent %d, acknowledged %d of %d: stuck\n%+v", sent, acked, total, l.Stats())
			}
			if k := min(len(fs), total-sent, window-(sent-acked)); k > 0 {
				k = l.Alloc(fs[:k])
				for i := range k {
					nictest.Fill(l.Bytes(fs[i]), testCookie, uint32(sent+i), nic.HeaderLen+payload)
					tx[i] = nic.TxDesc{Frame: fs[i], Len: uint16(nic.HeaderLen + payload), Peer: peer}
				}
				n, err := l.Send(tx[:k])
				if err != nil {
					return err
				}
				l.Release(fs[n:k])
				sent += n
			}
			n := l.Receive(rx[:])
			for i := range n {
				if h, err := nic.ParseHeader(rx[i].Data); err == nil && h.Type == nic.TypeAck && int(h.Ack) > acked {
					acked, progress = int(h.Ack), time.Now()
				}
				rel[i] = rx[i].Frame
			}
			l.Release(rel[:n])
			l.Poll()
		}
		el := time.Since(t0)
		b.StopTimer()
		b.ReportMetric(float64(total)/el.Seconds()/1e6, "Mframes/s")
		if perOp > 1 || payload > benchPayload {
			b.ReportMetric(float64(total*payload)/el.Seconds()/1e6, "MB/s")
		}
		return nil
	})
}
