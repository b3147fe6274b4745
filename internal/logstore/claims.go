package logstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ClaimRevision returns the revision of the session's claim in
// SESSION_CLAIMS, 0 when it has none (never claimed, or dropped).
func (s *Store) ClaimRevision(ctx context.Context, sessionID string) (uint64, error) {
	rev, _, err := s.ClaimEntry(ctx, sessionID)
	return rev, err
}

// ClaimEntry returns the revision of the session's claim and when the
// server stored it (the take of a lease writes it just before the lease);
// 0 and the zero time when it has none.
func (s *Store) ClaimEntry(ctx context.Context, sessionID string) (uint64, time.Time, error) {
	e, err := s.claims.Get(ctx, sessionID)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return 0, time.Time{}, nil
	}
	if err != nil {
		return 0, time.Time{}, err
	}
	return e.Revision(), e.Created(), nil
}

// DropClaim deletes the session's claim if it is still at revision: a
// holder that claimed the session again since keeps its claim.
func (s *Store) DropClaim(ctx context.Context, sessionID string, revision uint64) error {
	return s.claims.Delete(ctx, sessionID, jetstream.LastRevision(revision))
}

// EnsureClaim records the session's claim for holder unless it has one: a
// writer that stored a holder's events but could not take its lease owes
// the session a claim (without one the repairer never looks at it).
func (s *Store) EnsureClaim(ctx context.Context, sessionID, holder string, now time.Time) error {
	c, err := s.claimValue(ctx, sessionID, holder, now)
	if err == nil {
		_, err = s.claims.Create(ctx, sessionID, c)
	}
	if err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("logstore: claim %s: %w", sessionID, err)
	}
	return nil
}
