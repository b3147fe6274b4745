package logstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/pkg/api"
)

// Erasure (DESIGN.md section 14). An erase marks the session in
// SESSION_ERASED first (the writer then refuses the id, readers answer
// erased), then deletes its messages oldest first with JetStream's secure
// delete (the server overwrites the message's bytes in its block file),
// then drops its lease, claim and fork records, then writes the audit
// record once (expected last subject sequence 0). Each step is idempotent,
// so an erase killed anywhere is finished by repeating it.

// ErasedBucket holds one record per erased (or erasing) session.
const ErasedBucket = "SESSION_ERASED"

// Erasure is a SESSION_ERASED record. The digest of the bodies is taken
// before anything is deleted and kept here, so a repeated erase writes
// the same audit record as the one that was interrupted.
type Erasure struct {
	SessionID string `json:"sessionId"`
	By        string `json:"by"`
	Reason    string `json:"reason"`
	ErasedAt  string `json:"erasedAt"`
	// Hashed: LastSeq, Events and SHA256 describe the erased bodies.
	Hashed  bool   `json:"hashed,omitempty"`
	LastSeq uint64 `json:"lastSeq,omitempty"`
	Events  uint64 `json:"events,omitempty"`
	SHA256  string `json:"sha256,omitempty"`
	// Done: every step finished and the audit record is written.
	Done bool `json:"done,omitempty"`
}

// Audit is the record the audit stream keeps.
func (e Erasure) Audit() api.AuditRecord {
	return api.AuditRecord{SessionID: e.SessionID, LastSeq: e.LastSeq, Events: e.Events, ErasedAt: e.ErasedAt,
		By: e.By, Reason: e.Reason, SHA256: e.SHA256}
}

func (s *Store) provisionErasure(ctx context.Context) error {
	if err := s.provisionKV(ctx, ErasedBucket, "sessionlog: erased session ids (DESIGN.md section 14); no content"); err != nil {
		return err
	}
	if _, err := s.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        api.AuditStream,
		Description: "sessionlog: one audit record per erased session, no content",
		Subjects:    []string{api.AuditSubjectPrefix + "*"},
		Storage:     jetstream.FileStorage,
		Replicas:    s.cfg.Replicas,
		DenyDelete:  true,
		DenyPurge:   true,
		MaxMsgs:     -1,
		MaxBytes:    -1,
		Retention:   jetstream.LimitsPolicy,
	}); err != nil {
		return fmt.Errorf("logstore: provision stream %s: %w", api.AuditStream, err)
	}
	return nil
}

func (s *Store) erasedKV(ctx context.Context) (jetstream.KeyValue, error) {
	s.erasedOnce.Lock()
	defer s.erasedOnce.Unlock()
	if s.erased != nil {
		return s.erased, nil
	}
	kv, err := s.js.KeyValue(ctx, ErasedBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		// Not provisioned yet (services older than erasure): nothing was
		// ever erased. Looked up again next time.
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("logstore: bucket %s: %w", ErasedBucket, err)
	}
	s.erased = kv
	return kv, nil
}

// erasedKVRequired is erasedKV for callers that need the bucket.
func (s *Store) erasedKVRequired(ctx context.Context) (jetstream.KeyValue, error) {
	kv, err := s.erasedKV(ctx)
	if err == nil && kv == nil {
		err = fmt.Errorf("logstore: bucket %s: %w (start a service that provisions it)", ErasedBucket, jetstream.ErrBucketNotFound)
	}
	return kv, err
}

// ErasureOf returns the session's erasure record and its revision; nil
// when the session was never erased. It reads from the bucket's leader,
// never by Direct Get: on R3 any replica answers a Direct Get, and one
// that has not yet applied a record just written would say the session
// was never erased (a read right after an erase served its events).
func (s *Store) ErasureOf(ctx context.Context, sessionID string) (*Erasure, uint64, error) {
	if err := ValidateSessionID(sessionID); err != nil {
		return nil, 0, err
	}
	m, err := s.msgGet(ctx, "KV_"+ErasedBucket, msgGetRequest{LastFor: "$KV." + ErasedBucket + "." + sessionID})
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamNotFound {
		// Not provisioned yet (services older than erasure): nothing was
		// ever erased.
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("logstore: erasure record of %s: %w", sessionID, err)
	}
	if m == nil || m.Header.Get(headerKVOperation) != "" {
		return nil, 0, nil // none, or deleted (DEL, PURGE)
	}
	var e Erasure
	if err := json.Unmarshal(m.Data, &e); err != nil {
		return nil, 0, fmt.Errorf("logstore: erasure record of %s: %w", sessionID, err)
	}
	return &e, m.StreamSeq, nil
}

// Erased reports whether the session id was erased (or is being erased).
func (s *Store) Erased(ctx context.Context, sessionID string) (bool, error) {
	e, _, err := s.ErasureOf(ctx, sessionID)
	return e != nil, err
}

// MarkErased writes the session's erasure record unless it has one, and
// returns the record that holds (an interrupted erase's, when repeated).
func (s *Store) MarkErased(ctx context.Context, e Erasure) (Erasure, uint64, error) {
	kv, err := s.erasedKVRequired(ctx)
	if err != nil {
		return e, 0, err
	}
	b, _ := json.Marshal(e)
	rev, err := kv.Create(ctx, e.SessionID, b)
	if err == nil {
		return e, rev, nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return e, 0, fmt.Errorf("logstore: mark %s erased: %w", e.SessionID, err)
	}
	got, rev, err := s.ErasureOf(ctx, e.SessionID)
	if err != nil || got == nil {
		return e, 0, fmt.Errorf("logstore: mark %s erased: %w", e.SessionID, err)
	}
	return *got, rev, nil
}

