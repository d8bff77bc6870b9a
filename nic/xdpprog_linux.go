//go:build linux

package nic

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"
)

// This file holds the XDP program of the AF_XDP data plane and the maps it
// uses. The program is assembled in Go with cilium/ebpf's asm package, so no
// C compiler or ELF object is needed. One program serves every Tachyon link
// on an interface of a host, of this process or of others (xdpshare_linux.go):
// each link claims a slot, puts its address, cookie and drop rate there,
// its sockets in the XSKMAP entries of their receive queues, and last maps
// its UDP port to the slot. Every map is an array, whose lookups the JIT
// inlines (a hash lookup is a helper call, tens of nanoseconds a frame).
// It is the equivalent of this C:
//
//	SEC("xdp") int tachyon_xdp(struct xdp_md *ctx)
//	{
//		void *data = (void *)(long)ctx->data;
//		void *data_end = (void *)(long)ctx->data_end;
//		__u32 slot = 0;
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
//		__u32 port = udp->dest;
//		__u32 *ps = bpf_map_lookup_elem(&port_slots, &port);
//		if (!ps || !(slot = *ps))
//			goto pass;
//		struct slot *p = bpf_map_lookup_elem(&slots, &slot);
//		if (!p || ip->daddr != p->addr)
//			{ slot = 0; goto pass; }
//		// The port is a link's: from here on the frame is Tachyon's or junk.
//		if (data + 42 + 16 > data_end || *(__u64 *)(data + 50) != p->cookie)
//			goto foreign;                         // no header, or another job's
//		if (p->drop_threshold && (__u64)bpf_get_prandom_u32() < p->drop_threshold)
//			goto drop;
//		__u32 q = ctx->rx_queue_index;
//		__u32 *owner = bpf_map_lookup_elem(&queues, &q);
//		if (!owner || *owner != slot)
//			goto misqueued;                       // no socket of the link on this queue
//		count(slot, REDIRECTED);
//		return bpf_redirect_map(&xsks, q, XDP_PASS);
//	misqueued:
//		__sync_fetch_and_add(&pending[slot], 1);
//		count(slot, MISQUEUED);
//		return XDP_PASS;                              // to the link's UDP socket
//	foreign:
//		count(slot, FOREIGN);
//		return XDP_DROP;
//	drop:
//		count(slot, DROPPED);
//		return XDP_DROP;
//	pass:
//		count(0, PASSED);
//		return XDP_PASS;
//	}
//
// A frame of a link that arrives on a queue where the link has no socket
// (another rank's queue, or a queue the link does not bind) goes to the
// kernel, which delivers it to the link's UDP socket; the program counts it
// in pending, a memory-mapped array the link reads with a plain load, so
// that the link makes the system call to read that socket only when there
// is something to read (xsk_linux.go).

// XDP return codes (enum xdp_action).
const (
	xpActDrop     = 1
	xpActPass     = 2
	xpActRedirect = 4
)

// The counters of a slot: one per-CPU entry of the counts map per slot,
// and the entry of slot 0 for the frames that are no link's.
const (
	xpCountRedirected = 0 // to a socket of the slot's link
	xpCountPassed     = 1 // no link's (slot 0's entry only)
	xpCountDropped    = 2 // dropped on purpose (nic_drop_rate)
	xpCountForeign    = 3 // to the link's port without its cookie, dropped
	xpCountMisqueued  = 4 // on a queue without a socket of the link: to its UDP socket
	xpNumCounters     = 5
)

