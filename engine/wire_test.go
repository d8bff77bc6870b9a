package engine

import (
	"testing"
)

// FuzzPackets feeds arbitrary packets, as a broken or hostile peer would
// send them, to an endpoint with receives posted and sends waiting: none
// may panic, and the endpoint must still deliver a good message after.
func FuzzPackets(f *testing.F) {
	good := make([]byte, 64)
	putEager(good, 0, 0, 1, 8, 0)
	f.Add(good[:eagerHeader+8])
	f.Add([]byte{pktFrag, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3})
	short := make([]byte, shortHeader+8)
	putShort(short, 0, 1, 1)
	f.Add(short)
	f.Add(short[:shortHeader-1])
	rts := make([]byte, rtsHeader)
	putRTS(rts, flagSync, 0, 1, 1<<20, 0, 0)
	f.Add(rts)
	for _, typ := range []byte{pktCTS, pktData, pktFin, pktCancel, pktCancelled} {
		p := make([]byte, 32)
		putIDs(p, typ, 1, 0, 0)
		f.Add(p)
	}
	f.Add([]byte{})
	f.Add([]byte{200})
	f.Fuzz(func(t *testing.T, pkt []byte) {
		ep := rankZero(t)
		posted, _ := ep.Irecv(make([]byte, 16), AnySource, AnyTag, 0)
		sent, _ := ep.Isend(make([]byte, 100000), 1, 1, 0, Synchronous)
		ep.lock()
		ep.handle(1, pkt)
		ep.unlock()
		sent.Cancel()
		posted.Cancel()
		// The endpoint still works.
		r, _ := ep.Irecv(make([]byte, 8), 0, 77, 9)
		if err := ep.Send([]byte("12345678"), 0, 77, 9, Standard); err != nil {
			t.Fatal(err)
		}
		if st, err := r.Wait(); err != nil || st.Count != 8 {
			t.Fatalf("after a bad packet: %+v %v", st, err)
		}
	})
}
