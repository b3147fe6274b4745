package memlog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// RenewLease takes or renews the session's lease for holder with the
// log's lease TTL, whoever holds it, and records the claim when it takes
// the lease (logstore's TakeLease with takeover).
func (l *Log) RenewLease(_ context.Context, sessionID, holder string, now time.Time) error {
	if !schema.ValidSessionID(sessionID) {
		return schema.Errorf(schema.CodeBadRequest, "invalid session id")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	stored := l.Now()
	if e := l.leases[sessionID]; e.lease == nil {
		l.claimRev++
		l.claims[sessionID] = claimEntry{rev: l.claimRev, at: stored, c: logstore.Claim{Holder: holder, ClaimedAt: now.UTC()}}
	}
	l.leaseRev++
	l.leases[sessionID] = leaseEntry{lease: &logstore.Lease{Holder: holder, RenewedAt: now.UTC()}, rev: l.leaseRev, stored: stored, ttl: l.cfg.LeaseTTL}
	return nil
}

// LeaseRecord is the last entry of the session's lease key.
func (l *Log) LeaseRecord(_ context.Context, sessionID string) (logstore.LeaseRecord, error) {
	if err := logstore.ValidateSessionID(sessionID); err != nil {
		return logstore.LeaseRecord{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.leases[sessionID]
	if !ok {
		return logstore.LeaseRecord{}, nil
	}
	rec := logstore.LeaseRecord{Revision: e.rev, Stored: e.stored}
	if e.lease != nil {
		v := *e.lease
		rec.Lease, rec.TTL = &v, e.ttl
	}
	return rec, nil
}

// EndLease deletes the session's lease if its key's last entry is still
// revision (0: no entry), else returns logstore.ErrLeaseChanged.
func (l *Log) EndLease(_ context.Context, sessionID string, revision uint64) error {
	if err := logstore.ValidateSessionID(sessionID); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.leases[sessionID].rev != revision {
		return logstore.ErrLeaseChanged
	}
	l.leaseRev++
	l.leases[sessionID] = leaseEntry{rev: l.leaseRev, stored: l.Now()}
	return nil
}

// errNoWatch: memlog has no lease watch.
var errNoWatch = errors.New("memlog: no lease watch (a service on memlog is driven by its caller)")

// WatchLeases is refused: see the package's doc.
func (l *Log) WatchLeases(context.Context) (*logstore.LeaseWatch, error) { return nil, errNoWatch }

// ClaimEntry returns the revision of the session's claim and when it was
// stored; 0 and the zero time without one.
func (l *Log) ClaimEntry(_ context.Context, sessionID string) (uint64, time.Time, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.claims[sessionID]
	if !ok {
		return 0, time.Time{}, nil
	}
	return c.rev, c.at, nil
}

// ClaimRevision returns the revision of the session's claim (0: none).
func (l *Log) ClaimRevision(ctx context.Context, sessionID string) (uint64, error) {
	rev, _, err := l.ClaimEntry(ctx, sessionID)
	return rev, err
}

// GetClaim returns the session's claim, or nil.
func (l *Log) GetClaim(_ context.Context, sessionID string) (*logstore.Claim, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.claims[sessionID]
	if !ok {
		return nil, nil
	}
	v := c.c
	return &v, nil
}

// DropClaim deletes the session's claim if it is still at revision.
func (l *Log) DropClaim(_ context.Context, sessionID string, revision uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c, ok := l.claims[sessionID]; !ok || c.rev != revision {
		return fmt.Errorf("memlog: claim %s is not at revision %d", sessionID, revision)
	}
	delete(l.claims, sessionID)
	return nil
}

// ClaimedSessions calls fn with every claimed session's id, in order.
func (l *Log) ClaimedSessions(_ context.Context, fn func(sessionID string)) error {
	l.mu.Lock()
	ids := make([]string, 0, len(l.claims))
	for id := range l.claims {
		ids = append(ids, id)
	}
	l.mu.Unlock()
	slices.Sort(ids)
	for _, id := range ids {
		fn(id)
	}
	return nil
}

// HasKey is false: a log in memory seals nothing, so no session has a
// data key.
func (l *Log) HasKey(context.Context, string) (bool, error) { return false, nil }
