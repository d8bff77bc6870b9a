package nic_test

import (
	"fmt"
	"log"
	"net/netip"
	"time"

	"github.com/tachyon-hpc/tachyon/nic"
)

// Two links in UDP mode on loopback (no privilege needed; an AF_XDP link,
// ModeXDP, is driven the same way): a frame allocated, written, sent,
// received, parsed and released, with every frame buffer owned by one
// side at a time.
func Example() {
	const cookie = 0x7ac4_0000_0000_00e1
	open := func() nic.Link {
		l, err := nic.Open(nic.Config{Mode: nic.ModeUDP, Addr: netip.MustParseAddrPort("127.0.0.1:0"), Cookie: cookie})
		if err != nil {
			log.Fatal(err)
		}
		return l
	}
	a, b := open(), open()
	defer a.Close()
	defer b.Close()
	peer, err := a.AddPeer(b.Card())
	if err != nil {
		log.Fatal(err)
	}

	// Send: a frame buffer from a's free list, the fixed header, the payload.
	var fs [1]nic.Frame
	if a.Alloc(fs[:]) != 1 {
		log.Fatal("no free frame")
	}
	payload := []byte("hello over the wire")
	f := a.Bytes(fs[0])
	h := nic.Header{Type: nic.TypeData, Length: uint16(len(payload)), Cookie: cookie, Src: 0, Dst: 1, Seq: 1}
	h.Put(f)
	copy(f[nic.HeaderLen:], payload)
	if _, err := a.Send([]nic.TxDesc{{Frame: fs[0], Len: uint16(nic.HeaderLen + len(payload)), Peer: peer}}); err != nil {
		log.Fatal(err)
	}

	// Receive: poll until the frame is there, read it, give it back.
	var rx [4]nic.RxDesc
	deadline := time.Now().Add(5 * time.Second)
	n := 0
	for n == 0 && time.Now().Before(deadline) {
		a.Poll()
		n = b.Receive(rx[:])
	}
	if n != 1 {
		log.Fatalf("received %d frames", n)
	}
	got, err := nic.ParseHeader(rx[0].Data)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%v frame %d from endpoint %d: %s\n", got.Type, got.Seq, got.Src, rx[0].Data[nic.HeaderLen:])
	if err := b.Release([]nic.Frame{rx[0].Frame}); err != nil {
		log.Fatal(err)
	}
	fmt.Println("link mode:", b.Status().Mode)
	// Output:
	// data frame 1 from endpoint 0: hello over the wire
	// link mode: udp
}