// The program's own constants; the frame's offsets are frame.go's.
const (
	xpIPVerIHL   = 0x45   // IPv4, IHL 5 (20 bytes, no options)
	xpIPFragMask = 0x3fff // IP_MF | IP_OFFSET
	xpCtxData    = 0      // struct xdp_md: data
	xpCtxDataEnd = 4      // struct xdp_md: data_end
	xpCtxRxQueue = 16     // struct xdp_md: rx_queue_index
	xpSlotSize   = 24     // value size of the slots map
	xpSlotAddr   = 0      // slot: IPv4 address, network order
	xpSlotCookie = 8      // slot: u64 job cookie, as the frame carries it
	xpSlotThresh = 16     // slot: u64 drop threshold, native order
	xpCookieOff  = FrameOverhead + offCookie
	xpStackKey   = -4 // a u32 map key on the stack
	xpStackCount = -8 // the u32 counter key
	// xpSlots is how many links one interface's program serves, slot 0
	// (the frames no link's) aside.
	xpSlots = 256
)

// xdpObjects is the XDP program and its maps, for one interface. The
// program and maps may be another process's (xdpshare_linux.go): every
// link on the interface uses the same.
//
// setDropRate reads, modifies and writes a slot, so it must not be
// called concurrently for one slot.
type xdpObjects struct {
	prog      *ebpf.Program
	frags     bool      // prog is frags-aware (loadProgram)
	xsks      *ebpf.Map // XSKMAP: receive queue -> socket
	queues    *ebpf.Map // array: receive queue -> slot of the link whose socket is there
	portSlots *ebpf.Map // array: UDP port (network order) -> slot (0: none)
	slots     *ebpf.Map // array: slot -> struct slot
	claims    *ebpf.Map // hash: slot -> port, created with BPF_NOEXIST to claim the slot
	countsMap *ebpf.Map // per-CPU array: slot -> [xpNumCounters]u64
	pending   *ebpf.Map // array, mmapable: slot -> u64 frames passed to the link's UDP socket
	pend      []byte    // pending's mapping
}

// newXDPObjects creates the maps and loads the program; queues is the
// XSKMap's size (>= 1), the interface's receive queues. The program
// passes every frame until a port is added. The caller must Close the
// result. If the verifier rejects the program, the error carries the
// whole verifier log and wraps the *ebpf.VerifierError.
func newXDPObjects(queues int) (*xdpObjects, error) {
	if queues < 1 || queues > 1<<16 {
		return nil, fmt.Errorf("nic: XDP socket map size %d: must be in [1, %d]", queues, 1<<16)
	}
	o := &xdpObjects{}
	specs := []struct {
		m    **ebpf.Map
		spec ebpf.MapSpec
	}{
		{&o.xsks, ebpf.MapSpec{Name: "tachyon_xsks", Type: ebpf.XSKMap, KeySize: 4, ValueSize: 4, MaxEntries: uint32(queues)}},
		{&o.queues, ebpf.MapSpec{Name: "tachyon_queues", Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: uint32(queues)}},
		{&o.portSlots, ebpf.MapSpec{Name: "tachyon_ports", Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1 << 16}},
		{&o.slots, ebpf.MapSpec{Name: "tachyon_slots", Type: ebpf.Array, KeySize: 4, ValueSize: xpSlotSize, MaxEntries: xpSlots}},
		{&o.claims, ebpf.MapSpec{Name: "tachyon_claims", Type: ebpf.Hash, KeySize: 4, ValueSize: 4, MaxEntries: xpSlots}},
		{&o.countsMap, ebpf.MapSpec{Name: "tachyon_counts", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8 * xpNumCounters, MaxEntries: xpSlots}},
		{&o.pending, ebpf.MapSpec{Name: "tachyon_pending", Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: xpSlots, Flags: unix.BPF_F_MMAPABLE}},
	}
	for _, s := range specs {
		m, err := ebpf.NewMap(&s.spec)
		if err != nil {
			o.Close()
			return nil, fmt.Errorf("nic: creating the XDP map %s: %w", s.spec.Name, err)
		}
		*s.m = m
	}
	if err := o.loadProgram(false); err != nil {
		o.Close()
		return nil, err
	}
	if err := o.mapPending(); err != nil {
		o.Close()
		return nil, err
	}
	return o, nil
}

