package writer

import (
	"context"

	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// authorize refuses an agent a session it neither owns nor was granted
// (ADR 010): forbidden, or not_found for a session of another tenant. The
// owner is read from the session's cached state (folded from the log on a
// miss); a session that does not exist yet is anyone's to create, and the
// request's own handling answers not_found where it must.
func (s *Service) authorize(ctx context.Context, caller api.Caller, sessionID string) error {
	mu := s.lock(sessionID)
	mu.Lock()
	defer mu.Unlock()
	ent, fresh, err := s.entryFor(ctx, sessionID, false)
	if err == nil && !fresh && !ent.state.Exists() {
		// Another writer may have created it since this one cached it
		// empty: an owner is only ever learned from the leader.
		ent, _, err = s.entryFor(ctx, sessionID, true)
	}
	if err != nil {
		// A session that does not fold cannot say whose it is: an agent
		// gets the fold's answer (unreadable, erased, not_committed),
		// never its events.
		if rerr := refuseErased(ctx, s.st, sessionID); schema.CodeOf(rerr) == schema.CodeErased {
			return rerr
		}
		return err
	}
	if !ent.state.Exists() {
		return nil
	}
	return api.Authorize(caller, sessionID, &ent.state.Meta)
}
