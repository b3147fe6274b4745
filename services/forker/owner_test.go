package forker

import (
	"strings"
	"testing"

	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// An operator's fork keeps the parent's owner, so its child's id must be
// of the owner's tenant (ADR 010): a child of an ownerless parent under a
// tenant's id, or of a tenant's parent under another tenant's or the
// default tenant's id, would be a session none of its tenant's agents
// could use. Refused bad_request before anything is written.
func TestOperatorForkKeepsTheOwnersTenant(t *testing.T) {
	e := newEnv(t, nil)
	e.appendLines("_Tacme_p", `session/created title=p owner={"tenant":"acme","agent":"alice"}`, `message/user content="hello"`)
	e.appendLines("plain", `session/created title=p`, `message/user content="hello"`)
	op := api.Caller{}
	for _, c := range []struct{ parent, child string }{
		{"plain", "_Tacme_c"}, {"_Tacme_p", "c"}, {"_Tacme_p", "_Tglobex_c"},
	} {
		_, err := e.svc.ForkAs(e.ctx, op, Request{ParentID: c.parent, ChildID: c.child})
		wantCode(t, err, schema.CodeBadRequest)
		e.noChild(c.child)
	}
	for _, c := range []struct{ parent, child string }{{"plain", "c"}, {"_Tacme_p", "_Tacme_c"}} {
		if _, err := e.svc.ForkAs(e.ctx, op, Request{ParentID: c.parent, ChildID: c.child}); err != nil {
			t.Fatalf("the operator's fork of %s into %s: %v", c.parent, c.child, err)
		}
	}
	// A child the operator names no id for is made under the parent's
	// tenant's prefix.
	rep, err := e.svc.ForkAs(e.ctx, op, Request{ParentID: "_Tacme_p"})
	if err != nil || !strings.HasPrefix(rep.ChildID, "_Tacme_") {
		t.Fatalf("the operator's fork of _Tacme_p with no child id: %+v %v", rep, err)
	}
	// alice's fork of her own is hers, under her tenant's id.
	alice := api.Caller{Tenant: "acme", Agent: "alice"}
	if _, err := e.svc.ForkAs(e.ctx, alice, Request{ParentID: "p", ChildID: "c2"}); err != nil {
		t.Fatalf("alice's fork: %v", err)
	}
}
