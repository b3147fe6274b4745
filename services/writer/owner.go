package writer

import (
	"context"
	"errors"

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

// checkOwners refuses a session/created whose owner is not of the tenant
// the stored id names (api.CheckOwner): an operator creating a session of
// a tenant other than the default names its owner, since without one the
// session would be the default tenant's and none of the tenant's agents
// could use it. Nothing is stored. An agent's events pass (stampOwner
// made the owner the requester, under its tenant's stored id); they are
// judged all the same, as only session/created events are.
func checkOwners(req *AppendRequest) error {
	for i := range req.Events {
		e := &req.Events[i]
		if e.Type != schema.TypeSessionCreated {
			continue
		}
		var d schema.SessionCreated
		if err := e.DecodeData(&d); err != nil {
			return schema.Errorf(schema.CodeInvalidEvent, "data: %v", err).WithIndex(i)
		}
		if err := api.CheckOwner(req.SessionID, d.Owner); err != nil {
			var se *schema.Error
			if errors.As(err, &se) {
				return se.WithIndex(i)
			}
			return err
		}
	}
	return nil
}
