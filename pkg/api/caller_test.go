package api_test

import (
	"encoding/json"
	"testing"

	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

func TestCallerOf(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []string
		want   api.Caller
		code   schema.Code
	}{
		{"Operator", nil, api.Caller{}, ""},
		{"Agent", []string{`{"acc":"acme","user":"alice","rtt":1000}`}, api.Caller{Tenant: "acme", Agent: "alice"}, ""},
		{"ErrTwoHeaders", []string{`{"acc":"acme","user":"alice"}`, `{"acc":"SESSIONLOG","user":"operator"}`}, api.Caller{}, schema.CodeForbidden},
		{"ErrNoUser", []string{`{"acc":"acme"}`}, api.Caller{}, schema.CodeForbidden},
		{"ErrNotJSON", []string{`acme`}, api.Caller{}, schema.CodeForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := api.CallerOf(tc.values)
			if tc.code != "" {
				if schema.CodeOf(err) != tc.code {
					t.Fatalf("err %v, want %s", err, tc.code)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v %v, want %+v", got, err, tc.want)
			}
		})
	}
}

func TestAuthorize(t *testing.T) {
	alice := api.Caller{Tenant: "acme", Agent: "alice"}
	bob := api.Caller{Tenant: "acme", Agent: "bob"}
	carol := api.Caller{Tenant: "globex", Agent: "carol"}
	legacy := api.Caller{Tenant: api.DefaultTenant, Agent: "agent"}
	owned := &schema.SessionCreated{Owner: alice.Owner()}
	granted := &schema.SessionCreated{Owner: alice.Owner(), Grants: []string{"bob"}}
	unowned := &schema.SessionCreated{}
	for _, tc := range []struct {
		name string
		c    api.Caller
		meta *schema.SessionCreated
		code schema.Code
	}{
		{"Owner", alice, owned, ""},
		{"Operator", api.Caller{}, owned, ""},
		{"Granted", bob, granted, ""},
		{"ErrForbidden", bob, owned, schema.CodeForbidden},
		{"ErrNotFoundOtherTenant", carol, granted, schema.CodeNotFound},
		{"UnownedIsTheDefaultTenants", legacy, unowned, ""},
		{"ErrNotFoundUnownedOtherTenant", alice, unowned, schema.CodeNotFound},
		{"ErrNotFoundDefaultTenantOnOwned", legacy, owned, schema.CodeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := api.Authorize(tc.c, "s-1", tc.meta)
			if got := schema.CodeOf(err); (tc.code == "" && err != nil) || (tc.code != "" && got != tc.code) {
				t.Fatalf("err %v, want %q", err, tc.code)
			}
		})
	}
}

func TestStoredID(t *testing.T) {
	acme := api.Caller{Tenant: "acme", Agent: "alice"}
	legacy := api.Caller{Tenant: api.DefaultTenant, Agent: "agent"}
	for _, tc := range []struct {
		c          api.Caller
		id, stored string
		code       schema.Code
	}{
		{api.Caller{}, "s-1", "s-1", ""},
		{api.Caller{}, "_Tacme_s-1", "_Tacme_s-1", ""},
		{legacy, "s-1", "s-1", ""},
		{legacy, "_Tacme_s-1", "", schema.CodeBadRequest},
		{acme, "s-1", "_Tacme_s-1", ""},
		{acme, "_Tglobex_s-1", "_Tacme__Tglobex_s-1", ""},
		{acme, "a.b", "a.b", ""}, // left to the caller's validation
		{acme, string(make128()), "", schema.CodeBadRequest},
	} {
		got, err := tc.c.StoredID(tc.id)
		if tc.code != "" {
			if schema.CodeOf(err) != tc.code {
				t.Errorf("%v StoredID(%.20q): %v, want %s", tc.c, tc.id, err, tc.code)
			}
			continue
		}
		if err != nil || got != tc.stored {
			t.Errorf("%v StoredID(%q) = %q %v, want %q", tc.c, tc.id, got, err, tc.stored)
		}
		if back := tc.c.WireID(got); back != tc.id {
			t.Errorf("%v WireID(%q) = %q, want %q", tc.c, got, back, tc.id)
		}
	}
}

func make128() []byte {
	b := make([]byte, 128)
	for i := range b {
		b[i] = 'x'
	}
	return b
}

