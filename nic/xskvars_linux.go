package nic

import (
	"sync"

	"github.com/tachyon-hpc/tachyon/pvar"
)

// openLinks is every XDP link of the process, for the performance
// variables that the kernel and the XDP program keep.
var openLinks struct {
	sync.Mutex
	xsk map[*xskLink]struct{}
}

func kernelStat(get func(*XSKStats) uint64) func() int64 {
	return func() int64 {
		openLinks.Lock()
		defer openLinks.Unlock()
		var v uint64
		for l := range openLinks.xsk {
			s := l.kernelStats()
			v += get(&s)
		}
		return int64(v)
	}
}

func programStat(get func(*ProgramStats) uint64) func() int64 {
	return func() int64 {
		openLinks.Lock()
		defer openLinks.Unlock()
		var v uint64
		for l := range openLinks.xsk {
			s := l.programStats()
			v += get(&s)
		}
		return int64(v)
	}
}

func init() {
	k := func(name, doc string, get func(*XSKStats) uint64) {
		pvar.NewFunc(name, doc+" (XDP_STATISTICS, summed over the open AF_XDP sockets).", pvar.ClassCounter, kernelStat(get), pvar.WithUnit("frames"))
	}
	k("nic_xsk_rx_dropped", "Frames the kernel dropped for lack of room in a UMEM frame", func(s *XSKStats) uint64 { return s.RxDropped })
	k("nic_xsk_rx_invalid", "Invalid descriptors the kernel found on fill rings", func(s *XSKStats) uint64 { return s.RxInvalid })
	k("nic_xsk_tx_invalid", "Invalid descriptors the kernel found on transmit rings", func(s *XSKStats) uint64 { return s.TxInvalid })
	k("nic_xsk_rx_ring_full", "Frames dropped because a receive ring was full", func(s *XSKStats) uint64 { return s.RxRingFull })
	k("nic_xsk_fill_ring_empty", "Times a frame came while a fill ring was empty", func(s *XSKStats) uint64 { return s.FillRingEmpty })
	k("nic_xsk_tx_ring_empty", "Times the kernel found a transmit ring empty", func(s *XSKStats) uint64 { return s.TxRingEmptyDesc })
	p := func(name, doc string, get func(*ProgramStats) uint64) {
		pvar.NewFunc(name, doc+" by the XDP programs of the open links (per-CPU counters, summed).", pvar.ClassCounter, programStat(get), pvar.WithUnit("frames"))
	}
	p("nic_xdp_prog_redirected", "Frames redirected to AF_XDP sockets", func(s *ProgramStats) uint64 { return s.Redirected })
	p("nic_xdp_prog_passed", "Frames passed to the kernel (not Tachyon's)", func(s *ProgramStats) uint64 { return s.Passed })
	p("nic_xdp_prog_dropped", "Frames of Tachyon's dropped on purpose (nic_drop_rate)", func(s *ProgramStats) uint64 { return s.Dropped })
}
