package logstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"
)

// A reader that serves a part of a session (the read API's pages) must
// give the verdict the judge gives reading the session from its start,
// without reading it from its start every time. What a judge found once
// stays true as long as the messages it read are still stored: JetStream
// never changes a stored message and stores a new one only after every
// message there is, so those messages can only have been deleted since
// (a changed event is a deletion and a message stored later), and a
// deletion shows in the number of messages the subject holds.
//
// The store keeps, per session, the last event of the prefix a judge last
// found readable reading from the start (and the seqs of the events an
// exact copy follows in it), and the session's first stored message then (its
// stream seq and the hash of its body): JudgedThrough. A reader holding a
// batch of the session's messages from event a <= that event on
// (ReadChained) and the subject's message count read before the batch
// (StoredCount) knows that the messages before the batch are still those
// events 1..a when the count less the messages the batch's answer counted
// from its lead on (Chained.Held) is a-1 and the copies before a, and the
// subject's first message
// is still the one the judge read first (Chained.PrefixJudged).
//
// The first message tells the stream the prefix was judged in from one
// deleted and made again under the same name (where stream seqs start
// over, so that a count and a lead's stream seq alone could match
// messages never judged): the session's first message there lies at
// another stream seq or has another body, unless it was stored again byte
// for byte at the same stream seq.

// numPendingHeader is the header of a batched direct get's answer that
// says how many messages of the subject follow the one it comes with
// (after the batch, on its end).
const numPendingHeader = "Nats-Num-Pending"

// JudgedPrefix is what the store knows of a prefix of a session a judge
// found readable from its start: its last event (Tail), the session's
// first stored message when it was judged, and the seqs of the events an
// exact copy follows in it (a copy is skipped, not a break: it only adds
// a message before every later event), oldest first.
type JudgedPrefix struct {
	Tail
	First  FirstStored
	Copies []uint64
}

// maxJudgedCopies bounds the copies a judged prefix records; one with
// more is not recorded.
const maxJudgedCopies = 64

// StoredBefore is how many messages of the prefix were stored before
// event seq (within it): the events before it and their copies.
func (p JudgedPrefix) StoredBefore(seq uint64) uint64 {
	n := seq - 1
	for _, c := range p.Copies {
		if c >= seq {
			break
		}
		n++
	}
	return n
}

// FirstStored names a session's first stored message: its stream seq and
// the ChainHash of its body. The zero FirstStored: none, or not known.
type FirstStored struct {
	StreamSeq uint64
	Hash      string
}

// firstStored is the FirstStored of m.
func firstStored(m *Msg) FirstStored {
	return FirstStored{StreamSeq: m.StreamSeq, Hash: ChainHash(m.Data)}
}

// Count is StoredCount's answer: how many messages the session's subject
// holds, and the first of them.
type Count struct {
	N     uint64
	First FirstStored
}

// JudgedThrough returns the last event of the prefix of the session that
// a judge last found readable from its start: its messages stored up to
// that event's stream seq were then its events 1..Seq, each once and
// readable, and exact copies of the events Copies names, the first of
// them First. false when this store knows none.
func (s *Store) JudgedThrough(sessionID string) (JudgedPrefix, bool) { return s.judged.Get(sessionID) }

// NoteJudged records p as JudgedThrough's answer for the session when it
// is longer than the one known, or was judged with another first message
// (a stream made again): its stored messages up to p.StreamSeq are its
// events 1..p.Seq and exact copies of the events p.Copies names, the
// first of them p.First, all of
// which the judge reading from the session's start accepts (shown so
// now). A read of the whole prefix by the judge replaces the answer
// whatever its length (an earlier, longer prefix may have lost a message
// since).
func (s *Store) NoteJudged(sessionID string, p JudgedPrefix) {
	if p.StreamSeq == 0 || p.Seq == 0 || p.First.StreamSeq == 0 {
		return
	}
	if old, ok := s.judged.Get(sessionID); ok && old.First == p.First && old.Seq >= p.Seq {
		return
	}
	s.judged.Add(sessionID, p)
}

// StoredCount returns how many messages the session's subject holds
// (events, copies, anything stored there), and the first of them, as a
// replica counts them: a
// direct get of the subject's first message asked as a batch of one,
// whose Nats-Num-Pending header says how many follow it. The server
// answers from its per-subject index without reading the messages after
// the first. Only that message is waited for (the end of the batch,
// which follows it, finds no one waiting), over the connection's shared
// reply inbox: no subscription of its own per count.
func (s *Store) StoredCount(ctx context.Context, sessionID string) (Count, error) {
	loc, err := s.Locate(sessionID)
	if err != nil {
		return Count{}, err
	}
	body, err := json.Marshal(directGetRequest{Seq: 1, NextFor: loc.Subject, Batch: 1})
	if err != nil {
		return Count{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	m, err := s.nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+loc.Stream, body)
	if err != nil {
		return Count{}, fmt.Errorf("logstore: count %s: %w", loc.Subject, err)
	}
	if len(m.Data) == 0 && m.Header.Get("Status") == "404" {
		return Count{}, nil // nothing stored
	}
	n, err := strconv.ParseUint(m.Header.Get(numPendingHeader), 10, 64)
	first, serr := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil || serr != nil || m.Header.Get(jetstream.SubjectHeader) != loc.Subject {
		return Count{}, fmt.Errorf("logstore: count %s: answered %q (status %q) with %s %q", loc.Subject, m.Header.Get(jetstream.SubjectHeader), m.Header.Get("Status"), numPendingHeader, m.Header.Get(numPendingHeader))
	}
	if s.cfg.FaultHook != nil {
		_ = s.cfg.FaultHook(FaultCounted)
	}
	fm := &Msg{StreamSeq: first, Subject: loc.Subject, Header: m.Header, Data: m.Data}
	if err := s.open(ctx, fm); err != nil {
		return Count{}, fmt.Errorf("logstore: count %s: %w", loc.Subject, err)
	}
	return Count{N: n + 1, First: firstStored(fm)}, nil
}

// FaultCounted runs when StoredCount has its answer, before it returns
// it: a test appends there to store a message between a count and the
// read that relies on it.
const FaultCounted FaultStage = "counted"

// PrefixJudged reports whether the session's messages stored before c's
// lead (the event at afterSeq > 0) are still its events 1..afterSeq as a
// judge found them readable (judged, JudgedThrough's answer before the
// batch was read): the lead lies within the judged prefix, the subject's
// first message is still the one judged first, and count (the subject's
// StoredCount, read before the batch) less the messages c's answer
// counted from the lead on is the number judged before the lead
// (JudgedPrefix.StoredBefore: afterSeq-1 and the copies among them).
//
// The messages before the lead were all stored before it, so they are
// the judged events 1..afterSeq-1 and their copies less any deleted
// since: their count tells whether one was. Messages stored between the count and the batch make
// the difference smaller, never larger: false, then, though nothing was
// deleted (a reader may read both again).
func (c Chained) PrefixJudged(judged JudgedPrefix, afterSeq uint64, count Count) bool {
	return afterSeq > 0 && afterSeq <= judged.Seq && c.LeadStreamSeq != 0 && c.LeadStreamSeq <= judged.StreamSeq &&
		judged.First.StreamSeq != 0 && count.First == judged.First &&
		c.Held > 0 && count.N >= uint64(c.Held) && count.N-uint64(c.Held) == judged.StoredBefore(afterSeq)
}
