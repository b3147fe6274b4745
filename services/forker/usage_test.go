package forker

import (
	"strings"
	"testing"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// A child counts in its tenant's usage as a session the writer creates:
// an agent's fork past the tenant's session bound, or with the tenant's
// bytes at their bound, is refused quota_exceeded and stores nothing; an
// operator's is counted and never refused; a retried fork is counted once.
func TestForkCountsInTenantUsage(t *testing.T) {
	e := newEnv(t, nil)
	const parent = "_Tacme_p1"
	e.appendLines(parent,
		`session/created title=p owner={"tenant":"acme","agent":"alice"}`,
		`message/user content="hello"`)
	usage := func() logstore.TenantUsage {
		t.Helper()
		u, err := e.st.UsageOf(e.ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	// The writer counted the parent; the bound leaves room for one child.
	if _, _, err := e.st.AddUsage(e.ctx, "acme", logstore.TenantUsage{Sessions: 1}, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.st.PutUsageLimits(e.ctx, logstore.TenantLimits{Sessions: 2}); err != nil {
		t.Fatal(err)
	}
	alice := api.Caller{Tenant: "acme", Agent: "alice"}
	fork := func(c api.Caller, parent, child string) (Reply, error) {
		return e.svc.ForkAs(e.ctx, c, Request{ParentID: parent, ChildID: child})
	}
	if _, err := fork(alice, "p1", "c1"); err != nil {
		t.Fatalf("first fork: %v", err)
	}
	u := usage()
	if u.Sessions != 2 || u.Bytes <= 0 {
		t.Fatalf("usage after the first fork: %+v, want 2 sessions and the child's bytes", u)
	}
	// The same fork asked again is the same child: counted once.
	if _, err := fork(alice, "p1", "c1"); err != nil {
		t.Fatalf("the fork again: %v", err)
	}
	if again := usage(); again != u {
		t.Fatalf("usage after the same fork again: %+v, want %+v", again, u)
	}
	_, err := fork(alice, "p1", "c2")
	wantCode(t, err, schema.CodeQuotaExceeded)
	e.noChild("_Tacme_c2")
	e.noRecord("_Tacme_c2")
	if after := usage(); after != u {
		t.Fatalf("usage after a refused fork: %+v, want %+v", after, u)
	}
	// An operator is counted, never refused.
	if _, err := fork(api.Caller{}, parent, "_Tacme_c3"); err != nil {
		t.Fatalf("operator's fork: %v", err)
	}
	if n := usage().Sessions; n != 3 {
		t.Fatalf("sessions after the operator's fork: %d, want 3", n)
	}
	// With the tenant's bytes at their bound, no fork.
	if err := e.st.PutUsageLimits(e.ctx, logstore.TenantLimits{Sessions: 10, Bytes: usage().Bytes}); err != nil {
		t.Fatal(err)
	}
	_, err = fork(alice, "p1", "c4")
	if se := wantCode(t, err, schema.CodeQuotaExceeded); se != nil && !strings.Contains(se.Message, "bytes") {
		t.Errorf("refusal %q does not name the bytes", se.Message)
	}
	e.noChild("_Tacme_c4")
	if n := usage().Sessions; n != 3 {
		t.Fatalf("sessions after a fork refused for bytes: %d, want 3", n)
	}
}
