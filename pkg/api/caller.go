package api

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// RequestInfoHeader is the header nats-server adds to a request that
// crossed a service import with share: true: the requester's account and
// user as the server authenticated them (ADR 010). The server replaces any
// header of that name the requester sent.
const RequestInfoHeader = "Nats-Request-Info"

// DefaultTenant is the account of the agents of the default tenant
// (deploy/nats, natsauth.DefaultTenant): sessions made before owners
// existed, or by an operator, belong to it.
const DefaultTenant = "AGENTS"

// Caller is who sent a request, as the NATS server says. The zero Caller
// is a request from inside the services' own account (a service relaying
// the dashboard, an operator's verb, an open `up`): it has the operator's
// rights.
type Caller struct {
	Tenant string // the NATS account
	Agent  string // the NATS user
}

// Operator reports whether c has the operator's rights.
func (c Caller) Operator() bool { return c.Tenant == "" }

func (c Caller) String() string {
	if c.Operator() {
		return "operator"
	}
	return c.Tenant + "/" + c.Agent
}

// CallerOf reads the values of a request's RequestInfoHeader: none is the
// zero Caller (the services' account: no import crossed); one names the
// account and the user. More than one, or one without both names, is
// refused: the server writes exactly one, with both, on a shared import.
func CallerOf(values []string) (Caller, error) {
	switch len(values) {
	case 0:
		return Caller{}, nil
	case 1:
	default:
		return Caller{}, schema.Errorf(schema.CodeForbidden, "the request carries %d %s headers", len(values), RequestInfoHeader)
	}
	var ci struct {
		Acc  string `json:"acc"`
		User string `json:"user"`
	}
	if err := json.Unmarshal([]byte(values[0]), &ci); err != nil || ci.Acc == "" || ci.User == "" {
		return Caller{}, schema.Errorf(schema.CodeForbidden, "the request's %s names no account and user", RequestInfoHeader)
	}
	return Caller{Tenant: ci.Acc, Agent: ci.User}, nil
}

// Owner is the owner a session created by c records.
func (c Caller) Owner() *schema.Owner {
	if c.Operator() {
		return nil
	}
	return &schema.Owner{Tenant: c.Tenant, Agent: c.Agent}
}

// Authorize decides whether c may use (append to, heartbeat, read, watch,
// fork from) an existing session created with meta: an operator always;
// an agent when it owns the session or the session grants it. A session
// of another tenant answers not_found, as a session that does not exist
// would, so that no tenant learns of another's sessions by asking; a
// session without an owner (an operator's, or made before owners) is the
// default tenant's.
func Authorize(c Caller, sessionID string, meta *schema.SessionCreated) error {
	if c.Operator() {
		return nil
	}
	tenant := DefaultTenant
	if meta.Owner != nil {
		tenant = meta.Owner.Tenant
	}
	if tenant != c.Tenant {
		return schema.Errorf(schema.CodeNotFound, "session %s does not exist", sessionID)
	}
	if meta.Owner == nil || meta.Owner.Agent == c.Agent || slices.Contains(meta.Grants, c.Agent) {
		return nil
	}
	return schema.Errorf(schema.CodeForbidden, "session %s is another agent's, and not granted to %s", sessionID, c.Agent)
}

// MayGrant decides whether c may write a session/granted event to a
// session it may use (Authorize): its owner or an operator may; an agent
// it was granted to may not pass it on.
func MayGrant(c Caller, sessionID string, meta *schema.SessionCreated) error {
	if c.Operator() || meta.Owner == nil || meta.Owner.Agent == c.Agent {
		return nil
	}
	return schema.Errorf(schema.CodeForbidden, "only the owner of session %s grants it", sessionID)
}