func TestStampOwner(t *testing.T) {
	alice := api.Caller{Tenant: "acme", Agent: "alice"}
	got, err := api.StampOwner(alice, json.RawMessage(`{"title":"t","grants":["bob"]}`))
	if err != nil {
		t.Fatal(err)
	}
	var d schema.SessionCreated
	if err := json.Unmarshal(got, &d); err != nil || d.Owner == nil || *d.Owner != *alice.Owner() || d.Title != "t" || len(d.Grants) != 1 {
		t.Fatalf("stamped %s: %+v %v", got, d, err)
	}
	if _, err := api.StampOwner(alice, got); err != nil {
		t.Fatalf("its own owner given: %v", err)
	}
	if _, err := api.StampOwner(alice, json.RawMessage(`{"owner":{"tenant":"acme","agent":"bob"}}`)); schema.CodeOf(err) != schema.CodeForbidden {
		t.Fatalf("another owner: %v", err)
	}
	if got, err := api.StampOwner(api.Caller{}, json.RawMessage(`{"owner":{"tenant":"acme","agent":"bob"}}`)); err != nil || string(got) != `{"owner":{"tenant":"acme","agent":"bob"}}` {
		t.Fatalf("an operator's event changed: %s %v", got, err)
	}
}

func TestMayGrant(t *testing.T) {
	alice := api.Caller{Tenant: "acme", Agent: "alice"}
	bob := api.Caller{Tenant: "acme", Agent: "bob"}
	granted := &schema.SessionCreated{Owner: alice.Owner(), Grants: []string{"bob"}}
	if err := api.MayGrant(alice, "s-1", granted); err != nil {
		t.Fatalf("the owner: %v", err)
	}
	if err := api.MayGrant(api.Caller{}, "s-1", granted); err != nil {
		t.Fatalf("an operator: %v", err)
	}
	if err := api.MayGrant(bob, "s-1", granted); schema.CodeOf(err) != schema.CodeForbidden {
		t.Fatalf("a granted agent: %v", err)
	}
}

// A session is created with an owner of the tenant its stored id names,
// or none for the default tenant's ids; an id beginning with _T that no
// tenant's agent can name is refused whatever the owner.
func TestCheckOwner(t *testing.T) {
	alice := &schema.Owner{Tenant: "acme", Agent: "alice"}
	agent := &schema.Owner{Tenant: api.DefaultTenant, Agent: "agent"}
	for _, tc := range []struct {
		name   string
		stored string
		owner  *schema.Owner
		code   schema.Code
	}{
		{"TenantsOwner", "_Tacme_s", alice, ""},
		{"TenantsOwnerOfANestedID", "_Tacme__Tglobex_s", alice, ""},
		{"DefaultNoOwner", "s", nil, ""},
		{"DefaultOwner", "s", agent, ""},
		{"ErrTenantNoOwner", "_Tacme_s", nil, schema.CodeBadRequest},
		{"ErrTenantOtherTenantsOwner", "_Tglobex_s", alice, schema.CodeBadRequest},
		{"ErrTenantDefaultOwner", "_Tacme_s", agent, schema.CodeBadRequest},
		{"ErrDefaultTenantsOwner", "s", alice, schema.CodeBadRequest},
		{"ErrNoID", "_Tacme_", alice, schema.CodeBadRequest},
		{"ErrNoTenant", "_T_s", nil, schema.CodeBadRequest},
		{"ErrPrefixOnly", "_Tacme", nil, schema.CodeBadRequest},
		{"ErrDefaultTenantsPrefix", "_TAGENTS_s", agent, schema.CodeBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := api.CheckOwner(tc.stored, tc.owner); (err == nil) != (tc.code == "") || err != nil && schema.CodeOf(err) != tc.code {
				t.Fatalf("CheckOwner(%s, %+v): %v, want %q", tc.stored, tc.owner, err, tc.code)
			}
		})
	}
}

func TestAskedID(t *testing.T) {
	for _, tc := range []struct{ stored, asked, want string }{
		{"_Tacme_s1", "s1", "s1"},               // an agent of acme asked by its id
		{"_Tacme_s1", "_Tacme_s1", "_Tacme_s1"}, // an operator asked by the stored id
		{"s1", "s1", "s1"},                      // the default tenant's
		{"_Tacme_s1", "s2", "_Tacme_s1"},        // not the session asked for
		{"_Tacme_x_s1", "s1", "_Tacme_x_s1"},
		{"_Tacme_x_s1", "x_s1", "x_s1"},
		{"_T_s1", "s1", "_T_s1"}, // no tenant: no agent's stored id
	} {
		if got := api.AskedID(tc.stored, tc.asked); got != tc.want {
			t.Errorf("AskedID(%q, %q) = %q, want %q", tc.stored, tc.asked, got, tc.want)
		}
	}
}

