package memlog

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/api"
)

// What the eraser needs of the log (eraser.Log): the erasure records and
// their revisions, deletes of stored messages, the session's records
// dropped, the audit records (one a session), the catalog of sessions,
// tenants' usage.

// CheckErasable: memlog's streams allow deletes.
func (l *Log) CheckErasable(_ context.Context, sessionID string) error {
	_, err := l.Locate(sessionID)
	return err
}

// ErasureOf returns the session's erasure record and its revision; nil
// when it has none.
func (l *Log) ErasureOf(_ context.Context, sessionID string) (*logstore.Erasure, uint64, error) {
	if err := logstore.ValidateSessionID(sessionID); err != nil {
		return nil, 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.erasures[sessionID]
	if !ok {
		return nil, 0, nil
	}
	v := e.e
	v.Children = slices.Clone(e.e.Children)
	return &v, e.rev, nil
}

// UpdateErasure replaces the record at revision rev (another revision:
// an error, as the bucket's update refuses it).
func (l *Log) UpdateErasure(_ context.Context, e logstore.Erasure, rev uint64) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur, ok := l.erasures[e.SessionID]; !ok || cur.rev != rev {
		return 0, fmt.Errorf("memlog: erasure record of %s is not at revision %d", e.SessionID, rev)
	}
	l.erasureRev++
	e.Children = slices.Clone(e.Children)
	l.erasures[e.SessionID] = erasureEntry{e: e, rev: l.erasureRev}
	l.wrote(e)
	return l.erasureRev, nil
}

// FollowErasureRecords calls fn with every erasure record, the stored
// ones (in the order of their last writes) and then each one written,
// until ctx ends; ready is closed once the stored ones are delivered.
func (l *Log) FollowErasureRecords(ctx context.Context, ready chan<- struct{}, fn func(logstore.Erasure)) {
	l.mu.Lock()
	stored := make([]erasureEntry, 0, len(l.erasures))
	for _, e := range l.erasures {
		stored = append(stored, e)
	}
	ch := make(chan logstore.Erasure, 64)
	l.followers = append(l.followers, ch)
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.followers = slices.DeleteFunc(l.followers, func(c chan logstore.Erasure) bool { return c == ch })
		l.mu.Unlock()
	}()
	slices.SortFunc(stored, func(a, b erasureEntry) int { return cmp.Compare(a.rev, b.rev) })
	for _, e := range stored {
		fn(e.e)
	}
	if ready != nil {
		close(ready)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-ch:
			fn(e)
		}
	}
}

// WatchErasures calls fn with the id of every erasure record, the stored
// ones first, until ctx ends (nil then); ready is closed once the stored
// ones are delivered.
func (l *Log) WatchErasures(ctx context.Context, ready chan<- struct{}, fn func(id string)) error {
	l.FollowErasureRecords(ctx, ready, func(e logstore.Erasure) { fn(e.SessionID) })
	return nil
}

// wrote gives the record just written to the followers. The caller holds
// mu.
func (l *Log) wrote(e logstore.Erasure) {
	for _, ch := range l.followers {
		ch <- e
	}
}

// StoredPage returns the session's oldest stored messages, at most n.
func (l *Log) StoredPage(_ context.Context, sessionID string, n int) ([]*logstore.Msg, error) {
	loc, err := l.Locate(sessionID)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	msgs := l.subjectMsgs(loc, 0)
	return msgs[:min(n, len(msgs))], nil
}

// Shred removes nothing: memlog stores no sealed body
// (logstore.Store.Shred then returns 0 too), so the job deletes the
// messages one at a time.
func (l *Log) Shred(context.Context, string, uint64, func() error) (int, error) { return 0, nil }

// SecureDelete deletes the given messages of the session, oldest first,
// calling onDelete after each (its error ends the deletes); a message
// already gone counts as deleted. Their ids stay known to the stream's
// duplicate check, as JetStream's do.
func (l *Log) SecureDelete(_ context.Context, sessionID string, seqs []uint64, _ int, onDelete func() error) error {
	loc, err := l.Locate(sessionID)
	if err != nil {
		return err
	}
	for _, seq := range seqs {
		l.mu.Lock()
		s := l.stream(loc.Stream)
		if i := seq - 1; seq > 0 && i < uint64(len(s.msgs)) && s.msgs[i] != nil {
			if s.msgs[i].Subject != loc.Subject {
				l.mu.Unlock()
				return fmt.Errorf("memlog: erase %s at stream seq %d: another session's message", sessionID, seq)
			}
			s.msgs[i] = nil
		}
		l.mu.Unlock()
		if onDelete != nil {
			if err := onDelete(); err != nil {
				return err
			}
		}
	}
	return nil
}

// DropSessionRecords removes the session's lease, claim, fork record and
// snapshot (memlog keeps no source index).
func (l *Log) DropSessionRecords(_ context.Context, sessionID string) error {
	l.mu.Lock()
	delete(l.leases, sessionID)
	delete(l.claims, sessionID)
	delete(l.snapshots, sessionID)
	l.mu.Unlock()
	return l.forks.Drop(context.Background(), sessionID)
}

