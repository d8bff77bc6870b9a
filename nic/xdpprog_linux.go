//go:build linux

package nic

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/netip"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// This file holds the XDP program of the AF_XDP data plane and the maps it
// uses. The program is assembled in Go with cilium/ebpf's asm package, so no
// C compiler or ELF object is needed. It is the equivalent of this C:
//
//	SEC("xdp") int tachyon_xdp(struct xdp_md *ctx)
//	{
//		__u32 zero = 0;
//		struct config *cfg = bpf_map_lookup_elem(&config, &zero);
//		if (!cfg || cfg->port == 0)
//			goto pass;
//		void *data = (void *)(long)ctx->data;
//		void *data_end = (void *)(long)ctx->data_end;
//		if (data + 42 > data_end)
//			goto pass;
//		if (eth->h_proto != htons(ETH_P_IP))
//			goto pass;
//		if (*(__u8 *)ip != 0x45)                     // IPv4, no options
//			goto pass;
//		if (ip->frag_off & htons(IP_MF | IP_OFFSET)) // a fragment
//			goto pass;
//		if (ip->protocol != IPPROTO_UDP)
//			goto pass;
//		if (ip->daddr != cfg->addr || udp->dest != cfg->port)
//			goto pass;
//		if (cfg->drop_threshold && (__u64)bpf_get_prandom_u32() < cfg->drop_threshold)
//			goto drop;
//		count(REDIRECTED);
//		return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
//	drop:
//		count(DROPPED);
//		return XDP_DROP;
//	pass:
//		count(PASSED);
//		return XDP_PASS;
//	}

// XDP return codes (enum xdp_action).
const (
	xpActDrop     = 1
	xpActPass     = 2
	xpActRedirect = 4
)

// Indices of the counters map.
const (
	xpCountRedirected = 0
	xpCountPassed     = 1
	xpCountDropped    = 2
	xpNumCounters     = 3
)

// The program's own constants; the frame's offsets are frame.go's.
const (
	xpIPVerIHL     = 0x45   // IPv4, IHL 5 (20 bytes, no options)
	xpIPFragMask   = 0x3fff // IP_MF | IP_OFFSET
	xpCtxData      = 0      // struct xdp_md: data
	xpCtxDataEnd   = 4      // struct xdp_md: data_end
	xpCtxRxQueue   = 16     // struct xdp_md: rx_queue_index
	xpConfigSize   = 16     // value size of the config map
	xpCfgAddr      = 0      // config: IPv4 address, network order
	xpCfgPort      = 4      // config: UDP port, network order
	xpCfgThreshold = 8      // config: u64 drop threshold, native order
	xpStackKey     = -4     // the u32 map key on the stack
)

// xdpObjects is the XDP program and its maps, for one interface.
//
// setTarget and setDropRate read, modify and write the same config entry, so
// they must not be called concurrently with each other.
type xdpObjects struct {
	prog     *ebpf.Program
	xsks     *ebpf.Map
	config   *ebpf.Map
	counters *ebpf.Map
}

