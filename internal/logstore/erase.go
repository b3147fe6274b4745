package logstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
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

// Erasure is a SESSION_ERASED record, and the erase's job: it says where
// the erase stands, so any eraser (the one that took the request, or one
// started later) finishes it from there.
//
// The digest is taken as the events are deleted, batch by batch: a batch
// is hashed into HashState and the record updated (Through is the stream
// seq hashed up to) before the batch is deleted, so a resumed erase
// deletes what it hashed without hashing it twice and hashes what came
// after. LastSeq, Events and SHA256 then describe exactly the events
// deleted, appends that landed during the erase included.
type Erasure struct {
	SessionID string `json:"sessionId"`
	By        string `json:"by"`
	Reason    string `json:"reason"`
	ErasedAt  string `json:"erasedAt"`
	// Hashed: LastSeq, Events and SHA256 describe the erased bodies. A
	// record without Phase (written before erase jobs) sets it before
	// deleting anything: its digest is whole already.
	Hashed  bool   `json:"hashed,omitempty"`
	LastSeq uint64 `json:"lastSeq,omitempty"`
	Events  uint64 `json:"events,omitempty"`
	SHA256  string `json:"sha256,omitempty"`
	// Done: every step finished and the audit record is written.
	Done bool `json:"done,omitempty"`

	// Phase is the step the job is at (ErasePhase*).
	Phase string `json:"phase,omitempty"`
	// Total: the session's events when the erase was accepted (for a
	// progress bar; appends during the erase may add to it). Deleted:
	// messages deleted so far. Past the deletes (the eraser sets them as
	// its job leaves phase records), Deleted is Events plus Unhashed and
	// Total as many.
	Total   uint64 `json:"total,omitempty"`
	Deleted uint64 `json:"deleted,omitempty"`
	// Through: the stream seq the digest covers up to (each message up to
	// it is in the digest, or counted in Unhashed); HashState: the
	// digest's state after it (sha256, marshalled, base64).
	Through   uint64 `json:"through,omitempty"`
	HashState string `json:"hashState,omitempty"`
	// Unhashed: messages the job deleted without hashing them, sealed
	// bodies that do not open: one past the digest stored around the
	// writer with the key the erase destroyed, or one garbled before the
	// erase while its key was there (docs/adr/011-sealed-bodies.md); and
	// plain messages on the session's subject that are not events (no
	// SL-Seq header, a body that does not decode: an operator's raw
	// publish). Not in Events, LastSeq or SHA256.
	Unhashed uint64 `json:"unhashed,omitempty"`
	// UnhashedBytes: the stored bodies of the Unhashed messages (a sealed
	// body as stored, unopened), given back to the tenant's usage with
	// Bytes, so that the give-back covers every message the job deleted.
	UnhashedBytes uint64 `json:"unhashedBytes,omitempty"`
	// Sealed: the event that was the session's tail when the digest
	// covered it all is deleted (with the first), so an append that
	// expects it as the tail fails the stream's per-subject check.
	Sealed bool `json:"sealed,omitempty"`
	// Children: with a cascade, the fork descendants erased with it (each
	// has its own record and job).
	// Bytes: the erased events' bodies, given back to the tenant's usage
	// (TENANT_USAGE) with the session once its events are gone.
	Bytes    uint64   `json:"bytes,omitempty"`
	Cascade  bool     `json:"cascade,omitempty"`
	Children []string `json:"children,omitempty"`
	// Owner and Grants: the session's owner and the agents it was
	// granted to (ids, no content), for its audit record: folded from its
	// events when the erase was accepted, then from each event the job
	// adds to the digest after those (OwnerFold), so that they cover the
	// events the digest covers.
	Owner  *schema.Owner `json:"owner,omitempty"`
	Grants []string      `json:"grants,omitempty"`
	// OwnerFold: where the fold of Owner and Grants stands; nil in a
	// record written before the job folded (its Owner and Grants are
	// those folded when the erase was accepted).
	OwnerFold *OwnerFold `json:"ownerFold,omitempty"`
}

// OwnerFold is where the fold of an Erasure's Owner and Grants ended: the
// last event folded, as a Judge leaves it (Judge.Last; zero: none, the
// next is judged as the session's first), or Stopped at a message that is
// unreadable or does not fold, after which nothing counts (as for every
// reader). Ids and a chain hash, no content.
type OwnerFold struct {
	Seq       uint64 `json:"seq,omitempty"`
	StreamSeq uint64 `json:"streamSeq,omitempty"`
	EventID   string `json:"eventId,omitempty"`
	Hash      string `json:"hash,omitempty"`
	Stopped   bool   `json:"stopped,omitempty"`
}

