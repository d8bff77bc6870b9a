package engine

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"testing"
	"time"
)

// incastSizes are the sizes each incast sender cycles through: one frame
// each mostly, so that a window of sends fills frames, with a small one
// and one of several frames among them.
var incastSizes = []int{1400, 1400, 8, 1400, 5000, 1400}

// incast has ranks 1 to n-1 of w send count messages each to rank 0,
// windows of 128 sends in flight, while rank 0 takes them from any
// source, windows of 128 receives posted. Every message carries its
// sender and index, and rank 0 checks that each sender's come whole and
// in order. It fails the test if rank 0 goes stall without a message, and
// returns how long the whole took.
func incast(t *testing.T, w *World, count int, stall time.Duration) time.Duration {
	t.Helper()
	const win = 128
	n := w.Size()
	errs := make(chan error, n)
	got := make(chan int, 1)
	start := time.Now()
	for r := 1; r < n; r++ {
		go func() {
			ep := w.Endpoint(r)
			reqs := make([]*Request, 0, win)
			for base := 0; base < count; base += win {
				reqs = reqs[:0]
				for i := base; i < min(base+win, count); i++ {
					b := msg(incastSizes[i%len(incastSizes)], r+i)
					binary.LittleEndian.PutUint32(b, uint32(i))
					b[4] = byte(r)
					q, err := ep.Isend(b, 0, 1, 0, Standard)
					if err != nil {
						errs <- fmt.Errorf("rank %d, message %d: %v", r, i, err)
						return
					}
					reqs = append(reqs, q)
				}
				for _, q := range reqs {
					if _, err := q.Wait(); err != nil {
						errs <- fmt.Errorf("rank %d, messages %d on: %v", r, base, err)
						return
					}
				}
			}
			errs <- nil
		}()
	}
	go func() {
		ep := w.Endpoint(0)
		next := make([]int, n)
		total := (n - 1) * count
		bufs := make([][]byte, win)
		for i := range bufs {
			bufs[i] = make([]byte, 5000)
		}
		reqs := make([]*Request, win)
		for base := 0; base < total; base += win {
			k := min(win, total-base)
			for j := range k {
				q, err := ep.Irecv(bufs[j], AnySource, 1, 0)
				if err != nil {
					errs <- err
					return
				}
				reqs[j] = q
			}
			for j := range k {
				st, err := reqs[j].Wait()
				if err != nil {
					errs <- fmt.Errorf("receive %d: %v", base+j, err)
					return
				}
				b := bufs[j][:st.Count]
				src := st.Source
				i := next[src]
				want := msg(incastSizes[i%len(incastSizes)], src+i)
				if len(want) >= 5 {
					binary.LittleEndian.PutUint32(want, uint32(i))
					want[4] = byte(src)
				}
				if string(b) != string(want) {
					errs <- fmt.Errorf("from rank %d: message %d of %d bytes is not its message %d (out of order or corrupt)", src, base+j, len(b), i)
					return
				}
				next[src]++
			}
			select {
			case got <- base + k:
			default:
			}
		}
		errs <- nil
	}()
	last, moved := 0, time.Now()
	tick := time.NewTicker(stall / 10)
	defer tick.Stop()
	for done := 0; done < n; {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
			done++
		case last = <-got:
			moved = time.Now()
		case <-tick.C:
			if time.Since(moved) > stall {
				t.Fatalf("rank 0 received nothing for %v, after %d messages", stall, last)
			}
		}
	}
	return time.Since(start)
}

