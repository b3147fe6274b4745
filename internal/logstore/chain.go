package logstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// HeaderPrev is SL-Prev, the hash chain of a session's stored events
// (DESIGN.md section 2): each event carries ChainHash of the exact body
// stored as the session's previous event; the session's first event
// carries none. A gap, a changed event or a reordered one then shows
// where the chain breaks, whatever the seqs in the bodies say.
const HeaderPrev = "SL-Prev"

// ChainHash is the hash of a stored body that the session's next event
// carries in SL-Prev: the first 16 bytes of its SHA-256, in lower-case hex
// (32 characters; `sha256sum | cut -c1-32` of the body gives it).
func ChainHash(body []byte) string { return api.ChainHash(body) }

// ChainSum is ChainHash unspelled: the 16 bytes its hex spells. A reader
// that judges every event of a session keeps the last one's so
// (Judge.Unspelled) and spells it only where it shows it: the string
// ChainHash allocates per event was 1.5% of the projector's fold.
type ChainSum [16]byte

// ChainSumOf is the ChainSum of a stored body.
func ChainSumOf(body []byte) ChainSum {
	s := sha256.Sum256(body)
	return ChainSum(s[:16])
}

// String is ChainHash's spelling of s.
func (s ChainSum) String() string { return hex.EncodeToString(s[:]) }

// Spells reports whether h is s's ChainHash, comparing without spelling s.
func (s ChainSum) Spells(h string) bool {
	const digits = "0123456789abcdef"
	if len(h) != 2*len(s) {
		return false
	}
	for i, c := range s {
		if h[2*i] != digits[c>>4] || h[2*i+1] != digits[c&15] {
			return false
		}
	}
	return true
}

// ParseChainSum is the ChainSum h spells (a ChainHash); false when h is
// not one.
func ParseChainSum(h string) (ChainSum, bool) {
	var s ChainSum
	if n, err := hex.Decode(s[:], []byte(h)); err != nil || n != len(s) || len(h) != 2*len(s) || !s.Spells(h) {
		return ChainSum{}, false
	}
	return s, true
}

// Kinds of chain break.
const (
	BreakGap       = "gap"       // events are missing before this one
	BreakChanged   = "changed"   // the previous event is not the one this one was written after
	BreakReordered = "reordered" // this event is stored after a later one
)

// ChainBreak is where a session's stored events stop being the chain they
// were written as. Seq and StreamSeq name the event found wrong (for
// BreakChanged the previous event: its body is not the one the next
// event's SL-Prev names).
type ChainBreak struct {
	Kind      string
	Seq       uint64
	StreamSeq uint64
	Message   string
}

func (b *ChainBreak) Error() string {
	return fmt.Sprintf("hash chain broken at seq %d (stream seq %d): %s: %s", b.Seq, b.StreamSeq, b.Kind, b.Message)
}

// Link is the chain's state after one stored event of a session: its seq,
// stream seq and ChainHash (the zero Link: no event yet; an empty Hash:
// unknown, the next SL-Prev is not checked).
type Link struct {
	Seq, StreamSeq uint64
	Hash           string
	// sum, if set, is the hash unspelled (Hash is then empty).
	sum *ChainSum
}

// hash is l's hash spelled.
func (l *Link) hash() string {
	if l.sum != nil {
		return l.sum.String()
	}
	return l.Hash
}

// is reports whether a body of ChainSum sum (spelled hash, when l's hash
// is spelled) is l's body (or l's hash is unknown).
func (l *Link) is(sum ChainSum, hash string) bool {
	if l.sum != nil {
		return *l.sum == sum
	}
	return l.Hash == "" || l.Hash == hash
}

// follows reports whether an SL-Prev of h names l's body (or l's hash
// is unknown).
func (l *Link) follows(h string) bool {
	if l.sum != nil {
		return l.sum.Spells(h)
	}
	return l.Hash == "" || h == l.Hash
}

// LinkOf is the link of stored message m, holding event seq.
func LinkOf(m *Msg, seq uint64) Link {
	return Link{Seq: seq, StreamSeq: m.StreamSeq, Hash: ChainHash(m.Data)}
}

