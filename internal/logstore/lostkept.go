package logstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Losses kept (DESIGN.md section 2): nats-server forgets what it lost of
// a stream when it restarts again, so the first reader that sees its
// record (the projector's check, verify: both call StreamLost) writes it
// to LostBucket, once per loss, and every reader reports the records kept
// there until an operator acknowledges them (AckLost, `sessionlog verify
// --ack-lost`).

// LostBucket keeps what nats-server said it lost of a stream when it
// recovered its files: key = <stream>.<digest of the record>, value a
// LostRecord. Stream sequences and byte counts only: no session's id or
// content, so an erase has nothing to remove there.
const LostBucket = "SESSION_LOST"

const lostBucketDescription = "sessionlog: what nats-server said it lost of a stream when it recovered its files (key = <stream>.<digest>; DESIGN.md section 2), kept until an operator acknowledges it"

// LostRecord is one loss kept in LostBucket.
type LostRecord struct {
	Stream string   `json:"stream"`
	Msgs   []uint64 `json:"msgs,omitempty"`
	Bytes  uint64   `json:"bytes"`
	// Recovery is the server's recovery the record is of: the answering
	// leader's name and when it took the stream's lead, or the name and
	// per-start id of a server of no cluster.
	Recovery string `json:"recovery,omitempty"`
	// SeenAt is when a reader first saw the server's record.
	SeenAt time.Time `json:"seenAt"`
	// AckedAt is when an operator acknowledged it: no longer reported.
	AckedAt *time.Time `json:"ackedAt,omitempty"`
	// Key and Revision are the record's in the bucket.
	Key      string `json:"-"`
	Revision uint64 `json:"-"`
}

// lostKey is the key of the server's record ld of stream, of recovery
// (lostRecord): the same record read again (the server keeps it until it
// restarts) has the same key, so it is kept once; another recovery's
// record naming the same sequences or bytes has another.
func lostKey(stream, recovery string, ld *LostData) string {
	b, _ := json.Marshal(struct {
		LostData
		Recovery string `json:"recovery"`
	}{LostData{Msgs: ld.Msgs, Bytes: ld.Bytes}, recovery})
	h := sha256.Sum256(b)
	return stream + "." + hex.EncodeToString(h[:8])
}

// StreamLost is what stream lost that nobody acknowledged yet, nil when
// nothing: the server's record now (ServerLost), which it keeps in
// LostBucket when not kept yet, and every loss kept there before (of
// earlier recoveries, which the server has forgotten since), merged: the
// sequences of all, the bytes added up. When the bucket cannot be written
// or read, it says so in the store's log and answers the server's record
// alone.
func (s *Store) StreamLost(ctx context.Context, stream string) (*LostData, error) {
	now, recovery, err := s.serverLost(ctx, stream)
	if err != nil {
		return nil, err
	}
	if now != nil {
		if err := s.keepLost(ctx, stream, recovery, now); err != nil {
			s.log.Warn("logstore: cannot keep what nats-server says it lost of a stream: it is forgotten when the server restarts", "stream", stream, "err", err)
			return now, nil
		}
	}
	kept, err := s.LostKept(ctx, stream)
	if err != nil {
		s.log.Warn("logstore: cannot read the losses kept of a stream: answering the server's record alone", "stream", stream, "err", err)
		return now, nil
	}
	return mergeLost(kept), nil
}

// mergeLost is the records not acknowledged, merged; nil when none.
func mergeLost(recs []LostRecord) *LostData {
	var ld LostData
	n := 0
	for _, r := range recs {
		if r.AckedAt != nil {
			continue
		}
		n++
		ld.Msgs = append(ld.Msgs, r.Msgs...)
		ld.Bytes += r.Bytes
	}
	if n == 0 {
		return nil
	}
	slices.Sort(ld.Msgs)
	ld.Msgs = slices.Compact(ld.Msgs)
	return &ld
}

// keepLost writes the server's record ld of stream to LostBucket unless
// it is there (acknowledged or not).
func (s *Store) keepLost(ctx context.Context, stream, recovery string, ld *LostData) error {
	kv, err := s.lostKV(ctx)
	if err != nil {
		return err
	}
	b, err := json.Marshal(LostRecord{Stream: stream, Msgs: ld.Msgs, Bytes: ld.Bytes, Recovery: recovery, SeenAt: time.Now().UTC()})
	if err != nil {
		return err
	}
	if _, err := kv.Create(ctx, lostKey(stream, recovery, ld), b); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("logstore: bucket %s: %w", LostBucket, err)
	}
	return nil
}

// lostKV opens LostBucket, and makes it when it is not there (a store
// opened without provisioning, on a deployment older than the bucket).
func (s *Store) lostKV(ctx context.Context) (jetstream.KeyValue, error) {
	kv, err := s.lostKept.open(ctx, s.js, LostBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		if _, err = s.provisionBucket(ctx, LostBucket, lostBucketDescription, 0); err == nil {
			kv, err = s.lostKept.open(ctx, s.js, LostBucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("logstore: bucket %s: %w", LostBucket, err)
	}
	return kv, nil
}

// LostKept lists the losses kept of stream (of every stream when stream
// is empty), acknowledged or not; none when the bucket is not there.
func (s *Store) LostKept(ctx context.Context, stream string) ([]LostRecord, error) {
	prefix := "$KV." + LostBucket + "."
	subject := prefix + ">"
	if stream != "" {
		subject = prefix + stream + ".*"
	}
	var out []LostRecord
	err := s.walk(ctx, FollowSpec{Stream: "KV_" + LostBucket, Subject: subject, PageEvents: lastPage, lastPerSubject: true}, false, func(m *Msg) error {
		if m.Header.Get(headerKVOperation) != "" {
			return nil // deleted or purged by hand: no longer kept
		}
		var r LostRecord
		if err := json.Unmarshal(m.Data, &r); err != nil {
			return fmt.Errorf("logstore: %s %s: %w", LostBucket, m.Subject, err)
		}
		r.Key, r.Revision = strings.TrimPrefix(m.Subject, prefix), m.StreamSeq
		out = append(out, r)
		return nil
	})
	if isStreamNotFound(err) {
		return nil, nil
	}
	return out, err
}

// AckLost marks every loss kept of stream (of every stream when stream is
// empty) that is not acknowledged yet as acknowledged at now, and returns
// them: no longer reported by StreamLost. The records stay, so the
// server's record, which it keeps until it restarts, is not kept anew.
func (s *Store) AckLost(ctx context.Context, stream string, now time.Time) ([]LostRecord, error) {
	recs, err := s.LostKept(ctx, stream)
	if err != nil || len(recs) == 0 {
		return nil, err
	}
	kv, err := s.lostKV(ctx)
	if err != nil {
		return nil, err
	}
	var acked []LostRecord
	for _, r := range recs {
		if r.AckedAt != nil {
			continue
		}
		at := now.UTC()
		r.AckedAt = &at
		b, err := json.Marshal(r)
		if err != nil {
			return acked, err
		}
		if _, err := kv.Update(ctx, r.Key, b, r.Revision); err != nil {
			return acked, fmt.Errorf("logstore: %s %s: %w", LostBucket, r.Key, err)
		}
		acked = append(acked, r)
	}
	return acked, nil
}