// TestNetIncast: seven senders into one receiver over the network
// transport (UDP on loopback), on a clean network, with the receiver's
// credit cut so that its peers must wait for it, and with a tenth of the
// frames lost: every message comes, in order, with no stall, within a
// bound; the counters show the windows and the credit at work.
func TestNetIncast(t *testing.T) {
	count := 6000
	if testing.Short() || raceEnabled {
		count = 600
	}
	for _, c := range []struct {
		name string
		vars []string
	}{
		{"clean", nil},
		{"credit 112", []string{"engine_net_credit_frames", "112"}},
		{"loss 10%", []string{"nic_drop_rate", "0.1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			vars := append([]string{"nic_drop_rate", "0", "nic_dup_rate", "0", "nic_reorder_rate", "0",
				"engine_net_stall_timeout", "20s"}, c.vars...)
			w := netWorld(t, 8, vars...)
			defer closeWorld(t, w)
			cuts, cstalls, wstalls, retx, fast := pvNetCwndCuts.Value(), pvNetCreditStalls.Value(), pvNetCwndStalls.Value(), pvNetRetx.Value(), pvNetFastRetx.Value()
			waits, paced := pvNetPaceWaits.Value(), pvNetPaced.Value()
			el := incast(t, w, count, 10*time.Second)
			d := w.Endpoint(0).net
			w.Endpoint(0).lock()
			credit := d.conns[1].credit
			w.Endpoint(0).unlock()
			msgs := 7 * count
			t.Logf("%d messages from 7 senders in %v (%.0f msg/s); credit %d a peer at the end; windows cut %d times, full %d times; credit used up %d times; sent again %d on timeouts, %d fast; largest window %d; paced %d times, %d frames",
				msgs, el.Round(time.Millisecond), float64(msgs)/el.Seconds(), credit, pvNetCwndCuts.Value()-cuts, pvNetCwndStalls.Value()-wstalls,
				pvNetCreditStalls.Value()-cstalls, pvNetRetx.Value()-retx, pvNetFastRetx.Value()-fast, pvNetCwndHWM.Value(),
				pvNetPaceWaits.Value()-waits, pvNetPaced.Value()-paced)
			if lim := 120 * time.Second; el > lim {
				t.Errorf("took %v, more than %v", el, lim)
			}
			var sum, begun int64
			for r := 1; r < 8; r++ {
				ep := w.Endpoint(r)
				ep.lock()
				cw := ep.net.conns[0].cwnd
				begun += int64(len(ep.net.live)) // a connection counts from its first frame
				ep.unlock()
				if cw < ep.net.cc.cwndMin || cw > ep.net.cc.cwndMax {
					t.Errorf("rank %d's window to rank 0 is %d frames, outside [%d, %d]", r, cw, ep.net.cc.cwndMin, ep.net.cc.cwndMax)
				}
				sum += pvNetCwnd.ValueOf(ep.owner)
			}
			if want := begun * int64(netCwndInit.Get()); c.name == "clean" && sum < want {
				t.Errorf("engine_net_cwnd of the senders sums to %d, less than the %d they started with on a clean network", sum, want)
			}
			switch c.name {
			case "credit 112":
				if pvNetCreditStalls.Value() == cstalls {
					t.Errorf("no sender ran out of rank 0's credit of 16 frames")
				}
			case "loss 10%":
				if pvNetCwndCuts.Value() == cuts {
					t.Errorf("no window was cut under 10%% loss")
				}
			}
		})
	}
}

// TestNetCreditShare: a rank's credit is its link's capacity (or
// engine_net_credit_frames) shared equally among the network peers that
// sent it data lately, within engine_net_credit_min and the window.
func TestNetCreditShare(t *testing.T) {
	for _, c := range []struct {
		budget string
		active int // of 7 peers
		want   uint32
	}{
		{"700", 0, 256}, {"700", 1, 256}, {"700", 7, 100}, {"700", 5, 140}, {"70", 7, 16}, {"0", 1, 0},
	} {
		t.Run(c.budget+"/"+strconv.Itoa(c.active), func(t *testing.T) {
			w := netWorld(t, 8, "engine_net_credit_frames", c.budget, "engine_net_credit_min", "16", "engine_net_window", "256",
				"engine_net_credit_active", "1m")
			defer closeWorld(t, w)
			ep := w.Endpoint(0)
			ep.lock()
			defer ep.unlock()
			d := ep.net
			d.now = d.clock()
			// Connections begin at their first frame: here the active
			// ones and others before the share, the last after it,
			// which takes it then.
			for r := 1; r < 7 || r == c.active; r++ {
				d.conns[r].begin()
			}
			for r := 1; r <= c.active; r++ {
				d.conns[r].dataAt = d.now
			}
			d.shareCredit()
			if c.active < 7 {
				d.conns[7].begin()
			}
			want := c.want
			if want == 0 {
				// The link's: a UDP socket's buffer in frames.
				capa := uint32(d.link.Status().RxCapacity)
				if capa == 0 {
					t.Fatal("a UDP link reports no receive capacity")
				}
				want = min(max(capa, 16), 256)
			}
			for r := 1; r < 8; r++ {
				if got := d.conns[r].credit; got != want {
					t.Fatalf("rank %d's credit %d, want %d", r, got, want)
				}
			}
		})
	}
}