// Tail is the last event folded, for the Judge of the next.
func (f OwnerFold) Tail() Tail {
	return Tail{Seq: f.Seq, StreamSeq: f.StreamSeq, EventID: f.EventID, Hash: f.Hash}
}

// FoldedTo returns the fold ended at the event t (Stopped false).
func FoldedTo(t Tail) OwnerFold {
	return OwnerFold{Seq: t.Seq, StreamSeq: t.StreamSeq, EventID: t.EventID, Hash: t.Hash}
}

// The phases of an erase job, in order.
const (
	ErasePhaseDeleting = "deleting" // hashing and deleting the events
	ErasePhaseRecords  = "records"  // dropping lease, claim, fork and source records
	ErasePhaseAudit    = "audit"    // writing the audit record
	ErasePhaseDone     = "done"
)

// Audit is the record the audit stream keeps.
func (e Erasure) Audit() api.AuditRecord {
	return api.AuditRecord{SessionID: e.SessionID, LastSeq: e.LastSeq, Events: e.Events, ErasedAt: e.ErasedAt,
		By: e.By, Reason: e.Reason, SHA256: e.SHA256, Unhashed: e.Unhashed, Owner: e.Owner, Grants: e.Grants}
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
	kv, err := s.erased.open(ctx, s.js, ErasedBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		// Not provisioned yet (services older than erasure): nothing was
		// ever erased. Looked up again next time.
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("logstore: bucket %s: %w", ErasedBucket, err)
	}
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
	return s.WatchErasureRecords(ctx, ready, func(e Erasure) { fn(e.SessionID) })
}

