package engine

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/tachyon-hpc/tachyon/internal/testcvar"
	"github.com/tachyon-hpc/tachyon/nic"
)

// scaleJob joins ranks 0 and 1 of a job of n ranks, one a host, over UDP
// links on loopback: ranks 2 to n-1 have cards (links opened and never
// read) and are never sent to, as in a large job whose rank talks to one
// peer. Everything closes when tb ends.
func scaleJob(tb testing.TB, n int) (*Endpoint, *Endpoint) {
	tb.Helper()
	testcvar.Set(tb, "engine_net_bulk", "false")
	testcvar.Set(tb, "engine_net_auth", "false") // the spec carries no key
	cookie, err := randomUint64()
	if err != nil {
		tb.Fatal(err)
	}
	links := make([]nic.Link, n)
	peers := make([]NetPeer, n)
	for i := range links {
		l, err := nic.Open(nic.Config{Mode: nic.ModeUDP, Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), 0), Cookie: cookie})
		if err != nil {
			tb.Fatal(err)
		}
		links[i] = l
		peers[i] = NetPeer{Card: l.Card(), Epoch: uint32(2*i + 1)}
	}
	for _, l := range links[2:] {
		tb.Cleanup(func() { l.Close() })
	}
	var eps [2]*Endpoint
	for r := range eps {
		ep, err := Join(JobSpec{Rank: r, Size: n, Local: []int{r}, Link: links[r], Cookie: cookie, Epoch: peers[r].Epoch, Peers: peers})
		if err != nil {
			tb.Fatal(err)
		}
		eps[r] = ep
		tb.Cleanup(func() { ep.Close() })
	}
	return eps[0], eps[1]
}

// scaleSizes are the job sizes the scale benchmarks run at.
var scaleSizes = []int{2, 16, 64, 256}

// BenchmarkNetScalePoll: one empty poll (nothing in flight, nothing
// come) of rank 0 of a job of N ranks over the network: the cost should
// not grow with N (docs/network.md, "What a poll walks").
func BenchmarkNetScalePoll(b *testing.B) {
	for _, n := range scaleSizes {
		b.Run(fmt.Sprintf("peers=%d", n), func(b *testing.B) {
			ep, _ := scaleJob(b, n)
			poll := func() { // as Poll, but never put off by the progress engine's goroutine holding the endpoint
				ep.lock()
				ep.pollLocked()
				ep.unlock()
			}
			for range 1000 {
				poll()
			}
			b.ResetTimer()
			for range b.N {
				poll()
			}
		})
	}
}

// BenchmarkNetScalePingPong: ranks 0 and 1 of a job of N ranks bounce an
// 8-byte message over the network (UDP on loopback), both driven from
// the benchmark's goroutine (each Wait polls its rank), so that an op is
// the CPU work of a round trip on both sides, the kernel's included,
// without the scheduling of two goroutines on a loaded machine. The
// other N-2 peers are idle.
func BenchmarkNetScalePingPong(b *testing.B) {
	testcvar.Set(b, "nic_drop_rate", "0")
	for _, n := range scaleSizes {
		b.Run(fmt.Sprintf("peers=%d", n), func(b *testing.B) {
			a, z := scaleJob(b, n)
			buf := make([]byte, 8)
			round := func() {
				r, err := z.Irecv(buf, 0, 1, 0)
				if err == nil {
					err = a.Send(buf, 1, 1, 0, Standard)
				}
				if err == nil {
					_, err = r.Wait()
				}
				if err == nil {
					r, err = a.Irecv(buf, 1, 2, 0)
				}
				if err == nil {
					err = z.Send(buf, 0, 2, 0, Standard)
				}
				if err == nil {
					_, err = r.Wait()
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			for range 200 {
				round()
			}
			b.ResetTimer()
			for range b.N {
				round()
			}
		})
	}
}
