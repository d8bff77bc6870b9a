package engine

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// Authenticated frames, for networks the job does not trust
// (engine_net_auth). Every frame to or from a network peer then ends in a
// trailer: an 8-byte counter and a 16-byte AES-GCM tag over the frame's
// Tachyon header, payload and counter (GMAC: the frame is authenticated,
// not encrypted). The key is its sender's incarnation's own,
// HMAC-SHA256(job key, label, rank, epoch) cut to 16 bytes, and the
// counter, which counts every frame that incarnation sends,
// retransmissions included, is the nonce: no nonce repeats under a key.
// A receiver drops a frame whose tag is wrong (engine_net_auth_failures),
// and one whose counter it has seen or is too old to tell
// (engine_net_replays): it remembers the last replayWindow counters below
// the highest, as WireGuard does. The job key is random, made by the
// job's first rank (NewJobKey) and handed to the others by the launcher,
// with the cookie: the ranks trust the launcher's channel, and each
// other.

// netAuth turns authentication on. Every rank of a job must set it alike.
var netAuth = cvar.NewBool("engine_net_auth", false,
	"Whether frames to and from network peers carry an AES-GCM tag (24 bytes a frame: a counter and the tag) under a key the job's ranks share, so that frames forged or replayed on the network are dropped. For networks the job does not trust; every rank must set it alike (Init fails otherwise).",
	cvar.WithCategory("engine"))

var (
	pvNetAuthFail = pvar.NewCounter("engine_net_auth_failures", "Frames from network peers whose authentication tag was wrong (engine_net_auth), dropped.", pvar.WithUnit("frames"), pvar.WithBind(pvar.BindComm))
	pvNetReplays  = pvar.NewCounter("engine_net_replays", "Authenticated frames from network peers whose counter had been seen, or was too old to tell, dropped.", pvar.WithUnit("frames"), pvar.WithBind(pvar.BindComm))
)

const (
	// JobKeyLen is the length of a job key.
	JobKeyLen = 32
	// The trailer's fields, from its start: the counter u64, the tag.
	authCtr = 0
	authTag = 8
	// authTrailer is the length of the trailer: counter and tag.
	authTrailer = authTag + 16
	// nonceCtr is where a nonce holds the counter, after four zero bytes.
	nonceCtr = 4
	// replayWords is the replay filter's size in 64-bit words; it tells
	// counters apart up to replayWindow below the highest.
	replayWords  = 16
	replayWindow = (replayWords - 1) * 64
)

// authLabel keeps frame keys apart from any other use of the job key.
const authLabel = "tachyon frame key v1"

// NewJobKey returns a random job key if engine_net_auth is on, nil
// otherwise: what a job's first rank hands the others for JobSpec.Key.
func NewJobKey() ([]byte, error) {
	if !netAuth.Get() {
		return nil, nil
	}
	k := make([]byte, JobKeyLen)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("engine: random job key: %w", err)
	}
	return k, nil
}

// checkJobKey reports whether key agrees with engine_net_auth here.
func checkJobKey(key []byte) error {
	switch on := netAuth.Get(); {
	case on && key == nil:
		return fmt.Errorf("%w: engine_net_auth is on here but the job has no key (it is off where the job started): set it alike on every rank", ErrConfig)
	case !on && key != nil:
		return fmt.Errorf("%w: engine_net_auth is off here but the job authenticates its frames: set it alike on every rank", ErrConfig)
	case key != nil && len(key) != JobKeyLen:
		return fmt.Errorf("%w: a job key of %d bytes, want %d", ErrConfig, len(key), JobKeyLen)
	}
	return nil
}

// frameAEAD returns the AES-GCM of the frames of rank's incarnation epoch.
func frameAEAD(job []byte, rank, epoch uint32) (cipher.AEAD, error) {
	m := hmac.New(sha256.New, job)
	m.Write([]byte(authLabel))
	var id [8]byte
	binary.LittleEndian.PutUint32(id[:], rank)
	binary.LittleEndian.PutUint32(id[4:], epoch)
	m.Write(id[:])
	block, err := aes.NewCipher(m.Sum(nil)[:16])
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// frameSealer tags the frames an endpoint sends.
type frameSealer struct {
	aead  cipher.AEAD
	ctr   uint64
	nonce [12]byte
}

// seal writes the trailer into the last authTrailer bytes of frame b (its
// whole Tachyon part): the next counter, and the tag over everything
// before the tag.
func (s *frameSealer) seal(b []byte) {
	n := len(b) - authTrailer
	s.ctr++
	binary.LittleEndian.PutUint64(b[n+authCtr:], s.ctr)
	binary.LittleEndian.PutUint64(s.nonce[nonceCtr:], s.ctr)
	s.aead.Seal(b[n+authTag:n+authTag:len(b)], s.nonce[:], nil, b[:n+authTag])
}

// frameOpener checks the frames of one peer's incarnation.
type frameOpener struct {
	aead  cipher.AEAD
	nonce [12]byte
	top   uint64 // the highest counter accepted
	seen  [replayWords]uint64
}

var (
	errAuthTag    = errors.New("wrong authentication tag")
	errAuthReplay = errors.New("counter seen before")
)

// open checks frame b's trailer and returns the frame without it.
func (o *frameOpener) open(b []byte) ([]byte, error) {
	n := len(b) - authTrailer
	if n < 0 {
		return nil, errAuthTag
	}
	ctr := binary.LittleEndian.Uint64(b[n+authCtr:])
	binary.LittleEndian.PutUint64(o.nonce[nonceCtr:], ctr)
	if _, err := o.aead.Open(nil, o.nonce[:], b[n+authTag:], b[:n+authTag]); err != nil {
		return nil, errAuthTag
	}
	if !o.accept(ctr) {
		return nil, errAuthReplay
	}
	return b[:n], nil
}

// accept records counter ctr, and reports whether it is new: not seen,
// and not so far below the highest that the filter cannot tell.
func (o *frameOpener) accept(ctr uint64) bool {
	if ctr == 0 || ctr+replayWindow < o.top {
		return false
	}
	block := ctr / 64
	if ctr > o.top {
		cur := o.top / 64
		for i := uint64(1); i <= min(block-cur, replayWords); i++ {
			o.seen[(cur+i)%replayWords] = 0
		}
		o.top = ctr
	}
	w, bit := &o.seen[block%replayWords], uint64(1)<<(ctr%64)
	if *w&bit != 0 {
		return false
	}
	*w |= bit
	return true
}
