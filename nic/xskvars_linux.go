package nic

import (
	"sync"

	"github.com/tachyon-hpc/tachyon/pvar"
)

// openLinks is every XDP link of the process, and the final counts of
// those closed, for the performance variables that the kernel and the
// XDP program keep: a counter never goes down when a link closes.
var openLinks struct {
	sync.Mutex
	xsk     map[*xskLink]struct{}
	retired Stats // Kernel and Program of the closed links, summed
}

// xdpStats reads what the kernel and l's program count.
func (l *xskLink) xdpStats() Stats {
	return Stats{Kernel: l.kernelStats(), Program: l.programStats()}
}

// addXDP adds s's Kernel and Program counts to t's.
func (t *Stats) addXDP(s Stats) {
	k, p := &t.Kernel, &t.Program
	k.RxDropped += s.Kernel.RxDropped
	k.RxInvalid += s.Kernel.RxInvalid
	k.TxInvalid += s.Kernel.TxInvalid
	k.RxRingFull += s.Kernel.RxRingFull
	k.FillRingEmpty += s.Kernel.FillRingEmpty
	k.TxRingEmptyDesc += s.Kernel.TxRingEmptyDesc
	p.Redirected += s.Program.Redirected
	p.Passed += s.Program.Passed
	p.Dropped += s.Program.Dropped
	p.Foreign += s.Program.Foreign
	p.Misqueued += s.Program.Misqueued
}

// register adds l to the open links.
func (l *xskLink) register() {
	openLinks.Lock()
	defer openLinks.Unlock()
	if openLinks.xsk == nil {
		openLinks.xsk = make(map[*xskLink]struct{})
	}
	openLinks.xsk[l] = struct{}{}
}

// retire takes l out of the open links, keeping its final counts.
func (l *xskLink) retire() {
	openLinks.Lock()
	defer openLinks.Unlock()
	delete(openLinks.xsk, l)
	openLinks.retired.addXDP(l.final)
}

// xdpStat is the reader of a performance variable: get of the sum over
// the open and the closed links.
func xdpStat(get func(*Stats) uint64) func() int64 {
	return func() int64 {
		openLinks.Lock()
		defer openLinks.Unlock()
		sum := openLinks.retired
		for l := range openLinks.xsk {
			sum.addXDP(l.xdpStats())
		}
		return int64(get(&sum))
	}
}

func init() {
	k := func(name, doc string, get func(*Stats) uint64) {
		pvar.NewFunc(name, doc+" (XDP_STATISTICS of the process's AF_XDP sockets).", pvar.ClassCounter, xdpStat(get), pvar.WithUnit("frames"))
	}
	k("nic_xsk_rx_dropped", "Frames the kernel dropped for lack of room in a UMEM frame", func(s *Stats) uint64 { return s.Kernel.RxDropped })
	k("nic_xsk_rx_invalid", "Invalid descriptors the kernel found on fill rings", func(s *Stats) uint64 { return s.Kernel.RxInvalid })
	k("nic_xsk_tx_invalid", "Invalid descriptors the kernel found on transmit rings", func(s *Stats) uint64 { return s.Kernel.TxInvalid })
	k("nic_xsk_rx_ring_full", "Frames dropped because a receive ring was full", func(s *Stats) uint64 { return s.Kernel.RxRingFull })
	k("nic_xsk_fill_ring_empty", "Times a frame came while a fill ring was empty", func(s *Stats) uint64 { return s.Kernel.FillRingEmpty })
	k("nic_xsk_tx_ring_empty", "Times the kernel found a transmit ring empty", func(s *Stats) uint64 { return s.Kernel.TxRingEmptyDesc })
	p := func(name, doc string, get func(*Stats) uint64) {
		pvar.NewFunc(name, doc+" by the XDP programs of the process's links (per-CPU counters, summed).", pvar.ClassCounter, xdpStat(get), pvar.WithUnit("frames"))
	}
	p("nic_xdp_prog_redirected", "Frames redirected to AF_XDP sockets", func(s *Stats) uint64 { return s.Program.Redirected })
	p("nic_xdp_prog_passed", "Frames passed to the kernel as no link's (the count of the interface, once for each link on it)", func(s *Stats) uint64 { return s.Program.Passed })
	p("nic_xdp_prog_foreign", "Frames to a link's port without its job's cookie, dropped before they took a UMEM frame", func(s *Stats) uint64 { return s.Program.Foreign })
	p("nic_xdp_prog_misqueued", "Frames of a link that came on a receive queue where it has no socket, passed to its UDP socket", func(s *Stats) uint64 { return s.Program.Misqueued })
	p("nic_xdp_prog_dropped", "Frames of Tachyon's dropped on purpose (nic_drop_rate)", func(s *Stats) uint64 { return s.Program.Dropped })
}