// newXDPObjects creates the maps and loads the program; queues is the
// XSKMap's size (>= 1). The program passes every frame until setTarget is
// called. The caller must Close the result. If the verifier rejects the
// program, the error carries the whole verifier log and wraps the
// *ebpf.VerifierError.
func newXDPObjects(queues int) (*xdpObjects, error) {
	if queues < 1 || int64(queues) > math.MaxUint32 {
		return nil, fmt.Errorf("nic: XDP socket map size %d: must be in [1, %d]", queues, uint32(math.MaxUint32))
	}
	o := &xdpObjects{}
	var err error
	o.xsks, err = ebpf.NewMap(&ebpf.MapSpec{
		Name:       "tachyon_xsks",
		Type:       ebpf.XSKMap,
		KeySize:    4,
		ValueSize:  4,
		MaxEntries: uint32(queues),
	})
	if err != nil {
		return nil, fmt.Errorf("nic: creating the XDP socket map: %w", err)
	}
	o.config, err = ebpf.NewMap(&ebpf.MapSpec{
		Name:       "tachyon_config",
		Type:       ebpf.Array,
		KeySize:    4,
		ValueSize:  xpConfigSize,
		MaxEntries: 1,
	})
	if err != nil {
		o.Close()
		return nil, fmt.Errorf("nic: creating the XDP config map: %w", err)
	}
	o.counters, err = ebpf.NewMap(&ebpf.MapSpec{
		Name:       "tachyon_counts",
		Type:       ebpf.PerCPUArray,
		KeySize:    4,
		ValueSize:  8,
		MaxEntries: xpNumCounters,
	})
	if err != nil {
		o.Close()
		return nil, fmt.Errorf("nic: creating the XDP counters map: %w", err)
	}
	o.prog, err = ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "tachyon_xdp",
		Type:         ebpf.XDP,
		License:      "Dual MIT/GPL", // GPL-compatible, so GPL-only helpers stay usable
		Instructions: xdpInstructions(o.xsks.FD(), o.config.FD(), o.counters.FD()),
	})
	if err != nil {
		o.Close()
		// %+w prints the whole verifier log of an *ebpf.VerifierError.
		return nil, fmt.Errorf("nic: loading the XDP program: %+w", err)
	}
	return o, nil
}

// xpNetOrder16 is the value a native-endian 16-bit load from the packet yields
// for the network-order (big-endian) value v, like htons(v).
func xpNetOrder16(v uint16) int32 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return int32(binary.NativeEndian.Uint16(b[:]))
}

// xdpInstructions assembles the program, referring to the maps by fd. The
// instructions are in the order a frame meets them; each step is commented
// with the C it stands for.
func xdpInstructions(xsksFD, configFD, countersFD int) asm.Instructions {
	insns := asm.Instructions{
		// struct xdp_md *ctx = r1; kept in r6 across helper calls.
		asm.Mov.Reg(asm.R6, asm.R1),

		// __u32 zero = 0; struct config *cfg = bpf_map_lookup_elem(&config, &zero);
		asm.StoreImm(asm.RFP, xpStackKey, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, configFD),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, xpStackKey),
		asm.FnMapLookupElem.Call(),
		// if (!cfg) goto pass; cfg is kept in r7.
		asm.JEq.Imm(asm.R0, 0, "pass"),
		asm.Mov.Reg(asm.R7, asm.R0),
		// if (cfg->port == 0) goto pass; /* not configured yet */
		asm.LoadMem(asm.R4, asm.R7, xpCfgPort, asm.Half),
		asm.JEq.Imm(asm.R4, 0, "pass"),

		// void *data = ctx->data; void *data_end = ctx->data_end;
		asm.LoadMem(asm.R2, asm.R6, xpCtxData, asm.Word),
		asm.LoadMem(asm.R3, asm.R6, xpCtxDataEnd, asm.Word),
		// if (data + 42 > data_end) goto pass; /* Ethernet + IPv4 + UDP */
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, FrameOverhead),
		asm.JGT.Reg(asm.R4, asm.R3, "pass"),

		// if (eth->h_proto != htons(ETH_P_IP)) goto pass; /* no VLAN either */
		asm.LoadMem(asm.R4, asm.R2, offEthType, asm.Half),
		asm.JNE.Imm(asm.R4, xpNetOrder16(ethTypeIPv4), "pass"),

		// if (*(__u8 *)ip != 0x45) goto pass; /* IPv4 without options */
		asm.LoadMem(asm.R4, asm.R2, offIPVerIHL, asm.Byte),
		asm.JNE.Imm(asm.R4, xpIPVerIHL, "pass"),

		// if (ip->frag_off & htons(IP_MF | IP_OFFSET)) goto pass; /* DF may be set */
		asm.LoadMem(asm.R4, asm.R2, offIPFrag, asm.Half),
		asm.JSet.Imm(asm.R4, xpNetOrder16(xpIPFragMask), "pass"),

		// if (ip->protocol != IPPROTO_UDP) goto pass;
		asm.LoadMem(asm.R4, asm.R2, offIPProto, asm.Byte),
		asm.JNE.Imm(asm.R4, ipProtoUDP, "pass"),

		// if (ip->daddr != cfg->addr) goto pass;
		asm.LoadMem(asm.R4, asm.R2, offIPDst, asm.Word),
		asm.LoadMem(asm.R5, asm.R7, xpCfgAddr, asm.Word),
		asm.JNE.Reg(asm.R4, asm.R5, "pass"),

		// if (udp->dest != cfg->port) goto pass;
		asm.LoadMem(asm.R4, asm.R2, offUDPDst, asm.Half),
		asm.LoadMem(asm.R5, asm.R7, xpCfgPort, asm.Half),
		asm.JNE.Reg(asm.R4, asm.R5, "pass"),

		// The frame is ours.
		// if (cfg->drop_threshold && (__u64)bpf_get_prandom_u32() < cfg->drop_threshold) goto drop;
		asm.LoadMem(asm.R7, asm.R7, xpCfgThreshold, asm.DWord),
		asm.JEq.Imm(asm.R7, 0, "redirect"),
		asm.FnGetPrandomU32.Call(),
		asm.JLT.Reg(asm.R0, asm.R7, "drop"),
	}
	// redirect: counters[REDIRECTED]++;
	insns = append(insns, xpCountInsns(countersFD, xpCountRedirected, "redirect", "counted_redirect")...)
	insns = append(insns,
		// return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
		asm.LoadMapPtr(asm.R1, xsksFD).WithSymbol("counted_redirect"),
		asm.LoadMem(asm.R2, asm.R6, xpCtxRxQueue, asm.Word),
		asm.Mov.Imm(asm.R3, xpActPass),
		asm.FnRedirectMap.Call(),
		asm.Return(),
	)
	// drop: counters[DROPPED]++;
	insns = append(insns, xpCountInsns(countersFD, xpCountDropped, "drop", "counted_drop")...)
	insns = append(insns,
		// return XDP_DROP;
		asm.Mov.Imm(asm.R0, xpActDrop).WithSymbol("counted_drop"),
		asm.Return(),
	)
	// pass: counters[PASSED]++;
	insns = append(insns, xpCountInsns(countersFD, xpCountPassed, "pass", "counted_pass")...)
	insns = append(insns,
		// return XDP_PASS;
		asm.Mov.Imm(asm.R0, xpActPass).WithSymbol("counted_pass"),
		asm.Return(),
	)
	return insns
}

