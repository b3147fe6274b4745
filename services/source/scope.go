package source

import (
	"context"
	"strings"

	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// A source request acts for its caller, as the server named it (ADR 010):
// the session a key maps to is the caller's tenant's (api.Caller.StoredID),
// the key is indexed under its tenant's project key, and the writer is
// asked as the caller (client.AsCaller), so that it judges every read and
// append as the agent's own: another agent's session is refused
// forbidden, a session the agent creates records it as the owner, and its
// tenant's limits hold.

// scope is who a source request acts for and the tenant its keys are in.
type scope struct {
	caller api.Caller
	// prefix begins the stored ids and project keys of the tenant ("" for
	// the default tenant's, which keep theirs): TenantIDPrefix<T>_.
	prefix string
}

// scopeOf is the scope of a request of caller naming projectKey. An
// agent's is its tenant; an operator's is the tenant its project key
// names, as an operator names a tenant's session by its stored id
// (_T<T>_<project key>), else the default tenant. An agent of the default
// tenant may not name a project key of that form (bad_request), so that
// it can reach no other tenant's index.
func scopeOf(caller api.Caller, projectKey string) (scope, error) {
	switch {
	case caller.Scoped():
		return scope{caller: caller, prefix: api.TenantIDPrefix + caller.Tenant + "_"}, nil
	case caller.Operator():
		if t, _ := api.WireOf(projectKey); t != "" {
			return scope{caller: caller, prefix: api.TenantIDPrefix + t + "_"}, nil
		}
	case strings.HasPrefix(projectKey, api.TenantIDPrefix):
		return scope{}, schema.Errorf(schema.CodeBadRequest, "project keys beginning with %s are other tenants'", api.TenantIDPrefix)
	}
	return scope{caller: caller}, nil
}

// key is the key as the index holds it: an agent's project key under its
// tenant's prefix (the index of a tenant other than the default is its
// own; an operator names that key itself).
func (sc scope) key(k api.SourceKey) api.SourceKey {
	if sc.caller.Scoped() {
		k.ProjectKey = sc.prefix + k.ProjectKey
	}
	return k
}

// storedID is the stored id of the session id (the id the key maps to).
func (sc scope) storedID(id string) (string, error) {
	if !sc.caller.Operator() {
		return sc.caller.StoredID(id)
	}
	s := sc.prefix + id
	if !schema.ValidSessionID(s) {
		return "", schema.Errorf(schema.CodeBadRequest, "session id %q is too long under %s", id, sc.prefix)
	}
	return s, nil
}

// asked is the id the writer is asked for the session the key maps to
// (id), whose stored id is stored: an agent names its own id and the
// writer scopes it; an operator names the stored id.
func (sc scope) asked(id, stored string) string {
	if sc.caller.Operator() {
		return stored
	}
	return id
}

// mayUse checks that the caller may use the session (id, stored as
// stored) before the index records a key for it: the writer's answer to a
// read of its first event as the caller (forbidden for another agent's
// session); a session that does not exist is anyone's to create.
func (s *Service) mayUse(ctx context.Context, sc scope, id, stored string) error {
	if sc.caller.Operator() {
		return nil
	}
	_, err := s.read(ctx, sc, api.ReadRequest{SessionID: sc.asked(id, stored), Limit: 1})
	if schema.CodeOf(err) == schema.CodeNotFound {
		return nil
	}
	return err
}

// clientOf is the client the writer is asked through for sc's caller:
// one per tenant, since a client remembers what was acknowledged per
// session id, and the ids of two tenants' sessions are alike on the wire.
func (s *Service) clientOf(sc scope) *client.Client {
	if sc.caller.Operator() {
		return s.c
	}
	s.clientsMu.Lock()
	defer s.clientsMu.Unlock()
	c, ok := s.clients[sc.caller.Tenant]
	if !ok {
		c = client.New(s.nc)
		s.clients[sc.caller.Tenant] = c
	}
	return c
}

// ctxOf is ctx for a request to the writer as sc's caller.
func ctxOf(ctx context.Context, sc scope) context.Context { return client.AsCaller(ctx, sc.caller) }

// mayCreate refuses an operator's append into a tenant's project whose
// session does not exist (bad_request, nothing stored or recorded): the
// session would have no owner, and a session without one is the default
// tenant's (ADR 010), so none of the tenant's agents could use it while
// it counts as the tenant's. An operator appends to the sessions the
// tenant's agents created; an agent's append creates its own.
func (s *Service) mayCreate(ctx context.Context, sc scope, id, stored string) error {
	if !sc.caller.Operator() || sc.prefix == "" {
		return nil
	}
	_, err := s.read(ctx, sc, api.ReadRequest{SessionID: id, Limit: 1})
	if schema.CodeOf(err) == schema.CodeNotFound {
		return schema.Errorf(schema.CodeBadRequest, "session %s does not exist: an operator's source append into a tenant's project appends to a session of the tenant's agents, and creates none", stored)
	}
	return err
}