// WriteAudit stores the erasure's audit record unless the session has
// one.
func (l *Log) WriteAudit(_ context.Context, rec api.AuditRecord) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.audits {
		if r.SessionID == rec.SessionID {
			return nil
		}
	}
	l.audits = append(l.audits, rec)
	return nil
}

// AuditRecords returns the audit records after position after (the
// number of records before them), at most limit, oldest first.
func (l *Log) AuditRecords(_ context.Context, after uint64, limit int) ([]api.AuditRecord, uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	from := min(after, uint64(len(l.audits)))
	to := min(from+uint64(limit), uint64(len(l.audits)))
	return slices.Clone(l.audits[from:to]), to, nil
}

// ListSessions lists every session with its number of stored messages,
// sorted by id.
func (l *Log) ListSessions(context.Context) ([]logstore.SessionCount, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []logstore.SessionCount
	for _, name := range l.Streams() {
		n := map[string]uint64{}
		for _, m := range l.stream(name).msgs {
			if m != nil {
				n[m.Subject]++
			}
		}
		for subj, c := range n {
			if id, ok := logstore.SessionFromSubject(subj); ok {
				out = append(out, logstore.SessionCount{Stream: name, ID: id, Messages: c})
			}
		}
	}
	slices.SortFunc(out, func(a, b logstore.SessionCount) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// EachLastStored calls fn with the last stored message of every session,
// stream by stream, in the order of those messages (as a consumer of the
// last message per subject delivers them).
func (l *Log) EachLastStored(ctx context.Context, fn func(sessionID string, last *logstore.Msg) error) error {
	for _, name := range l.Streams() {
		l.mu.Lock()
		last := map[string]*logstore.Msg{}
		for _, m := range l.stream(name).msgs {
			if m != nil {
				last[m.Subject] = m
			}
		}
		l.mu.Unlock()
		msgs := make([]*logstore.Msg, 0, len(last))
		for _, m := range last {
			msgs = append(msgs, m)
		}
		slices.SortFunc(msgs, func(a, b *logstore.Msg) int { return cmp.Compare(a.StreamSeq, b.StreamSeq) })
		for _, m := range msgs {
			if id, ok := logstore.SessionFromSubject(m.Subject); ok {
				if err := fn(id, m); err != nil {
					return fmt.Errorf("stream %s: %w", name, err)
				}
			}
		}
	}
	return nil
}

// LastStoredOf returns the session's last stored message, whatever it is,
// and when it was stored (memlog: when it was read); an error when the
// session has none.
func (l *Log) LastStoredOf(_ context.Context, sessionID string) (*logstore.LastStored, error) {
	loc, err := l.Locate(sessionID)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.last(loc)
	if m == nil {
		return nil, fmt.Errorf("memlog: %s has no stored message", sessionID)
	}
	return &logstore.LastStored{Msg: *m, Stored: time.Now()}, nil
}

// AddUsage adds d to the tenant's usage if check (when set) accepts the
// usage it would make; it returns that usage.
func (l *Log) AddUsage(_ context.Context, tenant string, d logstore.TenantUsage, check func(logstore.TenantUsage) error) (logstore.TenantUsage, uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	u := l.usage[tenant]
	next := logstore.TenantUsage{Sessions: u.Sessions + d.Sessions, Bytes: u.Bytes + d.Bytes}
	if check != nil {
		if err := check(next); err != nil {
			return u, 0, err
		}
	}
	l.usage[tenant] = next
	l.usageRev++
	return next, l.usageRev, nil
}

// GiveBackErased adds d to the usage of the erased session's tenant
// unless id was given back and not forgotten since, as logstore does.
func (l *Log) GiveBackErased(_ context.Context, id string, d logstore.TenantUsage) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.givenBack[id] {
		return false, nil
	}
	t := logstore.UsageTenant(id)
	l.usage[t] = l.usage[t].Add(d)
	l.usageRev++
	l.givenBack[id] = true
	return true, nil
}

// ForgetGiveBack forgets that id was given back.
func (l *Log) ForgetGiveBack(_ context.Context, id string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.givenBack, id)
	return nil
}

// EraseForkRecord removes the child's fork record (logstore deletes its
// every revision securely).
func (l *Log) EraseForkRecord(ctx context.Context, child string) error {
	return l.forks.Drop(ctx, child)
}

// ForksInFlight calls fn with every fork record that reads as one (it
// names its child and its parent), in the order of their last writes.
func (l *Log) ForksInFlight(ctx context.Context, fn func(logstore.ForkInFlight)) error {
	children, _ := l.forks.Children(ctx)
	for _, c := range children {
		if f, ok, _ := l.ForkInFlightOf(ctx, c); ok {
			fn(f)
		}
	}
	return nil
}

// ForkInFlightOf returns the child's fork record; ok is false when it has
// none that reads as one.
func (l *Log) ForkInFlightOf(ctx context.Context, child string) (logstore.ForkInFlight, bool, error) {
	rec, ok, _ := l.forks.Get(ctx, child)
	var f logstore.ForkInFlight
	if !ok || json.Unmarshal(rec.Value, &f) != nil || f.ParentID == "" || f.ChildID != child {
		return logstore.ForkInFlight{}, false, nil
	}
	return f, true, nil
}
