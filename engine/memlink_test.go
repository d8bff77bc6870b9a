package engine

import (
	"fmt"
	"net/netip"

	"github.com/tachyon-hpc/tachyon/nic"
)

// memLink is a nic.Link in memory for driving a netDev by hand: the test
// queues the frames it receives (in) and reads the frames it sent (sent).
// It checks the ownership rules of nic.Link as a real link does, and
// records the first breach in err, so that a test can fail on a frame
// released twice or sent while not the caller's.
type memLink struct {
	mtu   int
	bufs  [][]byte
	owned []bool // by frame: the caller's
	free  []nic.Frame
	in    [][]byte // frames queued for Receive
	sent  [][]byte // copies of what Send took, in order
	full  bool     // Send takes nothing (a full transmit queue)
	take  int      // the most frames one Send takes (0: all): a transmit queue that fills
	sends int      // Send calls
	err   error
}

// newMemLink makes a link of n frames of mtu bytes.
func newMemLink(n, mtu int) *memLink {
	l := &memLink{mtu: mtu, bufs: make([][]byte, n), owned: make([]bool, n)}
	for i := range l.bufs {
		l.bufs[i] = make([]byte, mtu)
		l.free = append(l.free, nic.Frame(i))
	}
	return l
}

func (l *memLink) breach(format string, args ...any) {
	if l.err == nil {
		l.err = fmt.Errorf(format, args...)
	}
}

func (l *memLink) Card() nic.Card {
	return nic.Card{Mode: nic.ModeUDP, IP: netip.MustParseAddr("127.0.0.1"), Port: 1, MTU: uint16(l.mtu)}
}
func (l *memLink) MTU() int                           { return l.mtu }
func (l *memLink) AddPeer(nic.Card) (nic.Peer, error) { return 0, nil }

func (l *memLink) Alloc(fs []nic.Frame) int {
	n := 0
	for ; n < len(fs) && len(l.free) > 0; n++ {
		f := l.free[len(l.free)-1]
		l.free = l.free[:len(l.free)-1]
		l.owned[f] = true
		fs[n] = f
	}
	return n
}

func (l *memLink) Bytes(f nic.Frame) []byte {
	if !l.owned[f] {
		l.breach("Bytes of frame %d, not the caller's", f)
	}
	return l.bufs[f]
}

func (l *memLink) Send(tx []nic.TxDesc) (int, error) {
	l.sends++
	if l.full {
		return 0, nil
	}
	if l.take > 0 && len(tx) > l.take {
		tx = tx[:l.take]
	}
	for i, d := range tx {
		if !l.owned[d.Frame] {
			l.breach("Send of frame %d, not the caller's", d.Frame)
			return i, nic.ErrNotOwned
		}
		if int(d.Len) > l.mtu {
			return i, nic.ErrTooLong
		}
		l.sent = append(l.sent, append([]byte(nil), l.bufs[d.Frame][:d.Len]...))
		if !d.Keep {
			l.owned[d.Frame] = false
			l.free = append(l.free, d.Frame)
		}
	}
	return len(tx), nil
}

func (l *memLink) Receive(rx []nic.RxDesc) int {
	n := 0
	for ; n < len(rx) && len(l.in) > 0 && len(l.free) > 0; n++ {
		b := l.in[0]
		l.in = l.in[1:]
		f := l.free[len(l.free)-1]
		l.free = l.free[:len(l.free)-1]
		l.owned[f] = true
		k := copy(l.bufs[f], b)
		rx[n] = nic.RxDesc{Frame: f, Data: l.bufs[f][:k]}
	}
	return n
}

func (l *memLink) Release(fs []nic.Frame) error {
	for _, f := range fs {
		if !l.owned[f] {
			l.breach("Release of frame %d, not the caller's", f)
			return nic.ErrNotOwned
		}
		l.owned[f] = false
		l.free = append(l.free, f)
	}
	return nil
}

func (l *memLink) Poll() int                 { return 0 }
func (l *memLink) SetDropRate(float64) error { return nil }
func (l *memLink) Status() nic.Status        { return nic.Status{Mode: nic.ModeUDP} }
func (l *memLink) Stats() nic.Stats          { return nic.Stats{} }
func (l *memLink) Close() error              { return nil }