// loadProgram loads the program over the maps, in place of the one
// loaded before (which it closes). With frags it is loaded frags-aware
// (BPF_F_XDP_HAS_FRAGS): a driver then lets it run on an interface whose
// MTU takes a frame over one page, which it refuses a program that
// expects every frame in one buffer. The program reads only the headers,
// which lie in a frame's first buffer, so the two differ in that flag
// alone. The generic hook runs either on any MTU, the plain one without
// the copy a frags-aware one costs each frame there (docs/network.md).
func (o *xdpObjects) loadProgram(frags bool) error {
	spec := &ebpf.ProgramSpec{
		Name:         "tachyon_xdp",
		Type:         ebpf.XDP,
		License:      "Dual MIT/GPL", // GPL-compatible, so GPL-only helpers stay usable
		Instructions: xdpInstructions(o.xsks.FD(), o.queues.FD(), o.portSlots.FD(), o.slots.FD(), o.countsMap.FD(), o.pending.FD()),
	}
	if frags {
		spec.Flags = unix.BPF_F_XDP_HAS_FRAGS
	}
	prog, err := ebpf.NewProgram(spec)
	if err != nil {
		// %+w prints the whole verifier log of an *ebpf.VerifierError.
		return fmt.Errorf("nic: loading the XDP program (frags-aware: %t): %+w", frags, err)
	}
	if o.prog != nil {
		o.prog.Close()
	}
	o.prog, o.frags = prog, frags
	return nil
}

// possibleCPUs is the number of values a per-CPU map entry holds.
func possibleCPUs() int {
	n, err := ebpf.PossibleCPU()
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// mapPending maps the pending array into this process.
func (o *xdpObjects) mapPending() error {
	b, err := unix.Mmap(o.pending.FD(), 0, 8*xpSlots, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("nic: mapping the XDP program's pending counts: %w", err)
	}
	o.pend = b
	return nil
}

// pendingOf returns the pending count of slot, which the program
// increments (atomically) for every frame it passes to the UDP socket of
// the slot's link: its reader loads it with an atomic load.
func (o *xdpObjects) pendingOf(slot uint32) *uint64 {
	return (*uint64)(unsafe.Pointer(&o.pend[8*slot]))
}

// xpNetOrder16 is the value a native-endian 16-bit load from the packet yields
// for the network-order (big-endian) value v, like htons(v).
func xpNetOrder16(v uint16) int32 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return int32(binary.NativeEndian.Uint16(b[:]))
}

// xpPortKey is port's key in the ports, counts and queues maps: the value
// a native-endian 16-bit load of the UDP destination port yields.
func xpPortKey(port uint16) uint32 { return uint32(uint16(xpNetOrder16(port))) }

