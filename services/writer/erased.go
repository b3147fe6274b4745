package writer

import (
	"context"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// refuseErased answers erased for a session id that was erased or is
// being erased (DESIGN.md section 14), not_committed when that cannot be
// known.
func refuseErased(ctx context.Context, st *logstore.Store, sessionID string) error {
	erased, err := st.Erased(ctx, sessionID)
	if err != nil {
		return schema.Errorf(schema.CodeNotCommitted, "cannot check the session id: %v", err)
	}
	if erased {
		return errErased(sessionID)
	}
	return nil
}

// errErased is the answer to a request naming an erased session id.
func errErased(sessionID string) error {
	return schema.Errorf(schema.CodeErased, "session %s was erased; use another id", sessionID)
}

// followErasing keeps s.erasing: the ids whose erasure record exists and
// is not done, from the SESSION_ERASED watch, until ctx ends. An
// append to one of them is refused at once (erasingNow), its cached
// state included. The line stays the seal (the job deleting the tail a
// cached append expects, ADR 009); this stops a writer from racing the
// job's digest, which follows the appends that land before the seal:
// under agents that kept appending from the cache, an erase on a 3-node
// cluster chased them and never sealed (TestEraseSealsOnEveryLayout).
func (s *Service) followErasing(ctx context.Context) {
	s.st.FollowErasureRecords(ctx, nil, func(e logstore.Erasure) {
		if e.Done {
			s.erasing.Delete(e.SessionID)
			return
		}
		if _, known := s.erasing.LoadOrStore(e.SessionID, struct{}{}); !known {
			s.cache.Remove(e.SessionID)
		}
	})
}

// erasingNow answers erased for a session whose erase this writer saw
// start and not end.
func (s *Service) erasingNow(sessionID string) error {
	if _, ok := s.erasing.Load(sessionID); ok {
		return errErased(sessionID)
	}
	return nil
}
