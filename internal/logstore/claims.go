package logstore

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"
)

// ClaimRevision returns the revision of the session's claim in
// SESSION_CLAIMS, 0 when it has none (never claimed, or dropped).
func (s *Store) ClaimRevision(ctx context.Context, sessionID string) (uint64, error) {
	e, err := s.claims.Get(ctx, sessionID)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return e.Revision(), nil
}

// DropClaim deletes the session's claim if it is still at revision: a
// holder that claimed the session again since keeps its claim.
func (s *Store) DropClaim(ctx context.Context, sessionID string, revision uint64) error {
	return s.claims.Delete(ctx, sessionID, jetstream.LastRevision(revision))
}
