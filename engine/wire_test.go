package engine

import (
	"fmt"
	"os"
	"regexp"
	"strings"
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

// wireFields is every field of every packet, as the comment table in
// wire.go names it, at the offset of its constant.
var wireFields = []struct {
	pkt    string
	typ    byte
	header int
	fields []wireField
}{
	{"eager", pktEager, eagerHeader, []wireField{
		{offType, "type"}, {offFlags, "flags"}, {eagerCtx, "context u32"}, {eagerTag, "tag i32"},
		{eagerLen, "length u32"}, {eagerSreq, "sender request u64"}, {eagerPayload, "payload..."}}},
	{"short", pktShort, shortHeader, []wireField{
		{offType, "type"}, {shortCtx, "context u32"}, {shortTag, "tag i32"}, {shortID, "short id u32"},
		{shortPayload, "payload..."}}},
	{"frag", pktFrag, fragHeader, []wireField{{offType, "type"}, {fragPayload, "payload..."}}},
	{"rts", pktRTS, rtsHeader, []wireField{
		{offType, "type"}, {offFlags, "flags"}, {rtsCtx, "context u32"}, {rtsTag, "tag i32"},
		{rtsLen, "length u64"}, {rtsSreq, "sender request u64"}, {rtsAddr, "sender address u64"}}},
	{"cts", pktCTS, ctsHeader, []wireField{
		{offType, "type"}, {offFlags, "flags"}, {ctsSreq, "sender request u64"}, {ctsRreq, "receiver request u64"}}},
	{"data", pktData, dataHeader, []wireField{
		{offType, "type"}, {dataRreq, "receiver request u64"}, {dataOff, "offset u64"}, {dataPayload, "payload..."}}},
	{"fin", pktFin, finHeader, []wireField{{offType, "type"}, {finSreq, "sender request u64"}}},
	{"cancel", pktCancel, cancelHeader, []wireField{
		{offType, "type"}, {cancelCtx, "context u32"}, {cancelSreq, "sender request u64"}, {cancelTag, "tag i32"},
		{cancelID, "short id u32"}}},
	{"cancelled", pktCancelled, finHeader, []wireField{
		{offType, "type"}, {offFlags, "flags (1: withdrawn)"}, {cancelledSreq, "sender request u64"}}},
	{"ctw", pktCTW, ctwHeader, []wireField{
		{offType, "type"}, {ctwSreq, "sender request u64"}, {ctwRreq, "receiver request u64"},
		{ctwOff, "offset u64"}, {ctwLen, "length u64"}, {ctwAddr, "receiver address u64"}}},
	{"written", pktWritten, writtenHeader, []wireField{
		{offType, "type"}, {offFlags, "flags (1: written)"}, {writtenRreq, "receiver request u64"}, {writtenLen, "length u64"}}},
}

type wireField struct {
	off  int
	name string
}

// TestWireTable checks the packet table of wire.go's comment against the
// field constants the code reads and writes at: each packet's entry names
// every field at its constant's offset, the header ends where the last
// field does, and headerLen agrees.
func TestWireTable(t *testing.T) {
	src, err := os.ReadFile("wire.go")
	if err != nil {
		t.Fatal(err)
	}
	// The comment before the packet types, one entry per packet: a line
	// "//\tname  0 type, ..." and the lines indented under it.
	text := string(src)
	end := strings.Index(text, "\nconst (\n\tpktEager")
	if end < 0 {
		t.Fatal("wire.go: no packet types")
	}
	entry := regexp.MustCompile(`(?m)^//\t([a-z]+)\s+0 type`)
	comment := text[:end]
	idx := entry.FindAllStringSubmatchIndex(comment, -1)
	entries := map[string]string{}
	for i, m := range idx {
		stop := len(comment)
		if i+1 < len(idx) {
			stop = idx[i+1][0]
		}
		body := strings.ReplaceAll(comment[m[0]:stop], "//", " ")
		entries[comment[m[2]:m[3]]] = strings.Join(strings.Fields(body), " ")
	}
	if len(entries) != len(wireFields) {
		t.Errorf("wire.go's table has %d packets, the test %d", len(entries), len(wireFields))
	}
	for _, p := range wireFields {
		e, ok := entries[p.pkt]
		if !ok {
			t.Errorf("%s: not in wire.go's table", p.pkt)
			continue
		}
		last := 0
		for i, f := range p.fields {
			want := fmt.Sprintf("%d %s", f.off, f.name)
			if !strings.Contains(e, want) {
				t.Errorf("%s: table lacks %q: %s", p.pkt, want, e)
			}
			if i > 0 && f.off <= p.fields[i-1].off && f.off != 0 {
				t.Errorf("%s: %s at %d, not after the field before", p.pkt, f.name, f.off)
			}
			last = f.off + fieldSize(f.name)
		}
		if last != p.header {
			t.Errorf("%s: fields end at %d, header is %d", p.pkt, last, p.header)
		}
		if n := headerLen(p.typ); n != p.header {
			t.Errorf("%s: headerLen %d, want %d", p.pkt, n, p.header)
		}
	}
}

// fieldSize is the size of a field named as the table names it; a
// payload has none (it starts where the header ends).
func fieldSize(name string) int {
	switch {
	case strings.Contains(name, "u64"):
		return 8
	case strings.Contains(name, "u32"), strings.Contains(name, "i32"):
		return 4
	case strings.HasPrefix(name, "payload"):
		return 0
	}
	return 1
}

// TestWireFieldsRoundTrip writes each header with the put functions and
// reads every field back at its constant.
func TestWireFieldsRoundTrip(t *testing.T) {
	var b [minPacket]byte
	putEager(b[:], flagSync, 7, -3, 1000, 0x1122334455667788)
	if b[offType] != pktEager || b[offFlags] != flagSync || u32(b[:], eagerCtx) != 7 ||
		int32(u32(b[:], eagerTag)) != -3 || u32(b[:], eagerLen) != 1000 || u64(b[:], eagerSreq) != 0x1122334455667788 {
		t.Errorf("eager: % x", b[:eagerHeader])
	}
	b = [minPacket]byte{}
	putShort(b[:], 9, -5, 42)
	if b[offType] != pktShort || u32(b[:], shortCtx) != 9 || int32(u32(b[:], shortTag)) != -5 || u32(b[:], shortID) != 42 {
		t.Errorf("short: % x", b[:shortHeader])
	}
	b = [minPacket]byte{}
	putRTS(b[:], flagSync, 3, 4, 1<<40, 5, 6)
	if b[offType] != pktRTS || b[offFlags] != flagSync || u32(b[:], rtsCtx) != 3 || u32(b[:], rtsTag) != 4 ||
		u64(b[:], rtsLen) != 1<<40 || u64(b[:], rtsSreq) != 5 || u64(b[:], rtsAddr) != 6 {
		t.Errorf("rts: % x", b[:rtsHeader])
	}
	b = [minPacket]byte{}
	putIDs(b[:ctsHeader], pktCTS, flagBulk, 11, 12)
	if b[offType] != pktCTS || b[offFlags] != flagBulk || u64(b[:], ctsSreq) != 11 || u64(b[:], ctsRreq) != 12 {
		t.Errorf("cts: % x", b[:ctsHeader])
	}
	b = [minPacket]byte{}
	putIDs(b[:finHeader], pktFin, 0, 13, 14)
	if u64(b[:], finSreq) != 13 || u64(b[:], finHeader) != 0 {
		t.Errorf("fin: % x", b[:ctsHeader])
	}
}
