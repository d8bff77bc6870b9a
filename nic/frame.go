package nic

import (
	"encoding/binary"
	"errors"
	"strconv"
)

// The wire format, every offset in one place. A frame is a real Ethernet
// II + IPv4 + UDP datagram, so that switches, the kernel's UDP stack (the
// fallback) and packet captures all understand it; its UDP payload is a
// Tachyon frame: the fixed header below, then, on the first fragment of a
// message, the message header, then data. The UDP fallback sends exactly
// that payload. The Tachyon fields are little-endian (the byte order of
// every CPU Tachyon runs on); Ethernet, IP and UDP fields are in network
// order as their standards say. docs/nic.md draws every byte.
//
// IPv4 only for now: IPv6 would move the UDP header to offset 54 and needs
// a second XDP match; both ends of a job use the same family.
const (
	ethLen  = 14 // destination MAC, source MAC, ethertype
	ipv4Len = 20 // IPv4 without options
	udpLen  = 8

	// FrameOverhead is the bytes of Ethernet, IPv4 and UDP headers before
	// the Tachyon frame, which the link writes and strips itself.
	FrameOverhead = ethLen + ipv4Len + udpLen

	offEthDst   = 0
	offEthSrc   = 6
	offEthType  = 12
	offIPVerIHL = ethLen + 0
	offIPLen    = ethLen + 2
	offIPFrag   = ethLen + 6
	offIPTTL    = ethLen + 8
	offIPProto  = ethLen + 9
	offIPSum    = ethLen + 10
	offIPSrc    = ethLen + 12
	offIPDst    = ethLen + 16
	offUDPSrc   = ethLen + ipv4Len + 0
	offUDPDst   = ethLen + ipv4Len + 2
	offUDPLen   = ethLen + ipv4Len + 4
	offUDPSum   = ethLen + ipv4Len + 6

	ethTypeIPv4 = 0x0800
	ipProtoUDP  = 17
	ipDF        = 0x4000 // don't fragment: a Tachyon frame never exceeds the MTU
	ipTTL       = 64
)

// The Tachyon header, at the start of every UDP payload (HeaderLen bytes).
const (
	// Version is the wire format's version; frames of another are dropped.
	Version = 1
	// HeaderLen is the size of the fixed Tachyon header.
	HeaderLen = 40
	// MessageLen is the size of the message header that follows the
	// fixed header in a frame with FlagFirst.
	MessageLen = 24

	offVersion = 0  // u8
	offType    = 1  // u8
	offFlags   = 2  // u16
	offLength  = 4  // u16: bytes after the fixed header
	offCredit  = 6  // u16
	offCookie  = 8  // u64
	offSrcEP   = 16 // u32
	offDstEP   = 20 // u32
	offEpoch   = 24 // u32
	offSeq     = 28 // u32
	offAck     = 32 // u32
	offSACK    = 36 // u32

	offMsgLength  = 0  // u64, after the fixed header
	offMsgID      = 8  // u64
	offMsgContext = 16 // u32
	offMsgTag     = 20 // i32
)

// Type is what a frame carries.
type Type uint8

// Frame types. A frame of a type not listed is dropped as malformed.
const (
	// TypeData carries part of a message: with FlagFirst its first
	// fragment, led by the message header.
	TypeData Type = 1 + iota
	// TypeAck carries only acknowledgement and credit (Ack, SACK,
	// Credit), for a peer that has no data to piggyback them on.
	TypeAck
	// TypeHello opens a conversation with a peer: its Epoch is the
	// sender's incarnation, so frames of an earlier one can be refused.
	TypeHello
	// TypeBye tells a peer that the sender is closing.
	TypeBye
	// TypeClock carries clock readings, for steering the clocks of a job
	// across hosts toward one: with FlagAckNow a probe, which the
	// receiver answers at once; without, the answer. The body is the
	// engine's.
	TypeClock

	typeLast = TypeClock
)

var typeNames = [...]string{"Type(0)", "data", "ack", "hello", "bye", "clock"}

func (t Type) String() string {
	if t > typeLast {
		return "Type(" + strconv.Itoa(int(t)) + ")"
	}
	return typeNames[t]
}

// Flags qualify a frame.
type Flags uint16

const (
	// FlagFirst marks the first fragment of a message: the message
	// header follows the fixed header.
	FlagFirst Flags = 1 << iota
	// FlagLast marks the last fragment of a message.
	FlagLast
	// FlagAckNow asks the receiver to acknowledge at once.
	FlagAckNow

	flagsKnown = FlagFirst | FlagLast | FlagAckNow
)

// Header is the fixed Tachyon header of a frame. The fields after Cookie
// are the reliable transport's: the link carries them and checks none.
type Header struct {
	Type   Type
	Flags  Flags
	Length uint16 // bytes after the fixed header, message header included
	Credit uint16 // frames the sender may still send, from the receiver's side
	Cookie uint64 // the job's: frames with another are dropped
	Src    uint32 // sending endpoint
	Dst    uint32 // receiving endpoint
	Epoch  uint32 // the sender's incarnation
	Seq    uint32 // this frame's sequence number
	Ack    uint32 // every frame before Ack was received (cumulative)
	SACK   uint32 // bit i: frame Ack+1+i was received too
}