// UpdateErasure replaces the record at revision rev.
func (s *Store) UpdateErasure(ctx context.Context, e Erasure, rev uint64) (uint64, error) {
	kv, err := s.erasedKVRequired(ctx)
	if err != nil {
		return 0, err
	}
	b, _ := json.Marshal(e)
	return kv.Update(ctx, e.SessionID, b, rev)
}

// WatchErasures calls fn with the id of every erasure record, the ones
// stored when it starts included, until ctx ends. ready is closed once
// the stored ones have been delivered.
func (s *Store) WatchErasures(ctx context.Context, ready chan<- struct{}, fn func(id string)) error {
	kv, err := s.erasedKVRequired(ctx)
	if err != nil {
		return err
	}
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("logstore: watch %s: %w", ErasedBucket, err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ent, ok := <-w.Updates():
			if !ok {
				return errors.New("logstore: erasure watch closed")
			}
			if ent == nil {
				if ready != nil {
					close(ready)
					ready = nil
				}
				continue
			}
			fn(ent.Key())
		}
	}
}

// EraseEvents deletes every stored message of the session, oldest first,
// with the server's secure delete (its bytes are overwritten in the
// store's files). Deleting the oldest first means a reader that comes
// between two deletes sees a session that does not start at seq 1 (a
// gap), never a shorter session that looks whole. It returns how many
// messages it deleted. onDelete, if set, is called after each delete and
// ends the erase with its error (tests interrupt it there).
func (s *Store) EraseEvents(ctx context.Context, sessionID string, onDelete func() error) (int, error) {
	loc, err := s.Locate(sessionID)
	if err != nil {
		return 0, err
	}
	st, err := s.js.Stream(ctx, loc.Stream)
	if err != nil {
		return 0, fmt.Errorf("logstore: erase %s: %w", sessionID, err)
	}
	n := 0
	for {
		m, err := s.NextAfter(ctx, sessionID, 0)
		if err != nil {
			return n, fmt.Errorf("logstore: erase %s: %w", sessionID, err)
		}
		if m == nil {
			s.ForgetTail(sessionID)
			return n, nil
		}
		if err := st.SecureDeleteMsg(ctx, m.StreamSeq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return n, fmt.Errorf("logstore: erase %s at stream seq %d: %w", sessionID, m.StreamSeq, err)
		}
		n++
		if onDelete != nil {
			if err := onDelete(); err != nil {
				return n, err
			}
		}
	}
}

// DropSessionRecords removes the session's lease, claim and fork record
// with their history (a purge leaves only a marker holding the key).
func (s *Store) DropSessionRecords(ctx context.Context, sessionID string) error {
	for _, kv := range []jetstream.KeyValue{s.kv, s.claims} {
		if err := purgeKey(ctx, kv, sessionID); err != nil {
			return err
		}
	}
	forks, err := s.js.KeyValue(ctx, api.ForkBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("logstore: fork bucket: %w", err)
	}
	return purgeKey(ctx, forks, sessionID)
}

func purgeKey(ctx context.Context, kv jetstream.KeyValue, key string) error {
	if _, err := kv.Get(ctx, key); errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err := kv.Purge(ctx, key); err != nil {
		return fmt.Errorf("logstore: purge %s in %s: %w", key, kv.Bucket(), err)
	}
	return nil
}

// WriteAudit appends the erasure's audit record unless the session has
// one: the publish expects the subject to be empty, so of two erases of
// one session (or a repeated one) only one record is ever stored.
func (s *Store) WriteAudit(ctx context.Context, rec api.AuditRecord) error {
	b, _ := json.Marshal(rec)
	m := nats.NewMsg(api.AuditSubjectPrefix + rec.SessionID)
	m.Data = b
	m.Header.Set(HeaderExpectedSeq, "0")
	m.Header.Set(HeaderMsgID, "erased:"+rec.SessionID)
	_, err := s.js.PublishMsg(ctx, m)
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("logstore: audit %s: %w", rec.SessionID, err)
	}
	return nil
}

// AuditRecords reads the audit stream's records after stream sequence
// after, at most limit, oldest first; next is where the following page
// starts.
func (s *Store) AuditRecords(ctx context.Context, after uint64, limit int) (recs []api.AuditRecord, next uint64, err error) {
	next = after
	for len(recs) < limit {
		m, err := s.msgGet(ctx, api.AuditStream, msgGetRequest{Seq: next + 1, NextFor: api.AuditSubjectPrefix + "*"})
		if err != nil {
			return recs, next, fmt.Errorf("logstore: audit: %w", err)
		}
		if m == nil {
			break
		}
		next = m.StreamSeq
		var r api.AuditRecord
		if err := json.Unmarshal(m.Data, &r); err != nil {
			return recs, next, fmt.Errorf("logstore: audit record at %d: %w", m.StreamSeq, err)
		}
		recs = append(recs, r)
	}
	return recs, next, nil
}

// ErrDeletesDenied: the log's stream was made with deny_delete (before
// erasure existed), which the server never lets an update lift.
var ErrDeletesDenied = errors.New("logstore: the stream denies message deletes (made before erasure); its sessions cannot be erased")

// CheckErasable returns ErrDeletesDenied if the session's stream denies
// message deletes.
func (s *Store) CheckErasable(ctx context.Context, sessionID string) error {
	loc, err := s.Locate(sessionID)
	if err != nil {
		return err
	}
	st, err := s.js.Stream(ctx, loc.Stream)
	if err != nil {
		return fmt.Errorf("logstore: stream %s: %w", loc.Stream, err)
	}
	if st.CachedInfo().Config.DenyDelete {
		return ErrDeletesDenied
	}
	return nil
}