// xdpInstructions assembles the program, referring to the maps by fd. The
// instructions are in the order a frame meets them; each step is commented
// with the C it stands for. r6 holds ctx, r7 the slot's entry, r8 the
// receive queue and r9 the slot across helper calls.
func xdpInstructions(xsksFD, queuesFD, portSlotsFD, slotsFD, countsFD, pendingFD int) asm.Instructions {
	// lookup is `r0 = bpf_map_lookup_elem(&map, &(u32)key)`, the key
	// from register key; it clobbers r1-r5.
	lookup := func(fd int, key asm.Register) asm.Instructions {
		return asm.Instructions{
			asm.StoreMem(asm.RFP, xpStackKey, key, asm.Word),
			asm.LoadMapPtr(asm.R1, fd),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, xpStackKey),
			asm.FnMapLookupElem.Call(),
		}
	}
	insns := asm.Instructions{
		// struct xdp_md *ctx = r1; __u32 slot = 0;
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.Mov.Imm(asm.R9, 0),

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

		// __u32 port = udp->dest;
		asm.LoadMem(asm.R4, asm.R2, offUDPDst, asm.Half),
	}
	// __u32 *ps = bpf_map_lookup_elem(&port_slots, &port);
	insns = append(insns, lookup(portSlotsFD, asm.R4)...)
	insns = append(insns,
		// if (!ps || !(slot = *ps)) goto pass;
		asm.JEq.Imm(asm.R0, 0, "pass"),
		asm.LoadMem(asm.R7, asm.R0, 0, asm.Word),
		asm.JEq.Imm(asm.R7, 0, "pass"),
	)
	// struct slot *p = bpf_map_lookup_elem(&slots, &slot);
	insns = append(insns, lookup(slotsFD, asm.R7)...)
	insns = append(insns,
		// if (!p) goto pass; p is kept in r7, the slot in r9 from here.
		asm.JEq.Imm(asm.R0, 0, "pass"),
		asm.LoadMem(asm.R9, asm.RFP, xpStackKey, asm.Word),
		asm.Mov.Reg(asm.R7, asm.R0),

		// The helper call clobbered r1-r5: data and data_end again.
		asm.LoadMem(asm.R2, asm.R6, xpCtxData, asm.Word),
		asm.LoadMem(asm.R3, asm.R6, xpCtxDataEnd, asm.Word),
		// if (data + 42 > data_end) goto not_ours; /* for the verifier: it was */
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, FrameOverhead),
		asm.JGT.Reg(asm.R4, asm.R3, "not_ours"),
		// if (ip->daddr != p->addr) { slot = 0; goto pass; }
		asm.LoadMem(asm.R4, asm.R2, offIPDst, asm.Word),
		asm.LoadMem(asm.R5, asm.R7, xpSlotAddr, asm.Word),
		asm.JNE.Reg(asm.R4, asm.R5, "not_ours"),

		// The frame is for a link: from here on it is Tachyon's or junk.
		// if (data + 42 + 16 > data_end) goto foreign; /* no cookie */
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, xpCookieOff+8),
		asm.JGT.Reg(asm.R4, asm.R3, "foreign"),
		// if (*(__u64 *)(data + 50) != p->cookie) goto foreign;
		asm.LoadMem(asm.R4, asm.R2, xpCookieOff, asm.DWord),
		asm.LoadMem(asm.R5, asm.R7, xpSlotCookie, asm.DWord),
		asm.JNE.Reg(asm.R4, asm.R5, "foreign"),

		// if (p->drop_threshold && (__u64)bpf_get_prandom_u32() < p->drop_threshold) goto drop;
		asm.LoadMem(asm.R7, asm.R7, xpSlotThresh, asm.DWord),
		asm.JEq.Imm(asm.R7, 0, "queue"),
		asm.FnGetPrandomU32.Call(),
		asm.JLT.Reg(asm.R0, asm.R7, "drop"),

		// __u32 q = ctx->rx_queue_index;
		asm.LoadMem(asm.R8, asm.R6, xpCtxRxQueue, asm.Word).WithSymbol("queue"),
	)
	// __u32 *owner = bpf_map_lookup_elem(&queues, &q);
	insns = append(insns, lookup(queuesFD, asm.R8)...)
	insns = append(insns,
		// if (!owner || *owner != slot) goto misqueued;
		asm.JEq.Imm(asm.R0, 0, "misqueued"),
		asm.LoadMem(asm.R4, asm.R0, 0, asm.Word),
		asm.JNE.Reg(asm.R4, asm.R9, "misqueued"),
	)
	// count(slot, REDIRECTED);
	insns = append(insns, xpCountInsns(countsFD, xpCountRedirected, "redirect", "counted_redirect")...)
	insns = append(insns,
		// return bpf_redirect_map(&xsks, q, XDP_PASS);
		asm.LoadMapPtr(asm.R1, xsksFD).WithSymbol("counted_redirect"),
		asm.Mov.Reg(asm.R2, asm.R8),
		asm.Mov.Imm(asm.R3, xpActPass),
		asm.FnRedirectMap.Call(),
		asm.Return(),
	)
	// misqueued: __u64 *n = bpf_map_lookup_elem(&pending, &slot);
	insns = append(insns, lookup(pendingFD, asm.R9)...)
	insns[len(insns)-5] = insns[len(insns)-5].WithSymbol("misqueued")
	insns = append(insns,
		// if (n) __sync_fetch_and_add(n, 1);
		asm.JEq.Imm(asm.R0, 0, "count_misqueued"),
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
	)
	// count(slot, MISQUEUED);
	insns = append(insns, xpCountInsns(countsFD, xpCountMisqueued, "count_misqueued", "counted_misqueued")...)
	insns = append(insns,
		// return XDP_PASS;
		asm.Mov.Imm(asm.R0, xpActPass).WithSymbol("counted_misqueued"),
		asm.Return(),
	)
	// foreign: count(slot, FOREIGN);
	insns = append(insns, xpCountInsns(countsFD, xpCountForeign, "foreign", "counted_foreign")...)
	insns = append(insns,
		// return XDP_DROP;
		asm.Mov.Imm(asm.R0, xpActDrop).WithSymbol("counted_foreign"),
		asm.Return(),
	)
	// drop: count(slot, DROPPED);
	insns = append(insns, xpCountInsns(countsFD, xpCountDropped, "drop", "counted_drop")...)
	insns = append(insns,
		// return XDP_DROP;
		asm.Mov.Imm(asm.R0, xpActDrop).WithSymbol("counted_drop"),
		asm.Return(),
		// not_ours: slot = 0; then pass.
		asm.Mov.Imm(asm.R9, 0).WithSymbol("not_ours"),
	)
	// pass: count(0, PASSED); r9 is 0 on every way here.
	insns = append(insns, xpCountInsns(countsFD, xpCountPassed, "pass", "counted_pass")...)
	insns = append(insns,
		// return XDP_PASS;
		asm.Mov.Imm(asm.R0, xpActPass).WithSymbol("counted_pass"),
		asm.Return(),
	)
	return insns
}