// TestTenantIDs: TenantStoredID and TenantWireID are inverses for every
// id a tenant's agents name, agree with AskedID (the session asked as id
// by an agent of the tenant is named id), and leave as stored every id
// that is not the tenant's, _T<tenant>_ alone included (no tenant's: it
// has no name of its own, not the empty one).
func TestTenantIDs(t *testing.T) {
	for _, tenant := range []string{"", api.DefaultTenant, "acme"} {
		for _, id := range []string{"s1", "x_s1", "_Tacme_s1", "_Tglobex_s1", "_Tacme_", "_TAGENTS_s1"} {
			stored := api.TenantStoredID(tenant, id)
			if got := api.TenantWireID(tenant, stored); got != id {
				t.Errorf("TenantWireID(%q, %q) = %q, want %q", tenant, stored, got, id)
			}
			if got := api.AskedID(stored, id); got != id {
				t.Errorf("AskedID(%q, %q) = %q, want %q", stored, id, got, id)
			}
		}
	}
	for _, tc := range []struct{ tenant, stored, want string }{
		{"acme", "_Tacme_s1", "s1"},
		{"acme", "_Tacme__Tacme_", "_Tacme_"},
		{"acme", "_Tacme_", "_Tacme_"}, // no tenant's
		{"acme", "_Tacme", "_Tacme"},
		{"acme", "_Tglobex_s1", "_Tglobex_s1"}, // another tenant's
		{"acme", "s1", "s1"},                   // the default tenant's
		{"ac", "_Tacme_s1", "_Tacme_s1"},
		{api.DefaultTenant, "_TAGENTS_s1", "_TAGENTS_s1"},
		{api.DefaultTenant, "_Tacme_s1", "_Tacme_s1"},
		{"", "_Tacme_s1", "_Tacme_s1"},
	} {
		if got := api.TenantWireID(tc.tenant, tc.stored); got != tc.want {
			t.Errorf("TenantWireID(%q, %q) = %q, want %q", tc.tenant, tc.stored, got, tc.want)
		}
		// A caller of the tenant names the session as the tenant does.
		if got := (api.Caller{Tenant: tc.tenant, Agent: "alice"}).WireID(tc.stored); got != tc.want {
			t.Errorf("Caller{%q}.WireID(%q) = %q, want %q", tc.tenant, tc.stored, got, tc.want)
		}
	}
	if got := api.TenantStoredID("acme", "s1"); got != "_Tacme_s1" {
		t.Errorf("TenantStoredID(acme, s1) = %q", got)
	}
}

// TestTenantOf: the tenant a stored id names, the default tenant's for an
// id without the prefix, no tenant's for one with it that no agent names.
func TestTenantOf(t *testing.T) {
	for stored, want := range map[string]string{
		"_Tacme_s1": "acme", "_Tacme__Tx_": "acme", "s1": api.DefaultTenant, "x_Tacme_s1": api.DefaultTenant,
		"_Tacme_": "", "_Tacme": "", "_TAGENTS_s1": "", "_T_s1": "",
	} {
		if got := api.TenantOf(stored); got != want {
			t.Errorf("TenantOf(%q) = %q, want %q", stored, got, want)
		}
	}
}

// TestTenantWireText: every id of the tenant's in a message is named as
// its agents name it; ids of others, and an id inside a longer one, stay.
func TestTenantWireText(t *testing.T) {
	for _, tc := range []struct{ tenant, s, want string }{
		{"acme", "no session _Tacme_s1", "no session s1"},
		{"acme", `fork of _Tacme_p (from _Tglobex_q) at "_Tacme_c.1": _Tacme_`, `fork of p (from _Tglobex_q) at "c.1": _Tacme_`},
		{"acme", "x_Tacme_s1 and _Tacme_s1-2", "x_Tacme_s1 and s1-2"},
		{api.DefaultTenant, "no session _TAGENTS_s1", "no session _TAGENTS_s1"},
		{"", "no session _Tacme_s1", "no session _Tacme_s1"},
		{"acme", "", ""},
	} {
		if got := api.TenantWireText(tc.tenant, tc.s); got != tc.want {
			t.Errorf("TenantWireText(%q, %q) = %q, want %q", tc.tenant, tc.s, got, tc.want)
		}
	}
}