// FollowErasureRecords is WatchErasureRecords until ctx ends, watching
// again a second after a watch ends with an error (a bucket not made
// yet, a server restarting). ready is closed once the first watch has
// delivered the stored records (never, if that watch fails).
func (s *Store) FollowErasureRecords(ctx context.Context, ready chan<- struct{}, fn func(Erasure)) {
	for ctx.Err() == nil {
		err := s.WatchErasureRecords(ctx, ready, fn)
		ready = nil
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			s.log.Debug("logstore: no erasure records yet (watching again)", "err", err)
		} else {
			s.log.Warn("logstore: erasure watch (watching again)", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// WatchErasureRecords is WatchErasures with each record as stored (an
// eraser follows the unfinished jobs with it). A record it cannot decode
// is given with its id only. A record updated before the watch delivered
// its revision before is given once, at its last revision (the bucket
// keeps one revision a key): a follower learns each record's last state,
// not every state it passed through.
func (s *Store) WatchErasureRecords(ctx context.Context, ready chan<- struct{}, fn func(Erasure)) error {
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
			var e Erasure
			if json.Unmarshal(ent.Value(), &e) != nil || e.SessionID != ent.Key() {
				e = Erasure{SessionID: ent.Key()}
			}
			// An erased session's key leaves this store's memory.
			s.ForgetKey(e.SessionID)
			fn(e)
		}
	}
}

// StoredPage returns the session's oldest stored messages, at most n
// (none once nothing is left), with one batched direct get. A replica
// may be behind the leader: it may miss the newest (a later page or
// the leader's check finds them) or give one the leader deleted already
// (deleting it again is a no-op). A sealed body whose key is gone, or
// that does not open, is given without its body (Msg.Unopened): an
// erase deletes it all the same.
func (s *Store) StoredPage(ctx context.Context, sessionID string, n int) ([]*Msg, error) {
	loc, err := s.Locate(sessionID)
	if err != nil {
		return nil, err
	}
	got, _, err := s.directBatch(ctx, loc.Stream, directGetRequest{Seq: 1, NextFor: loc.Subject, Batch: n})
	if err != nil {
		return nil, fmt.Errorf("logstore: read %s: %w", sessionID, err)
	}
	msgs := make([]*Msg, 0, len(got))
	for _, m := range got {
		seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
		if err != nil || m.Header.Get(jetstream.SubjectHeader) != loc.Subject {
			return nil, fmt.Errorf("logstore: read %s: a direct get answered another message", sessionID)
		}
		m := &Msg{StreamSeq: seq, Subject: loc.Subject, Header: m.Header, Data: m.Data}
		if err := unopened(m, s.open(ctx, m)); err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		// The batch found nothing: ask the leader (a replica may not
		// have the newest yet).
		m, err := s.NextAfter(ctx, sessionID, 0)
		if err = unopened(m, err); err != nil || m == nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// unopened takes err, m's opening's, as StoredPage does: a sealed body
// whose key is gone (ErrKeyGone) or that does not open (unreadable) is
// no error, m is given without its body, the reason in Unopened (an
// erase deletes it all the same: one in its digest needs no body, one
// past it cannot be hashed, docs/adr/011-sealed-bodies.md). Any other
// error is returned.
func unopened(m *Msg, err error) error {
	if err == nil || m == nil || !errors.Is(err, ErrKeyGone) && schema.CodeOf(err) != schema.CodeUnreadable {
		return err
	}
	m.Data, m.Unopened = nil, err
	return nil
}

// EraseInFlight is how many secure deletes an erase keeps in flight. The
// server runs them one after another (each rewrites its whole block file,
// docs/adr/009-erase-jobs.md): more in flight gained nothing measurable
// and queued the stream's other API requests behind them (a stream info
// timed out after 5 s with 4 in flight).
const EraseInFlight = 1

// SecureDelete deletes the given messages of the session's stream with
// the server's secure delete (their bytes are overwritten in the block
// files), the first alone and the rest with up to inFlight requests at
// once: with seqs oldest first, a reader between two deletes sees a
// session that does not start at seq 1, never a shorter whole one. A
// message already gone counts as deleted. onDelete, if set, is called
// after each delete and ends the erase with its error (tests interrupt
// it there).
func (s *Store) SecureDelete(ctx context.Context, sessionID string, seqs []uint64, inFlight int, onDelete func() error) error {
	if len(seqs) == 0 {
		return nil
	}
	loc, err := s.Locate(sessionID)
	if err != nil {
		return err
	}
	if inFlight < 1 {
		inFlight = 1
	}
	del := func(seq uint64) error {
		if err := s.secureDeleteMsg(ctx, loc.Stream, seq); err != nil {
			return fmt.Errorf("logstore: erase %s at stream seq %d: %w", sessionID, seq, err)
		}
		if onDelete != nil {
			return onDelete()
		}
		return nil
	}
	if err := del(seqs[0]); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	sem := make(chan struct{}, inFlight)
	for _, seq := range seqs[1:] {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := del(seq); err != nil {
				mu.Lock()
				if first == nil {
					first = err
					cancel()
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		first = ctx.Err()
	}
	if first != nil {
		return first
	}
	s.ForgetTail(sessionID)
	return nil
}

// Shred erases the session's stored messages up to stream seq through
// (all of them in the erase's digest) the fast way when they hold sealed
// bodies (seal.go, docs/adr/011-sealed-bodies.md): the unsealed ones go
// one secure delete at a time (SecureDelete, oldest first), then the
// session's data key is securely deleted (its one message overwritten in
// the bucket's block file: what stays of the sealed bodies is ciphertext
// whose key is gone), then the subject is purged below through+1 (one
// request, however many messages). A user refused the purge (a NATS
// permission the eraser has since sealing) securely deletes the sealed
// messages one at a time instead, saying so once a store. It returns how
// many messages it removed; 0 when the session holds no sealed message,
// or one after through (not in the digest yet): the caller then deletes
// them one at a time, as before. A message stored past through after the
// look at the leader stays for the caller too (StoredPage gives it
// without its body if its key is gone). Each step is idempotent: a job
// cut anywhere repeats it. onDelete is as for SecureDelete.
func (s *Store) Shred(ctx context.Context, sessionID string, through uint64, onDelete func() error) (int, error) {
	loc, err := s.Locate(sessionID)
	if err != nil {
		return 0, err
	}
	var plain, sealed []uint64
	after := uint64(0)
	for {
		got, _, err := s.directBatch(ctx, loc.Stream, directGetRequest{Seq: after + 1, NextFor: loc.Subject, Batch: shredPage})
		if err != nil {
			return 0, fmt.Errorf("logstore: shred %s: %w", sessionID, err)
		}
		behind := s.cfg.FaultHook != nil && s.cfg.FaultHook(FaultShredWalk) != nil
		for _, m := range got {
			seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
			if err != nil || m.Header.Get(jetstream.SubjectHeader) != loc.Subject || seq <= after {
				return 0, fmt.Errorf("logstore: shred %s: a direct get answered another message", sessionID)
			}
			if seq > through {
				if behind {
					got = nil // a replica that has none past the digest
					break
				}
				return 0, nil
			}
			after = seq
			if Sealed(m.Header) {
				sealed = append(sealed, seq)
			} else {
				plain = append(plain, seq)
			}
		}
		if len(got) == 0 {
			// (A short page is no end: the server may cut a batch by size.)
			break
		}
	}
	if len(sealed) == 0 {
		return 0, nil
	}
	// The replica that answered applies in order: if it missed any, they
	// are its newest. The leader says whether one follows: one in the
	// digest means the replica is behind (the job asks again later); one
	// past it is not in the digest, and the session goes the old way, as
	// when the walk meets one (the key stays until every message is
	// hashed: a body whose key is gone cannot be).
	if m, _, err := s.msgGetStored(ctx, loc.Stream, msgGetRequest{Seq: after + 1, NextFor: loc.Subject}); err != nil {
		return 0, fmt.Errorf("logstore: shred %s: %w", sessionID, err)
	} else if m != nil && m.Sequence <= through {
		return 0, fmt.Errorf("logstore: shred %s: the replica read is behind the leader (stream seq %d); the job goes on later", sessionID, m.Sequence)
	} else if m != nil {
		return 0, nil
	}
	if err := s.SecureDelete(ctx, sessionID, plain, EraseInFlight, onDelete); err != nil {
		return 0, err
	}
	if s.cfg.FaultHook != nil {
		_ = s.cfg.FaultHook(FaultShredKey)
	}
	s.ForgetKey(sessionID)
	if err := s.dropKey(ctx, KeysBucket, sessionID); err != nil {
		return 0, err
	}
	if onDelete != nil {
		// The key's delete is a delete too: a job cut here resumes with
		// the key gone and the sealed bodies still stored.
		if err := onDelete(); err != nil {
			return 0, err
		}
	}
	err = s.purgeSubject(ctx, loc.Stream, loc.Subject, through+1)
	switch {
	case err == nil:
		s.shreds.purged.Add(1)
	case errors.Is(err, ErrPurgeRefused):
		s.shreds.refused.Add(1)
		// A deployment that seals with an auth.conf older than sealing:
		// the sealed bodies go the old way, one secure delete at a time
		// (slow, but the job finishes). Said once a store.
		if s.purgeRefused.CompareAndSwap(false, true) {
			s.log.Warn("logstore: this NATS user may not purge the log's streams, so each erased session's sealed events are securely deleted one at a time instead (about a hundred a second): deploy the auth.conf of docs/adr/011-sealed-bodies.md, which lets the eraser purge $JS.API.STREAM.PURGE.<log stream>; the erase of every sealed session falls back until then", "stream", loc.Stream, "session", sessionID, "err", err)
		} else {
			s.log.Info("logstore: purge refused, the sealed events are securely deleted one at a time", "stream", loc.Stream, "session", sessionID)
		}
		err = s.SecureDelete(ctx, sessionID, sealed, EraseInFlight, func() error {
			s.shreds.fallBackDeletes.Add(1)
			if onDelete != nil {
				return onDelete()
			}
			return nil
		})
		if err != nil {
			s.shreds.fallBacksCut.Add(1)
		} else {
			s.shreds.fallBacksDone.Add(1)
		}
	default:
		s.shreds.purgeErrors.Add(1)
	}
	if err != nil {
		return 0, fmt.Errorf("logstore: shred %s: purge: %w", sessionID, err)
	}
	s.ForgetTail(sessionID)
	return len(sealed) + len(plain), nil
}

// FaultShredWalk runs on each batch of Shred's walk: a non-nil error from
// the hook ends the walk at the batch's last message in the digest, as a
// replica behind the leader that holds none after it answers.
const FaultShredWalk FaultStage = "shred-walk"

// FaultShredKey runs in Shred after its look at the leader, before the
// key's delete (the hook's error is ignored): a test stores a message
// around the writer there, past the digest, sealed with the key about to
// go.
const FaultShredKey FaultStage = "shred-key"

// ErrPurgeRefused: the server refused this connection's user the purge of
// a log stream (a NATS permission: deploy/nats/perms.go gives it to the
// eraser since sealed bodies, docs/adr/011-sealed-bodies.md).
var ErrPurgeRefused = errors.New("logstore: the NATS user may not purge the log's stream")

// ShredCounts is what the Shreds of a store did since it was opened
// (the eraser's metrics, DESIGN.md section 14).
type ShredCounts struct {
	// Purges of a session's subject: done, refused (ErrPurgeRefused) and
	// failed otherwise (the job goes on later).
	Purged, PurgesRefused, PurgeErrors uint64
	// Fall backs after a refused purge, the sealed events securely
	// deleted one at a time: finished, or cut (an error or the job's
	// end: the job resumed does it again).
	FallBacksDone, FallBacksCut uint64
	// FallBackDeletes: secure deletes the fall backs made (a message
	// already gone, on a resumed job, counts too).
	FallBackDeletes uint64
}

type shredCounters struct {
	purged, refused, purgeErrors, fallBacksDone, fallBacksCut, fallBackDeletes atomic.Uint64
}

// ShredCounts returns what the store's Shreds did so far.
func (s *Store) ShredCounts() ShredCounts {
	c := &s.shreds
	return ShredCounts{Purged: c.purged.Load(), PurgesRefused: c.refused.Load(), PurgeErrors: c.purgeErrors.Load(),
		FallBacksDone: c.fallBacksDone.Load(), FallBacksCut: c.fallBacksCut.Load(), FallBackDeletes: c.fallBackDeletes.Load()}
}

// purgeSubject removes the subject's messages below stream seq below
// ($JS.API.STREAM.PURGE with filter and seq): they stay in the block
// files, not overwritten. A user refused the purge gets no answer, only
// the server's permission violation, on the connection (its last
// error): it is ErrPurgeRefused, known after one round trip (the server
// sends the violation before the flush's answer), not after the
// request's timeout. The store's purges take turns from the publish to
// the flush's answer, so that the last error then is this request's
// refusal, not another's: two purges refused at once, of two streams,
// each saw the other's (its subject not the one asked) and waited out
// the request's timeout. A violation of another publish on the
// connection that comes between the refusal and the flush's answer
// still hides it (the purge then times out and the job goes on later).
func (s *Store) purgeSubject(ctx context.Context, stream, subject string, below uint64) error {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	api := "$JS.API.STREAM.PURGE." + stream
	b, _ := json.Marshal(struct {
		Filter string `json:"filter"`
		Seq    uint64 `json:"seq"`
	}{subject, below})
	sub, err := s.nc.SubscribeSync(s.nc.NewInbox())
	if err != nil {
		return err
	}
	defer func() { _ = sub.Unsubscribe() }()
	refused, err := s.publishPurge(ctx, api, sub.Subject, b)
	if err != nil {
		return err
	}
	if refused != nil {
		return fmt.Errorf("%w %s: %w", ErrPurgeRefused, stream, refused)
	}
	m, err := sub.NextMsgWithContext(ctx)
	if err != nil {
		return err
	}
	return successAnswer(m.Data, "purge")
}

// publishPurge publishes the purge request and flushes, one purge of the
// store at a time: refused is the server's violation of this publish,
// nil if there was none.
func (s *Store) publishPurge(ctx context.Context, api, reply string, b []byte) (refused, err error) {
	s.purgeMu.Lock()
	defer s.purgeMu.Unlock()
	before := s.nc.LastError()
	if err := s.nc.PublishRequest(api, reply, b); err != nil {
		return nil, err
	}
	if err := s.nc.FlushWithContext(ctx); err != nil {
		return nil, err
	}
	// A refusal is a new error value (nats.go makes one for each); the
	// test of what it is comes first, so that the comparison with the
	// one before is of a pointer (an error of a type that does not
	// compare would panic there).
	if last := s.nc.LastError(); errors.Is(last, nats.ErrPermissionViolation) &&
		strings.Contains(last.Error(), fmt.Sprintf("Publish to %q", api)) && last != before {
		return last, nil
	}
	return nil, nil
}

// successAnswer decodes a JetStream API answer that says success: its
// error (a *jetstream.APIError), or one when it says neither.
func successAnswer(data []byte, what string) error {
	var r struct {
		Success bool                `json:"success"`
		Error   *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return err
	}
	if r.Error != nil {
		return r.Error
	}
	if !r.Success {
		return fmt.Errorf("the server did not confirm the %s", what)
	}
	return nil
}

// shredPage is how many messages one direct get of Shred's walk asks for.
const shredPage = 1024

// The server's error codes of a message delete (server/errors.json).
const (
	errCodeSequenceNotFound jetstream.ErrorCode = 10043
	errCodeMsgDeleteFailed  jetstream.ErrorCode = 10057
)

// secureDeleteMsg sends $JS.API.STREAM.MSG.DELETE without no_erase; a
// message already deleted is no error.
func (s *Store) secureDeleteMsg(ctx context.Context, stream string, seq uint64) error {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	b, _ := json.Marshal(struct {
		Seq uint64 `json:"seq"`
	}{seq})
	m, err := s.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.DELETE."+stream, b)
	if err != nil {
		return err
	}
	err = successAnswer(m.Data, "delete")
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		if apiErr.ErrorCode == errCodeSequenceNotFound {
			return nil // deleted already
		}
		if apiErr.ErrorCode == errCodeMsgDeleteFailed {
			// The store's "no message found" comes as a failed delete:
			// gone if the leader has no message there.
			if m, gerr := s.msgGet(ctx, stream, msgGetRequest{Seq: seq}); gerr == nil && m == nil {
				return nil
			}
		}
	}
	return err
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

// DropSessionRecords removes the session's lease, claim and fork record,
// its snapshot (head and parts) and its source index records (owner and listing: the project key and
// the agent's session key) with the server's secure delete of every
// message the key still has, so their bytes (holder names, project
// paths) are overwritten in the files: a KV purge would leave them in
// place until the server compacts the block.
func (s *Store) DropSessionRecords(ctx context.Context, sessionID string) error {
	// The data key too: a shred (Shred) destroyed it already, but an
	// event sealed around the writer after it made a new one.
	s.ForgetKey(sessionID)
	for _, bucket := range []string{LeaseBucket, ClaimBucket, api.ForkBucket, KeysBucket} {
		if err := s.dropKey(ctx, bucket, sessionID); err != nil {
			return err
		}
	}
	if err := s.DropSnapshot(ctx, sessionID); err != nil {
		return err
	}
	return s.dropSourceRecords(ctx, sessionID)
}

// dropSourceRecords drops the session's owner record and the listing
// record it names.
func (s *Store) dropSourceRecords(ctx context.Context, sessionID string) error {
	owner := SourceOwnerKey(sessionID)
	m, err := s.msgGet(ctx, "KV_"+SourceBucket, msgGetRequest{LastFor: "$KV." + SourceBucket + "." + owner})
	if isStreamNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("logstore: %s %s: %w", SourceBucket, owner, err)
	}
	if m != nil && m.Header.Get(headerKVOperation) == "" {
		var rec struct {
			api.SourceKey
			SessionID string `json:"sessionId"`
		}
		if json.Unmarshal(m.Data, &rec) == nil && rec.SessionID == sessionID && rec.ProjectKey != "" {
			if err := s.dropKey(ctx, SourceBucket, SourceListKey(rec.SourceKey)); err != nil {
				return err
			}
		}
	}
	// The owner record last: a repeat finds the listing record from it.
	return s.dropKey(ctx, SourceBucket, owner)
}

// dropKey securely deletes every stored message of the key in the bucket
// (its revisions, and markers). No marker is left: a purge marker made
// the repairer's listing of claims wait out its fetch on every sweep.
func (s *Store) dropKey(ctx context.Context, bucket, key string) error {
	stream, subject := "KV_"+bucket, "$KV."+bucket+"."+key
	var after uint64
	for {
		m, err := s.msgGet(ctx, stream, msgGetRequest{Seq: after + 1, NextFor: subject})
		if isStreamNotFound(err) {
			return nil // a bucket not made yet holds nothing
		}
		if err != nil {
			return fmt.Errorf("logstore: drop %s in %s: %w", key, bucket, err)
		}
		if m == nil {
			break
		}
		after = m.StreamSeq
		if err := s.secureDeleteMsg(ctx, stream, m.StreamSeq); err != nil {
			if st, serr := s.js.Stream(ctx, stream); serr == nil && st.CachedInfo().Config.DenyDelete {
				// A bucket made before erasure could delete (provisionBucket):
				// the purge drops the key, its bytes stay until compacted.
				return s.purgeKey(ctx, bucket, key)
			}
			return fmt.Errorf("logstore: drop %s in %s: %w", key, bucket, err)
		}
	}
	return nil
}

func (s *Store) purgeKey(ctx context.Context, bucket, key string) error {
	kv, err := s.js.KeyValue(ctx, bucket)
	if err == nil {
		err = kv.Purge(ctx, key)
	}
	if err != nil {
		return fmt.Errorf("logstore: purge %s in %s: %w", key, bucket, err)
	}
	return nil
}

func isStreamNotFound(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamNotFound
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
