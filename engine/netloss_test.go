package engine

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/tachyon-hpc/tachyon/asm"
	"github.com/tachyon-hpc/tachyon/nic"
	"github.com/tachyon-hpc/tachyon/progress"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// lossSizes are the sizes the both-ways stream cycles through, as the
// hwtests' job does: mostly small, some over a frame, an eager one of
// many frames and a rendezvous over the bulk lane.
var lossSizes = []int{0, 8, 8, 64, 100, 1400, 1500, 8, 5000, 8, 20000, 8}

// streamBoth sends count messages each way between ranks 0 and 1 of w,
// windows of 32 receives and sends in flight on each, and checks every
// byte. It fails the test if a window takes longer than stall.
func streamBoth(t *testing.T, w *World, count int, stall time.Duration) {
	t.Helper()
	const window = 32
	errs := make(chan error, 2)
	progress := [2]chan int{make(chan int, 1), make(chan int, 1)}
	for rank := range 2 {
		go func() {
			ep, peer := w.Endpoint(rank), 1-rank
			reqs := make([]*Request, 0, 2*window)
			bufs := make([][]byte, window)
			for base := 0; base < count; base += window {
				reqs = reqs[:0]
				for i := base; i < min(base+window, count); i++ {
					n := lossSizes[i%len(lossSizes)]
					bufs[i-base] = make([]byte, n)
					r, err := ep.Irecv(bufs[i-base], peer, i%5, 0)
					if err != nil {
						errs <- err
						return
					}
					s, err := ep.Isend(msg(n, rank*1000003+i), peer, i%5, 0, Standard)
					if err != nil {
						errs <- err
						return
					}
					reqs = append(reqs, r, s)
				}
				for j, r := range reqs {
					if _, err := r.Wait(); err != nil {
						errs <- fmt.Errorf("rank %d, messages %d on, request %d: %v", rank, base, j, err)
						return
					}
				}
				for j := 0; j < len(reqs); j += 2 {
					i := base + j/2
					if !bytes.Equal(bufs[j/2], msg(lossSizes[i%len(lossSizes)], peer*1000003+i)) {
						errs <- fmt.Errorf("rank %d: message %d differs", rank, i)
						return
					}
				}
				select {
				case progress[rank] <- base:
				default:
				}
			}
			errs <- nil
		}()
	}
	last := [2]int{}
	moved := time.Now()
	tick := time.NewTicker(stall / 10)
	defer tick.Stop()
	for done := 0; done < 2; {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
			done++
		case b := <-progress[0]:
			last[0], moved = b, time.Now()
		case b := <-progress[1]:
			last[1], moved = b, time.Now()
		case <-tick.C:
			if time.Since(moved) > stall {
				for r := range 2 {
					ep := w.Endpoint(r)
					c := ep.net.conns[1-r]
					p := &ep.peers[1-r]
					active := 0
					if ep.net.bulk != nil {
						active = ep.net.bulk.active
					}
					t.Logf("rank %d: in.s %v in.r %v hdrN %d got %d/%d active %d malformed %d; ctl %d queued %v sendq %v dataq %v out.s %v out.lost %v hdrN %d sent %d",
						r, c.in.s != nil, c.in.r != nil, c.in.hdrN, c.in.got, c.in.total, active, ep.malformed.Load(), len(p.ctl), p.queued,
						p.sendq.head != nil, p.dataq.head != nil, c.out.s != nil, c.out.lost, c.out.hdrN, c.out.sent)
					t.Logf("rank %d: snd una %d sent %d nxt %d limit %d rtoAt %d; rcv nxt %d dlv %d; bulk out q %v in want %d", r,
						c.sndUna, c.sndSent, c.sndNxt, c.sndLimit, c.rtoAt, c.rcvNxt, c.dlvNxt, c.out.q.head != nil, c.in.want)
				}
				p0, p1 := asm.LoadAcquire64(&w.Endpoint(0).polls), asm.LoadAcquire64(&w.Endpoint(1).polls)
				time.Sleep(100 * time.Millisecond)
				t.Logf("polls in 100 ms: rank 0 %d, rank 1 %d", asm.LoadAcquire64(&w.Endpoint(0).polls)-p0, asm.LoadAcquire64(&w.Endpoint(1).polls)-p1)
				t.Fatalf("no window done for %v: ranks at messages %v", stall, last)
			}
		}
	}
}