// StampOwner sets data.owner of a session/created event's data to c's
// identity. An agent may name itself there, never another: an owner given
// that is not c is forbidden. An operator's event is left as it is (an
// operator may create a session for an agent).
func StampOwner(c Caller, data json.RawMessage) (json.RawMessage, error) {
	if c.Operator() {
		return data, nil
	}
	m := map[string]json.RawMessage{}
	if len(data) > 0 && string(data) != "null" {
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, schema.Errorf(schema.CodeInvalidEvent, "data is not an object: %v", err)
		}
	}
	if given, ok := m["owner"]; ok {
		var o schema.Owner
		if err := json.Unmarshal(given, &o); err != nil || o != *c.Owner() {
			return nil, schema.Errorf(schema.CodeForbidden, "data.owner %s is not the requester (%s)", schema.Clip(string(given), 80), c)
		}
		return data, nil
	}
	own, err := json.Marshal(c.Owner())
	if err != nil {
		return nil, err
	}
	m["owner"] = own
	out, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	return out, nil
}

// TenantIDPrefix begins the stored id of every session of a tenant other
// than the default: _T<tenant>_<id>, where <id> is the id its agents use
// on the wire (tenant names hold no '_'). Subjects, KV keys, the
// projector's keys and everything else derived from the stored id are so
// scoped by tenant; the default tenant's sessions keep their ids as they
// are.
const TenantIDPrefix = "_T"

// Scoped reports whether c's session ids are stored qualified by its
// tenant: an agent of a tenant other than the default.
func (c Caller) Scoped() bool { return !c.Operator() && c.Tenant != DefaultTenant }

// StoredID is the stored id of the session c names id. An id that is not
// a valid session id is returned as it is, for the caller's validation
// to refuse; one whose stored id would be too long is refused here.
//
// An agent of the default tenant may not name an id of the form of
// another tenant's stored id (bad_request, whether or not it exists), so
// that it learns nothing of them.
func (c Caller) StoredID(id string) (string, error) {
	if c.Operator() || !schema.ValidSessionID(id) {
		return id, nil
	}
	if !c.Scoped() {
		if strings.HasPrefix(id, TenantIDPrefix) {
			return "", schema.Errorf(schema.CodeBadRequest, "session ids beginning with %s are other tenants'", TenantIDPrefix)
		}
		return id, nil
	}
	s := TenantStoredID(c.Tenant, id)
	if !schema.ValidSessionID(s) {
		return "", schema.Errorf(schema.CodeBadRequest, "session id %q is too long: tenant %s's ids have at most %d characters", id, c.Tenant, 128-len(s)+len(id))
	}
	return s, nil
}

// WireID is the id c uses for the session stored as stored
// (TenantWireID of c's tenant; an operator's is the stored id).
func (c Caller) WireID(stored string) string {
	if !c.Scoped() {
		return stored
	}
	return TenantWireID(c.Tenant, stored)
}

// TenantStoredID is the stored id of the session the agents of tenant
// name id: _T<tenant>_<id> for a tenant other than the default, id
// itself for the default tenant and for "" (an operator: both name
// sessions by their stored ids). It checks nothing (Caller.StoredID
// refuses what an agent may not name). TenantWireID is its inverse.
func TenantStoredID(tenant, id string) string {
	if tenant == "" || tenant == DefaultTenant {
		return id
	}
	return TenantIDPrefix + tenant + "_" + id
}

// TenantWireID is the id the agents of tenant name the session stored as
// stored by: <id> for _T<tenant>_<id> (WireOf); stored itself for every
// other id, and for every id when tenant is the default or "" (an
// operator): a session of another tenant, or of none (_T<tenant>_ alone),
// has no name of tenant's. It is the rule of AskedID seen from the
// tenant: for every id but "", AskedID(TenantStoredID(tenant, id), id)
// is TenantWireID(tenant, TenantStoredID(tenant, id)), that is id.
func TenantWireID(tenant, stored string) string {
	if t, id := WireOf(stored); t != "" && t == tenant && t != DefaultTenant {
		return id
	}
	return stored
}

// TenantWireText is the message s naming stored ids as the agents of
// tenant name them (TenantWireID): every run of session id characters in
// s is taken for an id, so an id inside a longer one is left as it is.
func TenantWireText(tenant, s string) string {
	prefix := TenantStoredID(tenant, "")
	if prefix == "" || !strings.Contains(s, prefix) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if !schema.ValidSessionID(s[i : i+1]) {
			b.WriteByte(s[i])
			i++
			continue
		}
		j := i + 1
		for j < len(s) && schema.ValidSessionID(s[j:j+1]) {
			j++
		}
		b.WriteString(TenantWireID(tenant, s[i:j]))
		i = j
	}
	return b.String()
}