// xpCountInsns is `__u64 *c = bpf_map_lookup_elem(&counts, &slot); if (c)
// c[index] += 1;` with the slot in r9. Its first instruction is labelled
// label; it continues at the instruction labelled next. A plain add is
// enough: the map is per-CPU. It clobbers r0-r5.
func xpCountInsns(countsFD int, index int16, label, next string) asm.Instructions {
	return asm.Instructions{
		asm.StoreMem(asm.RFP, xpStackCount, asm.R9, asm.Word).WithSymbol(label),
		asm.LoadMapPtr(asm.R1, countsFD),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, xpStackCount),
		asm.FnMapLookupElem.Call(),
		// if (!c) goto next;
		asm.JEq.Imm(asm.R0, 0, next),
		// c[index] += 1;
		asm.LoadMem(asm.R1, asm.R0, 8*index, asm.DWord),
		asm.Add.Imm(asm.R1, 1),
		asm.StoreMem(asm.R0, 8*index, asm.R1, asm.DWord),
	}
}

// xpSlot is a slot's entry in the slots map.
type xpSlot struct {
	addr      [4]byte // network order
	cookie    uint64
	threshold uint64
}

func (p *xpSlot) bytes() []byte {
	b := make([]byte, xpSlotSize)
	copy(b[xpSlotAddr:], p.addr[:])
	binary.NativeEndian.PutUint64(b[xpSlotCookie:], p.cookie)
	binary.NativeEndian.PutUint64(b[xpSlotThresh:], p.threshold)
	return b
}

