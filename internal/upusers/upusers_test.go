package upusers

import (
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	natsauth "github.com/sessionlog/sessionlog/deploy/nats"
)

// Set: the agent, up's own users and the operator, with perms.go's
// permissions, in place of the users before; no operator without its
// name.
func TestSet(t *testing.T) {
	for _, operator := range []Login{{"sre", "p2"}, {}} {
		opts := &server.Options{Users: []*server.User{{Username: "stale"}}}
		svc, err := Set(opts, Login{"fleet", "p1"}, operator, "pw")
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]*server.Permissions{"fleet": natsauth.Agent(), Service: natsauth.Service(), Eraser: natsauth.Eraser(), "sre": nil}
		if operator.User == "" {
			delete(want, "sre")
		}
		for _, u := range opts.Users {
			p, ok := want[u.Username]
			if !ok {
				t.Errorf("unexpected user %q", u.Username)
				continue
			}
			delete(want, u.Username)
			if !natsauth.Equal(u.Permissions, p) && !(p == nil && u.Permissions == nil) {
				t.Errorf("%s: permissions %+v, want %+v", u.Username, u.Permissions, p)
			}
			if wantPw := map[string]string{"fleet": "p1", "sre": "p2"}[u.Username]; wantPw != "" && u.Password != wantPw || wantPw == "" && u.Password != "pw" {
				t.Errorf("%s: password %q", u.Username, u.Password)
			}
		}
		if len(want) > 0 {
			t.Errorf("missing users %v", want)
		}
		if svc == nil || svc.Username != Service || Find(opts, Service) != svc {
			t.Errorf("service user %+v", svc)
		}
	}
}

// FromConfig: up's users take the account and the permissions of the
// file's "service" and "eraser" users, as copies; a file without
// authentication gets none; one without "service", or with up's own
// names, is refused.
func TestFromConfig(t *testing.T) {
	acc := server.NewAccount("SVC")
	perms := func(subj string) *server.Permissions {
		return &server.Permissions{Publish: &server.SubjectPermission{Allow: []string{subj}}, Response: &server.ResponsePermission{MaxMsgs: 1}}
	}
	opts := &server.Options{Users: []*server.User{
		{Username: "service", Password: "s", Account: acc, Permissions: perms("svc.>")},
		{Username: "eraser", Password: "e", Account: acc, Permissions: perms("erase.>")},
	}}
	svc, err := FromConfig(opts, "pw")
	if err != nil {
		t.Fatal(err)
	}
	er := Find(opts, Eraser)
	if svc != Find(opts, Service) || svc.Account != acc || svc.Password != "pw" || er == nil || er.Account != acc || er.Password != "pw" {
		t.Fatalf("service %+v, eraser %+v", svc, er)
	}
	if !natsauth.Equal(svc.Permissions, perms("svc.>")) || !natsauth.Equal(er.Permissions, perms("erase.>")) {
		t.Fatalf("permissions: service %+v, eraser %+v", svc.Permissions, er.Permissions)
	}
	// Copies: what the server fills in on one user is not the other's.
	svc.Permissions.Publish.Allow[0] = "changed"
	svc.Permissions.Response.MaxMsgs = 9
	if tmpl := Find(opts, "service").Permissions; tmpl.Publish.Allow[0] != "svc.>" || tmpl.Response.MaxMsgs != 1 {
		t.Fatalf("the file's service user shares its permissions with up's: %+v", tmpl)
	}

	if svc, err := FromConfig(&server.Options{}, "pw"); svc != nil || err != nil {
		t.Fatalf("no authentication: %+v, %v", svc, err)
	}
	for _, tc := range []struct {
		users []*server.User
		want  string
	}{
		{[]*server.User{{Username: "eraser"}}, `no user "service"`},
		{[]*server.User{{Username: "service"}, {Username: Eraser}}, `user "sessionlog-up-eraser" is up's own`},
	} {
		if _, err := FromConfig(&server.Options{Users: tc.users}, "pw"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
}

func TestPassword(t *testing.T) {
	a, err := Password()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Password()
	if len(a) < 40 || a == b {
		t.Fatalf("passwords %q and %q: want long and new each time", a, b)
	}
}