// Message is the header of a message's first fragment.
type Message struct {
	Length  uint64 // the whole message's bytes
	ID      uint64 // the sender's name for the message
	Context uint32 // the communicator's context
	Tag     int32
}

// Errors of ParseHeader and of the links' receive checks. Each is counted
// by its own performance variable when a link drops a frame for it.
var (
	ErrShort   = errors.New("nic: frame shorter than its headers")
	ErrVersion = errors.New("nic: frame of another wire format version")
	ErrType    = errors.New("nic: frame of an unknown type or with unknown flags")
	ErrLength  = errors.New("nic: frame length disagrees with its header")
	ErrCookie  = errors.New("nic: frame of another job (cookie)")
)

// Put writes h as the first HeaderLen bytes of b, which must be that long.
func (h *Header) Put(b []byte) {
	_ = b[HeaderLen-1]
	b[offVersion] = Version
	b[offType] = byte(h.Type)
	binary.LittleEndian.PutUint16(b[offFlags:], uint16(h.Flags))
	binary.LittleEndian.PutUint16(b[offLength:], h.Length)
	binary.LittleEndian.PutUint16(b[offCredit:], h.Credit)
	binary.LittleEndian.PutUint64(b[offCookie:], h.Cookie)
	binary.LittleEndian.PutUint32(b[offSrcEP:], h.Src)
	binary.LittleEndian.PutUint32(b[offDstEP:], h.Dst)
	binary.LittleEndian.PutUint32(b[offEpoch:], h.Epoch)
	binary.LittleEndian.PutUint32(b[offSeq:], h.Seq)
	binary.LittleEndian.PutUint32(b[offAck:], h.Ack)
	binary.LittleEndian.PutUint32(b[offSACK:], h.SACK)
}

// PutAck rewrites the acknowledgement fields of the header at the start
// of b in place (Ack, SACK, Credit): what a frame sent again, or kept
// and sent later, refreshes.
func PutAck(b []byte, ack, sack uint32, credit uint16) {
	_ = b[HeaderLen-1]
	binary.LittleEndian.PutUint32(b[offAck:], ack)
	binary.LittleEndian.PutUint32(b[offSACK:], sack)
	binary.LittleEndian.PutUint16(b[offCredit:], credit)
}

// ParseHeader reads the fixed header at the start of a Tachyon frame b (a
// UDP payload) and checks it: the version, a known type and flags, and a
// Length that accounts for exactly the rest of b (and for a message
// header when FlagFirst is set). It returns ErrShort, ErrVersion, ErrType
// or ErrLength; the cookie is the caller's to check.
func ParseHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < HeaderLen {
		return h, ErrShort
	}
	if b[offVersion] != Version {
		return h, ErrVersion
	}
	h.Type = Type(b[offType])
	h.Flags = Flags(binary.LittleEndian.Uint16(b[offFlags:]))
	if h.Type == 0 || h.Type > typeLast || h.Flags&^flagsKnown != 0 {
		return h, ErrType
	}
	h.Length = binary.LittleEndian.Uint16(b[offLength:])
	if int(h.Length) != len(b)-HeaderLen || h.Flags&FlagFirst != 0 && h.Length < MessageLen {
		return h, ErrLength
	}
	h.Credit = binary.LittleEndian.Uint16(b[offCredit:])
	h.Cookie = binary.LittleEndian.Uint64(b[offCookie:])
	h.Src = binary.LittleEndian.Uint32(b[offSrcEP:])
	h.Dst = binary.LittleEndian.Uint32(b[offDstEP:])
	h.Epoch = binary.LittleEndian.Uint32(b[offEpoch:])
	h.Seq = binary.LittleEndian.Uint32(b[offSeq:])
	h.Ack = binary.LittleEndian.Uint32(b[offAck:])
	h.SACK = binary.LittleEndian.Uint32(b[offSACK:])
	return h, nil
}

// Put writes m as the MessageLen bytes at the start of b.
func (m *Message) Put(b []byte) {
	_ = b[MessageLen-1]
	binary.LittleEndian.PutUint64(b[offMsgLength:], m.Length)
	binary.LittleEndian.PutUint64(b[offMsgID:], m.ID)
	binary.LittleEndian.PutUint32(b[offMsgContext:], m.Context)
	binary.LittleEndian.PutUint32(b[offMsgTag:], uint32(m.Tag))
}

// ParseMessage reads the message header at the start of b, the bytes
// after the fixed header of a frame with FlagFirst.
func ParseMessage(b []byte) (Message, error) {
	if len(b) < MessageLen {
		return Message{}, ErrShort
	}
	return Message{
		Length:  binary.LittleEndian.Uint64(b[offMsgLength:]),
		ID:      binary.LittleEndian.Uint64(b[offMsgID:]),
		Context: binary.LittleEndian.Uint32(b[offMsgContext:]),
		Tag:     int32(binary.LittleEndian.Uint32(b[offMsgTag:])),
	}, nil
}