// xpCountInsns is `__u64 *c = bpf_map_lookup_elem(&counters, &index); if (c)
// *c += 1;`. Its first instruction is labelled label; it continues at the
// instruction labelled next. A plain add is enough: the map is per-CPU. It
// clobbers r0-r5.
func xpCountInsns(countersFD int, index int32, label, next string) asm.Instructions {
	return asm.Instructions{
		// __u32 key = index;
		asm.StoreImm(asm.RFP, xpStackKey, int64(index), asm.Word).WithSymbol(label),
		// __u64 *c = bpf_map_lookup_elem(&counters, &key);
		asm.LoadMapPtr(asm.R1, countersFD),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, xpStackKey),
		asm.FnMapLookupElem.Call(),
		// if (!c) goto next;
		asm.JEq.Imm(asm.R0, 0, next),
		// *c += 1;
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		asm.Add.Imm(asm.R1, 1),
		asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord),
	}
}

// readConfig returns the config entry.
func (o *xdpObjects) readConfig() ([xpConfigSize]byte, error) {
	var v [xpConfigSize]byte
	if err := o.config.Lookup(uint32(0), &v); err != nil {
		return v, fmt.Errorf("nic: reading the XDP config: %w", err)
	}
	return v, nil
}

// setTarget makes frames for ip:port (ip an IPv4 netip.Addr, or an
// IPv4-mapped IPv6 one) ours. It keeps the drop threshold. Port 0 is an
// error: no UDP datagram goes to port 0.
func (o *xdpObjects) setTarget(ip netip.Addr, port uint16) error {
	ip = ip.Unmap()
	if !ip.Is4() {
		return fmt.Errorf("nic: XDP target %v: not an IPv4 address", ip)
	}
	if port == 0 {
		return errors.New("nic: XDP target port 0: not a UDP port")
	}
	v, err := o.readConfig()
	if err != nil {
		return err
	}
	a := ip.As4()
	copy(v[xpCfgAddr:xpCfgAddr+4], a[:])
	binary.BigEndian.PutUint16(v[xpCfgPort:xpCfgPort+2], port)
	v[xpCfgPort+2], v[xpCfgPort+3] = 0, 0
	if err := o.config.Put(uint32(0), v); err != nil {
		return fmt.Errorf("nic: setting the XDP target %v:%d: %w", ip, port, err)
	}
	return nil
}

