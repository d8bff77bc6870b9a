package nic

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
)

func TestHeaderRoundTrip(t *testing.T) {
	h := Header{Type: TypeData, Flags: FlagFirst | FlagLast, Length: MessageLen + 5, Credit: 77,
		Cookie: 0x0123456789abcdef, Src: 3, Dst: 0xfffffffe, Epoch: 9, Seq: 1 << 31, Ack: 42, SACK: 0xa5a5a5a5}
	b := make([]byte, HeaderLen+int(h.Length))
	h.Put(b)
	got, err := ParseHeader(b)
	if err != nil || got != h {
		t.Fatalf("ParseHeader = %+v, %v; want %+v", got, err, h)
	}
	// The layout docs/nic.md draws: spot-check a few offsets.
	if b[0] != Version || b[1] != byte(TypeData) || binary.LittleEndian.Uint64(b[8:]) != h.Cookie ||
		binary.LittleEndian.Uint32(b[28:]) != h.Seq || binary.LittleEndian.Uint32(b[36:]) != h.SACK {
		t.Fatalf("header bytes % x", b[:HeaderLen])
	}
	PutAck(b, 5, 6, 7)
	h.Ack, h.SACK, h.Credit = 5, 6, 7
	if got, err := ParseHeader(b); err != nil || got != h {
		t.Fatalf("after PutAck: %+v, %v; want %+v", got, err, h)
	}
	m := Message{Length: 1 << 40, ID: 7, Context: 12, Tag: -3}
	m.Put(b[HeaderLen:])
	if gm, err := ParseMessage(b[HeaderLen:]); err != nil || gm != m {
		t.Fatalf("ParseMessage = %+v, %v; want %+v", gm, err, m)
	}
	if _, err := ParseMessage(b[:MessageLen-1]); !errors.Is(err, ErrShort) {
		t.Fatalf("short message header: %v", err)
	}
}

func TestParseHeaderRejects(t *testing.T) {
	good := func() []byte {
		b := make([]byte, HeaderLen+8)
		(&Header{Type: TypeAck, Length: 8}).Put(b)
		return b
	}
	cases := []struct {
		name string
		mod  func([]byte) []byte
		want error
	}{
		{"short", func(b []byte) []byte { return b[:HeaderLen-1] }, ErrShort},
		{"empty", func(b []byte) []byte { return nil }, ErrShort},
		{"version", func(b []byte) []byte { b[0] = Version + 1; return b }, ErrVersion},
		{"type 0", func(b []byte) []byte { b[1] = 0; return b }, ErrType},
		{"type past last", func(b []byte) []byte { b[1] = byte(typeLast) + 1; return b }, ErrType},
		{"unknown flag", func(b []byte) []byte { b[3] = 0x80; return b }, ErrType},
		{"length over", func(b []byte) []byte { return b[:len(b)-1] }, ErrLength},
		{"length under", func(b []byte) []byte { return append(b, 0) }, ErrLength},
		{"first without message header", func(b []byte) []byte { b[2] = byte(FlagFirst); return b }, ErrLength},
	}
	if _, err := ParseHeader(good()); err != nil {
		t.Fatalf("good frame: %v", err)
	}
	for _, c := range cases {
		if _, err := ParseHeader(c.mod(good())); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

func TestCheck(t *testing.T) {
	b := make([]byte, HeaderLen+3)
	(&Header{Type: TypeData, Length: 3, Cookie: 5}).Put(b)
	if err := check(b, 5); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		b      []byte
		cookie uint64
		want   error
	}{
		{b[:10], 5, ErrShort},
		{b, 6, ErrCookie},
		{b[:len(b)-1], 5, ErrLength},
		{append([]byte{Version + 1}, b[1:]...), 5, ErrVersion},
	} {
		if err := check(c.b, c.cookie); err != c.want {
			t.Errorf("check: %v, want %v", err, c.want)
		}
	}
}

func TestHeadersAndParseUDP(t *testing.T) {
	src := Card{Mode: ModeXDP, IP: netip.MustParseAddr("198.18.3.1"), Port: 4000, MAC: [6]byte{2, 0, 0, 0, 0, 1}}
	dst := Card{Mode: ModeUDP, IP: netip.MustParseAddr("198.18.3.2"), Port: 5000, MAC: [6]byte{2, 0, 0, 0, 0, 2}}
	tmpl := headerTemplate(src, dst)
	sum := templateSum(&tmpl)
	for _, n := range []int{0, 1, HeaderLen, 1472} {
		frame := make([]byte, FrameOverhead+n+4) // 4 bytes of Ethernet padding
		for i := range frame[FrameOverhead:] {
			frame[FrameOverhead+i] = byte(i)
		}
		putHeaders(frame, &tmpl, sum, n)
		if s := ipv4Sum(frame[ethLen : ethLen+ipv4Len]); s != 0 {
			t.Fatalf("n=%d: IPv4 header checksum does not verify (%#x)", n, s)
		}
		if !bytes.Equal(frame[offEthDst:offEthDst+6], dst.MAC[:]) || binary.BigEndian.Uint16(frame[offUDPDst:]) != 5000 {
			t.Fatalf("n=%d: headers % x", n, frame[:FrameOverhead])
		}
		p, ip, port, err := parseUDP(frame)
		if err != nil || len(p) != n || ip != src.IP.As4() || port != 4000 {
			t.Fatalf("n=%d: parseUDP = %d bytes from %v:%d, %v", n, len(p), ip, port, err)
		}
		if n > 0 && p[n-1] != byte(n-1) {
			t.Fatalf("n=%d: payload not where it was written", n)
		}
	}
	frame := make([]byte, FrameOverhead+8)
	putHeaders(frame, &tmpl, sum, 8)
	for name, mod := range map[string]func([]byte) []byte{
		"short":        func(b []byte) []byte { return b[:FrameOverhead-1] },
		"truncated":    func(b []byte) []byte { return b[:len(b)-1] },
		"ip options":   func(b []byte) []byte { b[offIPVerIHL] = 0x46; return b },
		"tcp":          func(b []byte) []byte { b[offIPProto] = 6; return b },
		"ipv6":         func(b []byte) []byte { b[offEthType+1] = 0xdd; b[offEthType] = 0x86; return b },
		"udp too long": func(b []byte) []byte { binary.BigEndian.PutUint16(b[offUDPLen:], 17); return b },
		"udp short":    func(b []byte) []byte { binary.BigEndian.PutUint16(b[offUDPLen:], 7); return b },
	} {
		b := mod(append([]byte(nil), frame...))
		if _, _, _, err := parseUDP(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestTypeString(t *testing.T) {
	if TypeData.String() != "data" || TypeBye.String() != "bye" || Type(9).String() != "Type(9)" {
		t.Fatal(TypeData.String(), TypeBye.String(), Type(9).String())
	}
}