// TestNetLossBoth: a stream both ways of mixed sizes, rendezvous over
// the bulk lane among them, over a network that loses a fifth of the
// frames, finishes, and within a bound of its time without loss.
func TestNetLossBoth(t *testing.T) {
	count := 10000
	if v := os.Getenv("TACHYON_TEST_LOSS_MESSAGES"); v != "" {
		count, _ = strconv.Atoi(v)
	}
	if testing.Short() || raceEnabled {
		count = 2000
	}
	rates := []string{"0", "0.2"}
	if v := os.Getenv("TACHYON_TEST_LOSS_RATES"); v != "" {
		rates = strings.Fields(v)
	}
	for _, rate := range rates {
		t.Run("loss "+rate, func(t *testing.T) {
			w := netWorld(t, 2, "nic_drop_rate", rate)
			retx, fast, tos := pvNetRetx.Value(), pvNetFastRetx.Value(), pvNetTimeouts.Value()
			start := time.Now()
			streamBoth(t, w, count, 10*time.Second)
			el := time.Since(start)
			t.Logf("%d messages each way in %v (%.0f msg/s); sent again %d on timeouts (%d), %d fast", count, el.Round(time.Millisecond),
				float64(count)/el.Seconds(), pvNetRetx.Value()-retx, pvNetTimeouts.Value()-tos, pvNetFastRetx.Value()-fast)
			for r := range 2 {
				ep := w.Endpoint(r)
				ep.lock()
				c := ep.net.conns[1-r]
				t.Logf("rank %d: %d frames free; una %d nxt %d rcv %d dlv %d; srtt %.0f µs rttvar %.0f µs rto %.0f µs", r, freeFrames(ep.net), c.sndUna, c.sndNxt, c.rcvNxt, c.dlvNxt, progress.CountsToSeconds(c.srtt)*1e6, progress.CountsToSeconds(c.rttvar)*1e6, progress.CountsToSeconds(c.rto)*1e6)
				ep.unlock()
			}
			closeWorld(t, w)
		})
	}
}

// freeFrames returns how many frames link d can still allocate.
func freeFrames(d *netDev) int {
	var fs [1]nic.Frame
	var got []nic.Frame
	for d.link.Alloc(fs[:]) == 1 {
		got = append(got, fs[0])
	}
	d.link.Release(got)
	return len(got)
}

// TestNetStall: a transfer that stops moving while the peer still
// answers (here the receiver stops calling into the library, so its
// keeper acknowledges and answers probes but nothing releases the frames
// that came, and the sender runs out of credit) fails the sender's
// operations with ErrPeerDead and an error that names the transfer,
// within about engine_net_stall_timeout, and is counted.
func TestNetStall(t *testing.T) {
	// No injected loss, whatever the environment says: under loss the
	// window fills by retransmissions first, each of which is progress,
	// and the time to the stall is theirs, not engine_net_stall_timeout.
	w := netWorld(t, 2, "engine_net_stall_timeout", "300ms", "nic_drop_rate", "0")
	a, b := w.Endpoint(0), w.Endpoint(1)
	defer closeWorld(t, w)
	stalls := pvNetStalls.Value()
	// Met first, so both sides are past their first frames.
	go b.Send([]byte("hi"), 0, 1, 0, Standard)
	if _, err := a.Recv(make([]byte, 2), 1, 1, 0); err != nil {
		t.Fatal(err)
	}
	// b now computes: no receive, no poll. a sends more frames than a
	// window holds.
	buf := make([]byte, 1400)
	var reqs []*Request
	for i := range 2 * int(netWindow.Get()) {
		r, err := a.Isend(buf, 1, 2, 0, Standard)
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		reqs = append(reqs, r)
	}
	start := time.Now()
	var err error
	for _, r := range reqs {
		if _, err = r.Wait(); err != nil {
			break
		}
	}
	el := time.Since(start)
	if !errors.Is(err, ErrPeerDead) || !strings.Contains(err.Error(), "transfer stalled") || !strings.Contains(err.Error(), "credit below seq") {
		t.Fatalf("sends to a peer that stopped taking them: %v", err)
	}
	if el > 5*time.Second {
		t.Fatalf("the stall took %v to be reported, engine_net_stall_timeout 300ms", el)
	}
	if n := pvNetStalls.Value() - stalls; n != 1 {
		t.Fatalf("engine_net_stalls moved by %d, want 1", n)
	}
	t.Logf("after %v: %v", el.Round(time.Millisecond), err)
}