// CheckLink checks that m, holding event seq, is the session's event that
// follows prev (the session's previous stored event; the zero Link for its
// first stored message): its seq is the next one, and its SL-Prev, when it
// has one, is the previous body's hash. An event stored without SL-Prev
// (by a writer older than the header) is checked on its seq alone. nil
// when it follows.
func CheckLink(prev Link, m *Msg, seq uint64) *ChainBreak {
	if prev.StreamSeq == 0 {
		return nil
	}
	switch {
	case seq > prev.Seq+1:
		return &ChainBreak{Kind: BreakGap, Seq: seq, StreamSeq: m.StreamSeq,
			Message: fmt.Sprintf("seq %d follows seq %d (stream seq %d): %s missing", seq, prev.Seq, prev.StreamSeq, seqRange(prev.Seq+1, seq-1))}
	case seq <= prev.Seq:
		return &ChainBreak{Kind: BreakReordered, Seq: seq, StreamSeq: m.StreamSeq,
			Message: fmt.Sprintf("seq %d is stored after seq %d (stream seq %d)", seq, prev.Seq, prev.StreamSeq)}
	}
	if h := m.Header.Get(HeaderPrev); h != "" && !prev.follows(h) {
		return &ChainBreak{Kind: BreakChanged, Seq: prev.Seq, StreamSeq: prev.StreamSeq,
			Message: fmt.Sprintf("the stored body of seq %d hashes to %s, but seq %d (stream seq %d) was written after a body hashing to %s", prev.Seq, prev.hash(), seq, m.StreamSeq, schema.Clip(h, 64))}
	}
	return nil
}

func seqRange(from, to uint64) string {
	if from == to {
		return fmt.Sprintf("seq %d is", from)
	}
	return fmt.Sprintf("seqs %d..%d are", from, to)
}

// CheckChain checks a session's stored messages, in stream order, with
// their event seqs (seqs[i] of msgs[i]), and returns every break: a gap, a
// changed event, a reordered one. Seeing the whole session it tells a
// reordering from a gap: a seq found missing that is stored further on
// was moved, not lost.
func CheckChain(msgs []*Msg, seqs []uint64) []ChainBreak {
	var out []ChainBreak
	stored := make(map[uint64]bool, len(seqs))
	for _, s := range seqs {
		stored[s] = true
	}
	var prev Link
	for i, m := range msgs {
		if b := CheckLink(prev, m, seqs[i]); b != nil {
			if b.Kind == BreakGap && stored[prev.Seq+1] {
				b.Kind = BreakReordered
				b.Message = fmt.Sprintf("seq %d follows seq %d (stream seq %d), and seq %d is stored later", seqs[i], prev.Seq, prev.StreamSeq, prev.Seq+1)
			}
			out = append(out, *b)
		}
		if seqs[i] > prev.Seq || prev.StreamSeq == 0 {
			prev = LinkOf(m, seqs[i])
		}
	}
	return out
}

// prevHash is the SL-Prev of req's first event: req.PrevHash, else the
// hash this store's cached tail holds for the expected position, else the
// stored body read there. A caller that keeps the session's state (the
// writer) passes it and costs no read. A body at the expected position
// that cannot be read has no hash to chain to: the append is refused
// (nothing stored) rather than stored without SL-Prev, with the verdict
// when it is one on that message (a sealed body that does not open, code
// unreadable, as PublishUnchecked answers there; its key gone, erased).
func (s *Store) prevHash(req *AppendRequest, loc Location) (string, error) {
	if req.PrevHash != "" || req.ExpectedStreamSeq == 0 {
		return req.PrevHash, nil
	}
	if t, ok := s.tails.Get(req.SessionID); ok && t.StreamSeq == req.ExpectedStreamSeq && t.Hash != "" {
		return t.Hash, nil
	}
	ctx, cancel := s.withTimeout(context.Background())
	defer cancel()
	sm, h, err := s.msgGetStored(ctx, loc.Stream, msgGetRequest{Seq: req.ExpectedStreamSeq})
	if err == nil && (sm == nil || sm.Subject != loc.Subject) {
		// Not the session's message: the expectation fails the append.
		return "", nil
	}
	var m *Msg
	if err == nil {
		m = &Msg{StreamSeq: sm.Sequence, Subject: sm.Subject, Header: h, Data: sm.Data}
		err = s.open(ctx, m)
	}
	switch {
	case openFailed(err):
		return "", err
	case err != nil:
		return "", notCommitted(fmt.Errorf("reading the body at stream seq %d to chain after: %w", req.ExpectedStreamSeq, err))
	}
	return ChainHash(m.Data), nil
}
