package logstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/pkg/api"
)

// SourceBucket indexes the transcripts written through the source
// endpoints (DESIGN.md section 15): which project a session belongs to,
// and a project's transcripts by key, so a listing reads one project's
// keys and nothing of the rest of the fleet. The writer chooses the keys;
// the bucket only stores them.
const SourceBucket = api.SourceBucket

// The keys of the index (the writer's, docs/adr/007-source-index.md):
//
//	o.<sessionId>                          the key that owns the session (first writer wins)
//	p.<format>.<project>.<session>[.<sub>] the listing record, with its mtime
//
// <project> is 128 bits of the SHA-256 of the project key (base64url), and
// <session>, <sub> the session key and subpath in base64url.

// SourceOwnerKey is the key of the record naming the session's owner.
func SourceOwnerKey(sessionID string) string { return "o." + sessionID }

// SourceProjectPrefix begins the listing keys of one project.
func SourceProjectPrefix(format, projectKey string) string {
	h := sha256.Sum256([]byte(projectKey))
	return "p." + format + "." + base64.RawURLEncoding.EncodeToString(h[:16]) + "."
}

// SourceListKey is the key of a transcript's listing record.
func SourceListKey(k api.SourceKey) string {
	key := SourceProjectPrefix(k.Format, k.ProjectKey) + base64.RawURLEncoding.EncodeToString([]byte(k.SessionKey))
	if k.Subpath != "" {
		key += "." + base64.RawURLEncoding.EncodeToString([]byte(k.Subpath))
	}
	return key
}

// SourceRecord is one stored index record.
type SourceRecord struct {
	Key      string
	Value    []byte
	Revision uint64
}

// provisionKV creates or updates a bucket that keeps one value per key,
// and whose keys an erase can delete (provisionBucket).
func (s *Store) provisionKV(ctx context.Context, bucket, description string) error {
	_, err := s.provisionBucket(ctx, bucket, description, 0)
	return err
}

func (s *Store) sourceKV(ctx context.Context) (jetstream.KeyValue, error) {
	kv, err := s.sources.open(ctx, s.js, SourceBucket)
	if err != nil {
		return nil, fmt.Errorf("logstore: bucket %s: %w", SourceBucket, err)
	}
	return kv, nil
}

// SourceGet returns the record at key; ok is false when there is none.
func (s *Store) SourceGet(ctx context.Context, key string) (rec SourceRecord, ok bool, err error) {
	kv, err := s.sourceKV(ctx)
	if err != nil {
		return SourceRecord{}, false, err
	}
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return SourceRecord{}, false, nil
	}
	if err != nil {
		return SourceRecord{}, false, fmt.Errorf("logstore: %s %s: %w", SourceBucket, key, err)
	}
	return SourceRecord{Key: key, Value: e.Value(), Revision: e.Revision()}, true, nil
}

// ErrSourceExists: SourceCreate found a record at the key.
var ErrSourceExists = errors.New("logstore: source record exists")

// SourceCreate writes the record at key if there is none (of several
// writers, the first wins); ErrSourceExists if there is one.
func (s *Store) SourceCreate(ctx context.Context, key string, value []byte) error {
	kv, err := s.sourceKV(ctx)
	if err != nil {
		return err
	}
	_, err = kv.Create(ctx, key, value)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return ErrSourceExists
	}
	if err != nil {
		return fmt.Errorf("logstore: %s %s: %w", SourceBucket, key, err)
	}
	return nil
}

// DropSourceOwner removes the session's owner record and the listing
// record it names, as an erase does (dropSourceRecords: every stored
// message of the keys is securely deleted), if the owner record still
// holds value: the record a source append wrote before the writer refused
// the append, or one such an append left and a later request found
// stale. dropped is false when the key holds another record (or none):
// nothing is removed then.
func (s *Store) DropSourceOwner(ctx context.Context, sessionID string, value []byte) (dropped bool, err error) {
	owner := SourceOwnerKey(sessionID)
	m, err := s.msgGet(ctx, "KV_"+SourceBucket, msgGetRequest{LastFor: "$KV." + SourceBucket + "." + owner})
	if err != nil {
		return false, fmt.Errorf("logstore: %s %s: %w", SourceBucket, owner, err)
	}
	if m == nil || m.Header.Get(headerKVOperation) != "" || !bytes.Equal(m.Data, value) {
		return false, nil
	}
	return true, s.dropSourceRecords(ctx, sessionID)
}

// SourcePut writes the record at key, whatever it was.
func (s *Store) SourcePut(ctx context.Context, key string, value []byte) error {
	kv, err := s.sourceKV(ctx)
	if err != nil {
		return err
	}
	if _, err := kv.Put(ctx, key, value); err != nil {
		return fmt.Errorf("logstore: %s %s: %w", SourceBucket, key, err)
	}
	return nil
}

// SourceList reads the records whose keys match the filter (a key with
// NATS wildcards), in the order they were last written, from after the
// bucket position after on: at most limit, and next is where the following
// page starts (0: there is none). Each record is one indexed lookup by
// subject, so a page costs limit reads whatever the size of the rest of
// the bucket. A record rewritten while a listing pages may be listed
// twice (it moved behind the cursor), never missed.
func (s *Store) SourceList(ctx context.Context, filter string, after uint64, limit int) (recs []SourceRecord, next uint64, err error) {
	if _, err := s.sourceKV(ctx); err != nil {
		return nil, 0, err
	}
	stream := "KV_" + SourceBucket
	prefix := "$KV." + SourceBucket + "."
	pos := after
	for len(recs) < limit {
		m, err := s.msgGet(ctx, stream, msgGetRequest{Seq: pos + 1, NextFor: prefix + filter})
		if err != nil {
			return nil, 0, fmt.Errorf("logstore: %s: %w", SourceBucket, err)
		}
		if m == nil {
			return recs, 0, nil
		}
		pos = m.StreamSeq
		if op := m.Header.Get("KV-Operation"); op == "DEL" || op == "PURGE" {
			continue
		}
		recs = append(recs, SourceRecord{Key: m.Subject[len(prefix):], Value: m.Data, Revision: m.StreamSeq})
	}
	return recs, pos, nil
}
