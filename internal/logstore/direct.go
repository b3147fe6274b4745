package logstore

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// MaxDirectRead bounds the events of a session ReadSessionFrom reads with
// one batched direct get; a longer remainder is read as ReadSession reads.
const MaxDirectRead = 256

// ReadSessionFrom is ReadSession for a reader that knows afterSeq, the
// session seq of the event at afterStreamSeq (0 with it): one that keeps
// folded states and reads what was appended since.
//
// The events up to the leader's tail are immutable, so they may come from
// any replica: a remainder of at most MaxDirectRead events is fetched with
// one batched direct get instead of a leader read per event. A replica
// that does not have them all yet (or an error) sends the read the way
// ReadSession goes.
func (s *Store) ReadSessionFrom(ctx context.Context, sessionID string, afterStreamSeq, afterSeq uint64, fn func(*Msg) error) (Tail, error) {
	loc, err := s.Locate(sessionID)
	if err != nil {
		return Tail{}, err
	}
	tail, err := s.Tail(ctx, sessionID)
	if err != nil || tail.StreamSeq <= afterStreamSeq {
		return tail, err
	}
	if tail.Seq <= afterSeq || tail.Seq-afterSeq > MaxDirectRead {
		return s.readUpTo(ctx, loc, sessionID, afterStreamSeq, tail, fn)
	}
	msgs, ok := s.directRead(ctx, loc, afterStreamSeq, int(tail.Seq-afterSeq), tail.StreamSeq)
	if !ok {
		return s.readUpTo(ctx, loc, sessionID, afterStreamSeq, tail, fn)
	}
	for _, m := range msgs {
		if err := fn(m); err != nil {
			if errors.Is(err, ErrStop) {
				return tail, nil
			}
			return tail, err
		}
	}
	return tail, nil
}

// directRead fetches the session's n events after afterStreamSeq with one
// batched direct get; the last must be at tailStreamSeq. ok is false when
// they are not exactly that.
func (s *Store) directRead(ctx context.Context, loc Location, afterStreamSeq uint64, n int, tailStreamSeq uint64) ([]*Msg, bool) {
	got, _, err := s.directBatch(ctx, loc.Stream, directGetRequest{Seq: afterStreamSeq + 1, NextFor: loc.Subject, Batch: n})
	if err != nil || len(got) < n {
		return nil, false
	}
	msgs := make([]*Msg, 0, n)
	for _, m := range got {
		seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
		if err != nil || m.Header.Get(jetstream.SubjectHeader) != loc.Subject || seq <= afterStreamSeq || seq > tailStreamSeq {
			return nil, false
		}
		msgs = append(msgs, &Msg{StreamSeq: seq, Subject: loc.Subject, Header: m.Header, Data: m.Data})
	}
	if msgs[n-1].StreamSeq != tailStreamSeq || s.openAll(ctx, msgs) != nil {
		// A body that does not open: the consumer's read says why.
		return nil, false
	}
	return msgs, true
}

// directBatch sends a batched direct get and collects its answer: the
// messages, then the end-of-batch status (nil when the answer ended
// otherwise: an error status before any message, no message at all, the
// request timeout). The messages are those that came before the end.
//
// The reply inbox gets a channel sized to the batch (jetstreamext's
// GetBatch subscribes with the connection's default pending limit, a
// half-megabyte channel allocated per read, and cannot ask for no
// headers).
func (s *Store) directBatch(ctx context.Context, stream string, req directGetRequest) ([]*nats.Msg, *nats.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	inbox := s.nc.NewInbox()
	ch := make(chan *nats.Msg, req.Batch+1) // the batch and its end
	sub, err := s.nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	body, err := json.Marshal(req)
	if err != nil {
		return nil, nil, err
	}
	if err := s.nc.PublishRequest("$JS.API.DIRECT.GET."+stream, inbox, body); err != nil {
		return nil, nil, err
	}
	msgs := make([]*nats.Msg, 0, req.Batch)
	for {
		var m *nats.Msg
		select {
		case m = <-ch:
		case <-ctx.Done():
			return msgs, nil, ctx.Err()
		}
		if len(m.Data) == 0 && m.Header.Get("Status") != "" {
			if m.Header.Get("Status") == "204" {
				return msgs, m, nil
			}
			return msgs, nil, nil // 404: nothing from there on
		}
		msgs = append(msgs, m)
	}
}

// directGetRequest is a batched direct get: up to Batch messages of the
// subject from stream sequence Seq on, stopping once MaxBytes (subjects,
// stored headers and bodies) were sent; with NoHeaders only their bodies.
//
// With LastFor (multi_last) and UpTo instead of NextFor: the last message
// of each subject at or before stream seq UpTo.
type directGetRequest struct {
	Seq       uint64   `json:"seq"`
	NextFor   string   `json:"next_by_subj,omitempty"`
	Batch     int      `json:"batch"`
	MaxBytes  int      `json:"max_bytes,omitempty"`
	NoHeaders bool     `json:"no_hdr,omitempty"`
	LastFor   []string `json:"multi_last,omitempty"`
	UpTo      uint64   `json:"up_to_seq,omitempty"`
}