// AskedID is the id of the session stored as stored as the caller that
// asked for it by asked names it: asked, when stored is asked under a
// tenant's prefix (_T<tenant>_<asked>, the stored id of an agent of that
// tenant's asked), else stored. What an agent reads of its session (the
// events' sessionId, sessions.api.read answering with them as stored)
// so names the session as the agent does, and an operator, who asked by
// the stored id, keeps it.
func AskedID(stored, asked string) string {
	if t, id := WireOf(stored); t != "" && id == asked {
		return asked
	}
	return stored
}

// WireOf splits a stored id into the tenant it is scoped to ("" for the
// default tenant's ids and an operator's) and the id that tenant's agents
// use.
func WireOf(stored string) (tenant, id string) {
	rest, ok := strings.CutPrefix(stored, TenantIDPrefix)
	if !ok {
		return "", stored
	}
	tenant, id, ok = strings.Cut(rest, "_")
	if !ok || tenant == "" || id == "" {
		return "", stored
	}
	return tenant, id
}

// TenantOfStored is the tenant whose agents name the session stored as
// stored: T for _T<T>_<id> (T not the default tenant), the default tenant
// for an id that does not begin with _T. ok is false for an id that begins
// with _T and is no such stored id (_T<T> without an id, or the default
// tenant's name as T): no agent can name it, since the default tenant's
// may not name an id beginning with _T and every other's are put under
// their own prefix.
func TenantOfStored(stored string) (tenant string, ok bool) {
	if !strings.HasPrefix(stored, TenantIDPrefix) {
		return DefaultTenant, true
	}
	tenant, _ = WireOf(stored)
	return tenant, tenant != "" && tenant != DefaultTenant
}

// TenantOf is the tenant of TenantOfStored, "" (no tenant's) for an id
// that begins with _T and is no tenant's stored id.
func TenantOf(stored string) string {
	if t, ok := TenantOfStored(stored); ok {
		return t
	}
	return ""
}

// CheckOwner decides whether the session stored as stored may be created
// with owner (data.owner of its session/created; nil: none), whoever
// creates it (ADR 010): the owner is an agent of the tenant the stored id
// names, and a session without one is the default tenant's, so its id
// must be one of the default tenant's. Anything else would make a session
// none of its owner's tenant could name or use, counted in the usage of
// the tenant its id names (bad_request). An agent's sessions pass by
// construction (StoredID, StampOwner); an operator's must name an owner
// to create a session of a tenant other than the default.
func CheckOwner(stored string, owner *schema.Owner) error {
	tenant, ok := TenantOfStored(stored)
	switch {
	case !ok:
		return schema.Errorf(schema.CodeBadRequest, "session id %s begins with %s but is no tenant's stored id (%s<tenant>_<id>, the tenant not %s): no agent could name the session", schema.Clip(stored, 80), TenantIDPrefix, TenantIDPrefix, DefaultTenant)
	case owner == nil && tenant != DefaultTenant:
		return schema.Errorf(schema.CodeBadRequest, "session %s is tenant %s's: its session/created must name its owner, an agent of %s (data.owner {\"tenant\":%q,\"agent\":...}); without one it would be the default tenant's, and none of %s's agents could use it", stored, tenant, tenant, tenant, tenant)
	case owner != nil && owner.Tenant != tenant:
		form := TenantIDPrefix + owner.Tenant + "_<id>"
		if owner.Tenant == DefaultTenant {
			form = "<id>, not beginning with " + TenantIDPrefix
		}
		return schema.Errorf(schema.CodeBadRequest, "data.owner is an agent of tenant %s, but session %s is tenant %s's: a session of %s is stored as %s", owner.Tenant, stored, tenant, owner.Tenant, form)
	}
	return nil
}
