package nic

import (
	"bytes"
	"testing"
)

// FuzzParseHeader: any bytes either parse into a header that writes back
// the same bytes, or fail with one of the receive errors; never a panic.
func FuzzParseHeader(f *testing.F) {
	b := make([]byte, HeaderLen+MessageLen+4)
	(&Header{Type: TypeData, Flags: FlagFirst, Length: MessageLen + 4, Cookie: 1, Seq: 2}).Put(b)
	f.Add(b)
	f.Add(b[:HeaderLen])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHeader(b)
		if err != nil {
			switch err {
			case ErrShort, ErrVersion, ErrType, ErrLength:
			default:
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		out := make([]byte, HeaderLen)
		h.Put(out)
		if !bytes.Equal(out, b[:HeaderLen]) {
			t.Fatalf("round trip: % x became % x", b[:HeaderLen], out)
		}
		if h.Flags&FlagFirst != 0 {
			if _, err := ParseMessage(b[HeaderLen:]); err != nil {
				t.Fatalf("first fragment without a message header passed: %v", err)
			}
		}
	})
}

// FuzzReceiveChecks: the checks a link applies to a received Ethernet
// frame never panic, and what they accept is a well-formed Tachyon frame
// of this job inside the frame.
func FuzzReceiveChecks(f *testing.F) {
	frame := make([]byte, FrameOverhead+HeaderLen+3)
	tmpl := headerTemplate(Card{Port: 1}, Card{Port: 2})
	putHeaders(frame, &tmpl, templateSum(&tmpl), HeaderLen+3)
	(&Header{Type: TypeData, Length: 3, Cookie: 9}).Put(frame[FrameOverhead:])
	f.Add(frame)
	f.Add(frame[:FrameOverhead])
	f.Fuzz(func(t *testing.T, frame []byte) {
		p, _, _, err := parseUDP(frame)
		if err != nil {
			return
		}
		if len(p) > len(frame)-FrameOverhead {
			t.Fatalf("payload of %d bytes from a frame of %d", len(p), len(frame))
		}
		if check(p, 9) == nil {
			if len(p) < HeaderLen || p[0] != Version {
				t.Fatalf("accepted % x", p)
			}
		}
	})
}
