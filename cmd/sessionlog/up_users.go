package main

// The users of up's embedded server (DESIGN.md section 10): the agents',
// the operator's, and up's own, which its services log in as.

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/nats-io/nats-server/v2/server"

	natsauth "github.com/sessionlog/sessionlog/deploy/nats"
)

// upServiceUser is the name of the user up's own services log in as. Its
// password is new on every start and never leaves the process.
const upServiceUser = "sessionlog-up-services"

// upEraserUser is the user up's repairer logs in as: the services' rights
// plus erasure (natsauth.Eraser), with the same password.
const upEraserUser = "sessionlog-up-eraser"

// upUser returns the embedded server's user of that name, nil if none.
func upUser(opts *server.Options, name string) *server.User {
	for _, u := range opts.Users {
		if u.Username == name {
			return u
		}
	}
	return nil
}

// upUsers sets the embedded server's users (DESIGN.md section 10) and
// returns the one up's services log in as, or nil when NATS is open.
//
// Without --nats-config: --nats-user gets the agent permissions and
// --operator-user the whole account, both from deploy/nats/perms.go, the
// definition deploy/nats/auth.conf spells for nats-server; the services
// get its service permissions. With --nats-config the file defines the
// users; the services get a user of their own in the account and with the
// permissions of the file's "service" user.
func upUsers(opts *server.Options, f *upFlags, fromFile bool) (*server.User, error) {
	password, err := randomPassword()
	if err != nil {
		return nil, err
	}
	if fromFile {
		// The passwords alone may be set: SESSIONLOG_OPERATOR_PASSWORD is
		// also a variable auth.conf reads.
		if f.natsUser != "" || f.operatorUser != "" {
			return nil, usageErrorf("--nats-user and --operator-user do not go with --nats-config: its users apply")
		}
		return upConfigServiceUser(opts, f.natsConfig, password)
	}
	if (f.natsUser == "") != (f.natsPassword == "") {
		return nil, usageErrorf("--nats-user and --nats-password go together")
	}
	if (f.operatorUser == "") != (f.operatorPassword == "") {
		return nil, usageErrorf("--operator-user and --operator-password go together")
	}
	if f.operatorUser != "" && f.natsUser == "" {
		return nil, usageErrorf("--operator-user needs --nats-user: without it NATS is open to everyone")
	}
	if f.operatorUser != "" && f.operatorUser == f.natsUser {
		return nil, usageErrorf("--operator-user and --nats-user must differ")
	}
	if f.natsUser == "" {
		return nil, nil
	}
	for _, own := range []string{upServiceUser, upEraserUser} {
		if f.natsUser == own || f.operatorUser == own {
			return nil, usageErrorf("user %q is up's own", own)
		}
	}
	// The agents' user is the default tenant's one user, in its account;
	// the services and the operator are in the services' account, which
	// exports the agents' subjects to it (ADR 010).
	opts.Users = nil
	acc, err := natsauth.Accounts(opts, []natsauth.Tenant{{Name: natsauth.DefaultTenant,
		Users: []natsauth.TenantUser{{Name: f.natsUser, Password: f.natsPassword}}}})
	if err != nil {
		return nil, usageErrorf("--nats-user: %v", err)
	}
	svc := &server.User{Username: upServiceUser, Password: password, Account: acc, Permissions: natsauth.Service()}
	opts.Users = append(opts.Users, svc,
		&server.User{Username: upEraserUser, Password: password, Account: acc, Permissions: natsauth.Eraser()})
	if f.operatorUser != "" {
		opts.Users = append(opts.Users, &server.User{Username: f.operatorUser, Password: f.operatorPassword, Account: acc, Permissions: natsauth.Operator()})
	}
	return svc, nil
}

// clonePermissions copies p: the server fills in defaults on the copy it
// is given, and users must not share it.
func clonePermissions(p *server.Permissions) *server.Permissions {
	if p == nil {
		return nil
	}
	sp := func(s *server.SubjectPermission) *server.SubjectPermission {
		if s == nil {
			return nil
		}
		return &server.SubjectPermission{Allow: slices.Clone(s.Allow), Deny: slices.Clone(s.Deny)}
	}
	out := &server.Permissions{Publish: sp(p.Publish), Subscribe: sp(p.Subscribe)}
	if p.Response != nil {
		r := *p.Response
		out.Response = &r
	}
	return out
}

// upConfigServiceUser adds up's service user to a --nats-config that asks
// for authentication: in the account and with the permissions of the
// file's "service" user.
func upConfigServiceUser(opts *server.Options, path, password string) (*server.User, error) {
	if len(opts.Users) == 0 && len(opts.Nkeys) == 0 && opts.Username == "" && opts.Authorization == "" && len(opts.TrustedOperators) == 0 {
		return nil, nil // the file asks for no authentication
	}
	var tmpl *server.User
	for _, u := range opts.Users {
		if u.Username == upServiceUser || u.Username == upEraserUser {
			return nil, fmt.Errorf("--nats-config %s: user %q is up's own", path, u.Username)
		}
		if u.Username == "service" {
			tmpl = u
		}
	}
	if tmpl == nil {
		return nil, fmt.Errorf("--nats-config %s: no user \"service\" whose account and permissions up's services can take (see deploy/nats/auth.conf)", path)
	}
	svc := &server.User{Username: upServiceUser, Password: password, Account: tmpl.Account, Permissions: clonePermissions(tmpl.Permissions)}
	opts.Users = append(opts.Users, svc)
	// The repairer takes the file's "eraser" user's rights (erase,
	// retention); a file without one leaves it the services' rights.
	if er := upUser(opts, "eraser"); er != nil {
		opts.Users = append(opts.Users, &server.User{Username: upEraserUser, Password: password, Account: er.Account, Permissions: clonePermissions(er.Permissions)})
	}
	return svc, nil
}

func randomPassword() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("service password: %w", err)
	}
	return "p" + hex.EncodeToString(b), nil
}