// check is a link's receive check of a Tachyon frame b: long enough, this
// version, this job's cookie, and a Length that matches b. The type and
// the rest are the transport's to judge (ParseHeader). It reads only the
// header's first line of fields, for the receive path.
func check(b []byte, cookie uint64) error {
	if len(b) < HeaderLen {
		return ErrShort
	}
	if b[offVersion] != Version {
		return ErrVersion
	}
	if binary.LittleEndian.Uint64(b[offCookie:]) != cookie {
		return ErrCookie
	}
	if int(binary.LittleEndian.Uint16(b[offLength:])) != len(b)-HeaderLen {
		return ErrLength
	}
	return nil
}

// headerTemplate returns the Ethernet, IPv4 and UDP headers of a frame
// from src to dst (an address that is not IPv4 is left zero), with the lengths and the IP checksum left for
// putHeaders to fill: what a link keeps per peer, so that a frame's
// headers cost one copy and three stores.
func headerTemplate(src, dst Card) [FrameOverhead]byte {
	var t [FrameOverhead]byte
	copy(t[offEthDst:], dst.MAC[:])
	copy(t[offEthSrc:], src.MAC[:])
	binary.BigEndian.PutUint16(t[offEthType:], ethTypeIPv4)
	t[offIPVerIHL] = 0x45
	binary.BigEndian.PutUint16(t[offIPFrag:], ipDF)
	t[offIPTTL] = ipTTL
	t[offIPProto] = ipProtoUDP
	if src.IP.Is4() {
		s := src.IP.As4()
		copy(t[offIPSrc:], s[:])
	}
	if dst.IP.Is4() {
		d := dst.IP.As4()
		copy(t[offIPDst:], d[:])
	}
	binary.BigEndian.PutUint16(t[offUDPSrc:], src.Port)
	binary.BigEndian.PutUint16(t[offUDPDst:], dst.Port)
	return t
}

// templateSum is the one's-complement sum of a template's IPv4 header
// with its length and checksum fields zero: putHeaders adds the length.
func templateSum(t *[FrameOverhead]byte) uint32 {
	var s uint32
	for i := ethLen; i < ethLen+ipv4Len; i += 2 {
		s += uint32(t[i])<<8 | uint32(t[i+1])
	}
	return s
}

// putHeaders writes a template's headers into the first FrameOverhead
// bytes of frame, for a Tachyon frame of n bytes after them, with the
// IPv4 header checksum computed (sum is templateSum of t). The UDP
// checksum stays 0, which IPv4 allows: Ethernet's CRC covers the frame
// on the wire.
func putHeaders(frame []byte, t *[FrameOverhead]byte, sum uint32, n int) {
	_ = frame[FrameOverhead-1]
	copy(frame, t[:])
	ipLen := uint32(ipv4Len + udpLen + n)
	binary.BigEndian.PutUint16(frame[offIPLen:], uint16(ipLen))
	binary.BigEndian.PutUint16(frame[offUDPLen:], uint16(udpLen+n))
	binary.BigEndian.PutUint16(frame[offIPSum:], foldSum(sum+ipLen))
}

// foldSum folds a 32-bit one's-complement sum to 16 bits and complements
// it: the Internet checksum.
func foldSum(s uint32) uint16 {
	s = s>>16 + s&0xffff
	s += s >> 16
	return ^uint16(s)
}

// ipv4Sum returns the checksum of the IPv4 header h (with its checksum
// field as found): 0 when a header with its checksum in place is intact.
func ipv4Sum(h []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(h); i += 2 {
		s += uint32(h[i])<<8 | uint32(h[i+1])
	}
	return foldSum(s)
}

// parseUDP returns the UDP payload of an Ethernet frame and its sender's
// IPv4 address and port, or ErrShort or ErrLength when the frame is not
// a well-formed IPv4 UDP datagram without options whose lengths agree.
// The XDP program has matched the protocol, address and port already; the
// lengths it did not check. Ethernet padding after the datagram is cut.
func parseUDP(frame []byte) (payload []byte, srcIP [4]byte, srcPort uint16, err error) {
	if len(frame) < FrameOverhead {
		return nil, srcIP, 0, ErrShort
	}
	if frame[offIPVerIHL] != 0x45 || frame[offIPProto] != ipProtoUDP ||
		binary.BigEndian.Uint16(frame[offEthType:]) != ethTypeIPv4 {
		return nil, srcIP, 0, ErrLength
	}
	ipLen := int(binary.BigEndian.Uint16(frame[offIPLen:]))
	uLen := int(binary.BigEndian.Uint16(frame[offUDPLen:]))
	if ipLen != ipv4Len+uLen || uLen < udpLen || ethLen+ipLen > len(frame) {
		return nil, srcIP, 0, ErrLength
	}
	copy(srcIP[:], frame[offIPSrc:offIPSrc+4])
	srcPort = binary.BigEndian.Uint16(frame[offUDPSrc:])
	return frame[FrameOverhead : ethLen+ipLen], srcIP, srcPort, nil
}