// xdpDropThreshold is the config threshold for drop probability p in [0, 1]:
// a frame is dropped when a uniform u32 is below it, so 0 drops none and
// 2^32 drops all.
func xdpDropThreshold(p float64) (uint64, error) {
	if math.IsNaN(p) || p < 0 || p > 1 {
		return 0, fmt.Errorf("nic: XDP drop rate %v: not in [0, 1]", p)
	}
	return uint64(p * (1 << 32)), nil
}

// setDropRate sets the probability in [0, 1] of dropping a frame of ours
// (loss tests); it returns an error outside the range or for NaN. It keeps
// the target.
func (o *xdpObjects) setDropRate(p float64) error {
	th, err := xdpDropThreshold(p)
	if err != nil {
		return err
	}
	v, err := o.readConfig()
	if err != nil {
		return err
	}
	binary.NativeEndian.PutUint64(v[xpCfgThreshold:xpCfgThreshold+8], th)
	if err := o.config.Put(uint32(0), v); err != nil {
		return fmt.Errorf("nic: setting the XDP drop rate %v: %w", p, err)
	}
	return nil
}

// setSocket puts an AF_XDP socket fd into the xsks slot of queue; queue must
// be below the queues given to newXDPObjects. The kernel takes its own
// reference to the socket; the caller still owns fd.
func (o *xdpObjects) setSocket(queue int, fd int) error {
	if queue < 0 || uint64(queue) >= uint64(o.xsks.MaxEntries()) {
		return fmt.Errorf("nic: XDP socket for queue %d: queue not in [0, %d)", queue, o.xsks.MaxEntries())
	}
	if fd < 0 || int64(fd) > math.MaxUint32 {
		return fmt.Errorf("nic: XDP socket for queue %d: bad fd %d", queue, fd)
	}
	if err := o.xsks.Put(uint32(queue), uint32(fd)); err != nil {
		return fmt.Errorf("nic: putting the XDP socket for queue %d: %w", queue, err)
	}
	return nil
}

// xdpCounts are the program's counters summed over CPUs.
type xdpCounts struct{ Redirected, Passed, Dropped uint64 }

// counts returns the program's counters summed over CPUs. Frames counted
// Redirected include those that passed because their queue had no socket.
func (o *xdpObjects) counts() (xdpCounts, error) {
	var sums [xpNumCounters]uint64
	for i := range sums {
		var perCPU []uint64
		if err := o.counters.Lookup(uint32(i), &perCPU); err != nil {
			return xdpCounts{}, fmt.Errorf("nic: reading XDP counter %d: %w", i, err)
		}
		for _, n := range perCPU {
			sums[i] += n
		}
	}
	return xdpCounts{
		Redirected: sums[xpCountRedirected],
		Passed:     sums[xpCountPassed],
		Dropped:    sums[xpCountDropped],
	}, nil
}

// Close releases the program and maps. It may be called on a partly built
// xdpObjects and more than once.
func (o *xdpObjects) Close() error {
	var errs []error
	if o.prog != nil {
		if err := o.prog.Close(); err != nil {
			errs = append(errs, fmt.Errorf("nic: closing the XDP program: %w", err))
		}
		o.prog = nil
	}
	for _, m := range []**ebpf.Map{&o.xsks, &o.config, &o.counters} {
		if *m != nil {
			if err := (*m).Close(); err != nil {
				errs = append(errs, fmt.Errorf("nic: closing an XDP map: %w", err))
			}
			*m = nil
		}
	}
	return errors.Join(errs...)
}
