package nic

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tachyon-hpc/tachyon/asm"
)

// The four rings of an AF_XDP socket, shared with the kernel through
// mmap: the fill ring (frames the kernel may receive into; we produce),
// the completion ring (frames whose send completed; we consume), the
// receive ring (frames received; we consume) and the transmit ring
// (frames to send; we produce). Each side publishes its index with a
// release store and reads the other's with an acquire load (asm/), and
// keeps a cached copy of the other's index, rereading it only when the
// cache says the ring is full (producer) or empty (consumer), as the
// kernel's own xsk_queue.h and libxdp do.

// xskRing is the index half of one ring.
type xskRing struct {
	producer *uint32
	consumer *uint32
	flags    *uint32
	mask     uint32
	// The producer's own index and its cached copy of the consumer's, or
	// the consumer's own index and its cached copy of the producer's.
	prod, cons uint32
	published  uint32 // a consumer's index as last published (consReleaseLazy)
	mem        []byte // the mapping, for munmap
}

// prodFree returns how many entries a producer may write, rereading the
// consumer's index if the cached one shows fewer than want.
func (r *xskRing) prodFree(want uint32) uint32 {
	free := r.mask + 1 - (r.prod - r.cons)
	if free < want {
		r.cons = asm.LoadAcquire32(r.consumer)
		free = r.mask + 1 - (r.prod - r.cons)
	}
	return free
}

// prodSubmit publishes n entries written after the producer's index.
func (r *xskRing) prodSubmit(n uint32) {
	r.prod += n
	asm.StoreRelease32(r.producer, r.prod)
}

// consReady returns how many entries a consumer may read, rereading the
// producer's index if the cached one shows none.
func (r *xskRing) consReady() uint32 {
	n := r.prod - r.cons
	if n == 0 {
		r.prod = asm.LoadAcquire32(r.producer)
		n = r.prod - r.cons
	}
	return n
}

// consRelease gives n read entries back to the producer.
func (r *xskRing) consRelease(n uint32) {
	r.cons += n
	asm.StoreRelease32(r.consumer, r.cons)
}

// consReleaseLazy gives n read entries back, but publishes the index
// only once lazyRelease entries have gathered: off the path of the
// frame that was just read, the store waits for consFlush (an idle poll,
// Poll) or for more. The kernel then sees up to lazyRelease entries
// fewer free, a sliver of a ring of nic_ring_size (at least 16).
func (r *xskRing) consReleaseLazy(n uint32) {
	r.cons += n
	if r.cons-r.published >= lazyRelease {
		r.consFlush()
	}
}

// consFlush publishes the consumer index consReleaseLazy held back.
func (r *xskRing) consFlush() {
	if r.published != r.cons {
		r.published = r.cons
		asm.StoreRelease32(r.consumer, r.cons)
	}
}

// lazyRelease is how many consumed entries consReleaseLazy gathers
// before it publishes them.
const lazyRelease = 8

// needWakeup reports whether the kernel asked to be woken for this ring.
func (r *xskRing) needWakeup() bool {
	return asm.LoadAcquire32(r.flags)&unix.XDP_RING_NEED_WAKEUP != 0
}

// unconsumed returns how many entries a producer wrote that the kernel
// has not taken yet, reading the kernel's index.
func (r *xskRing) unconsumed() uint32 {
	r.cons = asm.LoadAcquire32(r.consumer)
	return r.prod - r.cons
}

// addrRing is the fill or completion ring: UMEM addresses.
type addrRing struct {
	xskRing
	addrs []uint64
}

// descRing is the receive or transmit ring: descriptors.
type descRing struct {
	xskRing
	descs []unix.XDPDesc
}

// mapRing maps one ring of fd at page offset pgoff, with n entries of
// size entry, at the offsets the kernel reported.
func mapRing(fd int, off *unix.XDPRingOffset, pgoff int64, n, entry uint32) (xskRing, unsafe.Pointer, error) {
	size := int(off.Desc) + int(n*entry)
	mem, err := unix.Mmap(fd, pgoff, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return xskRing{}, nil, fmt.Errorf("mapping a ring (%d bytes): %w", size, err)
	}
	base := unsafe.Pointer(&mem[0])
	r := xskRing{
		producer: (*uint32)(unsafe.Add(base, off.Producer)),
		consumer: (*uint32)(unsafe.Add(base, off.Consumer)),
		flags:    (*uint32)(unsafe.Add(base, off.Flags)),
		mask:     n - 1,
		mem:      mem,
	}
	// Start from where the kernel's indices are (0 on a new socket).
	r.prod = asm.LoadAcquire32(r.producer)
	r.cons = asm.LoadAcquire32(r.consumer)
	r.published = r.cons
	return r, unsafe.Add(base, off.Desc), nil
}

func mapAddrRing(fd int, off *unix.XDPRingOffset, pgoff int64, n uint32) (addrRing, error) {
	r, d, err := mapRing(fd, off, pgoff, n, 8)
	if err != nil {
		return addrRing{}, err
	}
	return addrRing{xskRing: r, addrs: unsafe.Slice((*uint64)(d), n)}, nil
}

func mapDescRing(fd int, off *unix.XDPRingOffset, pgoff int64, n uint32) (descRing, error) {
	r, d, err := mapRing(fd, off, pgoff, n, uint32(unsafe.Sizeof(unix.XDPDesc{})))
	if err != nil {
		return descRing{}, err
	}
	return descRing{xskRing: r, descs: unsafe.Slice((*unix.XDPDesc)(d), n)}, nil
}

func (r *xskRing) unmap() {
	if r.mem != nil {
		unix.Munmap(r.mem)
		r.mem = nil
	}
}