// addPort claims a free slot for a link at ip:port (ip an IPv4
// netip.Addr, or an IPv4-mapped IPv6 one) whose frames carry cookie, with
// no drop rate and zeroed counters, and returns it; activate then makes
// the port's frames the slot's. Port 0 is an error: no UDP datagram goes
// to port 0. The claim is atomic (BPF_NOEXIST), so links of several
// processes may add ports at once.
func (o *xdpObjects) addPort(ip netip.Addr, port uint16, cookie uint64) (uint32, error) {
	ip = ip.Unmap()
	if !ip.Is4() {
		return 0, fmt.Errorf("nic: XDP target %v: not an IPv4 address", ip)
	}
	if port == 0 {
		return 0, errors.New("nic: XDP target port 0: not a UDP port")
	}
	slot := uint32(0)
	for s := uint32(1); s < xpSlots && slot == 0; s++ {
		if o.claims.Update(s, uint32(port), ebpf.UpdateNoExist) == nil {
			slot = s
		}
	}
	if slot == 0 {
		return 0, fmt.Errorf("%w: the XDP program of the interface serves %d links already", ErrRefused, xpSlots-1)
	}
	if err := o.countsMap.Put(slot, make([][xpNumCounters]uint64, possibleCPUs())); err != nil {
		o.claims.Delete(slot)
		return 0, fmt.Errorf("nic: zeroing the XDP counters of slot %d: %w", slot, err)
	}
	p := xpSlot{addr: ip.As4(), cookie: cookie}
	if err := o.slots.Put(slot, p.bytes()); err != nil {
		o.claims.Delete(slot)
		return 0, fmt.Errorf("nic: adding the XDP target %v:%d: %w", ip, port, err)
	}
	return slot, nil
}

// activate makes the frames for port slot's.
func (o *xdpObjects) activate(port uint16, slot uint32) error {
	if err := o.portSlots.Put(xpPortKey(port), slot); err != nil {
		return fmt.Errorf("nic: giving port %d to XDP slot %d: %w", port, slot, err)
	}
	return nil
}

// removePort undoes addPort and activate: frames for port go to the
// kernel again, and the slot is free.
func (o *xdpObjects) removePort(port uint16, slot uint32) error {
	var cur uint32
	if o.portSlots.Lookup(xpPortKey(port), &cur) == nil && cur == slot {
		if err := o.portSlots.Put(xpPortKey(port), uint32(0)); err != nil {
			return fmt.Errorf("nic: taking port %d from the XDP program: %w", port, err)
		}
	}
	o.slots.Put(slot, make([]byte, xpSlotSize))
	if err := o.claims.Delete(slot); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("nic: freeing XDP slot %d: %w", slot, err)
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

// setDropRate sets the probability in [0, 1] of dropping a frame of
// slot's (loss tests); it returns an error outside the range or for NaN.
func (o *xdpObjects) setDropRate(slot uint32, p float64) error {
	th, err := xdpDropThreshold(p)
	if err != nil {
		return err
	}
	if slot == 0 || slot >= xpSlots {
		return fmt.Errorf("nic: XDP slot %d: not in [1, %d)", slot, xpSlots)
	}
	var v [xpSlotSize]byte
	if err := o.slots.Lookup(slot, &v); err != nil {
		return fmt.Errorf("nic: reading XDP slot %d: %w", slot, err)
	}
	binary.NativeEndian.PutUint64(v[xpSlotThresh:], th)
	if err := o.slots.Put(slot, v[:]); err != nil {
		return fmt.Errorf("nic: setting the XDP drop rate %v: %w", p, err)
	}
	return nil
}

// setSocket puts an AF_XDP socket fd, bound to queue, into the xsks slot of
// queue and makes queue slot's; queue must be below the queues given to
// newXDPObjects. The kernel takes its own reference to the socket; the
// caller still owns fd.
func (o *xdpObjects) setSocket(queue int, fd int, slot uint32) error {
	if queue < 0 || uint64(queue) >= uint64(o.xsks.MaxEntries()) {
		return fmt.Errorf("nic: XDP socket for queue %d: queue not in [0, %d)", queue, o.xsks.MaxEntries())
	}
	if fd < 0 || int64(fd) > math.MaxUint32 {
		return fmt.Errorf("nic: XDP socket for queue %d: bad fd %d", queue, fd)
	}
	if err := o.xsks.Put(uint32(queue), uint32(fd)); err != nil {
		return fmt.Errorf("nic: putting the XDP socket for queue %d: %w", queue, err)
	}
	if err := o.queues.Put(uint32(queue), slot); err != nil {
		return fmt.Errorf("nic: giving queue %d to slot %d: %w", queue, slot, err)
	}
	return nil
}

// clearSocket undoes setSocket for queue, if slot has it.
func (o *xdpObjects) clearSocket(queue int, slot uint32) {
	var owner uint32
	if o.queues.Lookup(uint32(queue), &owner) == nil && owner == slot {
		o.queues.Put(uint32(queue), uint32(0))
		o.xsks.Delete(uint32(queue))
	}
}

// queueOwner returns the slot, address and port of the link whose socket
// is on queue q; slot 0 if none.
func (o *xdpObjects) queueOwner(q int) (slot uint32, ap netip.AddrPort) {
	var port uint32
	var v [xpSlotSize]byte
	if o.queues.Lookup(uint32(q), &slot) != nil || slot == 0 || o.claims.Lookup(slot, &port) != nil ||
		o.slots.Lookup(slot, &v) != nil {
		return 0, ap
	}
	return slot, netip.AddrPortFrom(netip.AddrFrom4([4]byte(v[xpSlotAddr:xpSlotAddr+4])), uint16(port))
}

// xdpCounts are the program's counters of one slot summed over CPUs, and
// Passed, the frames that were no link's.
type xdpCounts struct{ Redirected, Passed, Dropped, Foreign, Misqueued uint64 }

// counts returns slot's counters summed over CPUs, and the frames no
// link's.
func (o *xdpObjects) counts(slot uint32) (xdpCounts, error) {
	sum := func(key uint32) ([xpNumCounters]uint64, error) {
		var s [xpNumCounters]uint64
		var perCPU [][xpNumCounters]uint64
		if err := o.countsMap.Lookup(key, &perCPU); err != nil {
			return s, fmt.Errorf("nic: reading the XDP counters: %w", err)
		}
		for _, v := range perCPU {
			for i := range s {
				s[i] += v[i]
			}
		}
		return s, nil
	}
	s, err := sum(slot)
	if err != nil {
		return xdpCounts{}, err
	}
	z, err := sum(0)
	if err != nil {
		return xdpCounts{}, err
	}
	return xdpCounts{Redirected: s[xpCountRedirected], Passed: z[xpCountPassed], Dropped: s[xpCountDropped],
		Foreign: s[xpCountForeign], Misqueued: s[xpCountMisqueued]}, nil
}

// Close releases the program and maps, which the kernel frees when no
// other process holds them either. It may be called on a partly built
// xdpObjects and more than once.
func (o *xdpObjects) Close() error {
	var errs []error
	if o.pend != nil {
		unix.Munmap(o.pend)
		o.pend = nil
	}
	if o.prog != nil {
		if err := o.prog.Close(); err != nil {
			errs = append(errs, fmt.Errorf("nic: closing the XDP program: %w", err))
		}
		o.prog = nil
	}
	for _, m := range o.maps() {
		if *m != nil {
			if err := (*m).Close(); err != nil {
				errs = append(errs, fmt.Errorf("nic: closing an XDP map: %w", err))
			}
			*m = nil
		}
	}
	return errors.Join(errs...)
}

// maps lists the maps, in the order a server sends them.
func (o *xdpObjects) maps() []**ebpf.Map {
	return []**ebpf.Map{&o.xsks, &o.queues, &o.portSlots, &o.slots, &o.claims, &o.countsMap, &o.pending}
}
