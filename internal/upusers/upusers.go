// Package upusers builds the users of `sessionlog up`'s embedded server
// (DESIGN.md section 10): the agents', the operator's, and up's own,
// which its services log in as. The command checks its flags; this
// package builds the users they name.
package upusers

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats-server/v2/server"

	natsauth "github.com/sessionlog/sessionlog/deploy/nats"
)

// Service is the name of the user up's own services log in as. Its
// password is new on every start (Password) and never leaves the process.
const Service = "sessionlog-up-services"

// Eraser is the user up's repairer logs in as: the services' rights plus
// erasure (natsauth.Eraser), with the same password.
const Eraser = "sessionlog-up-eraser"

// Own are up's own users, whose names no other user may take.
var Own = []string{Service, Eraser}

// Find returns the server's user of that name, nil if none.
func Find(opts *server.Options, name string) *server.User {
	for _, u := range opts.Users {
		if u.Username == name {
			return u
		}
	}
	return nil
}

// Login is a user name and its password.
type Login struct{ User, Password string }

// Set makes the server's users, in place of any it had: agent, the
// default tenant's one user, with the agent permissions in its account;
// operator (none when its User is "") with the whole services' account;
// up's Service and Eraser users, with password, in the services' account,
// with the service and eraser permissions. The permissions are
// deploy/nats/perms.go's, the definition deploy/nats/auth.conf spells for
// nats-server. It returns the Service user; an error is the agent's name
// refused by natsauth.Accounts.
func Set(opts *server.Options, agent, operator Login, password string) (*server.User, error) {
	// The agents' user is the default tenant's one user, in its account;
	// the services and the operator are in the services' account, which
	// exports the agents' subjects to it (ADR 010).
	opts.Users = nil
	acc, err := natsauth.Accounts(opts, []natsauth.Tenant{{Name: natsauth.DefaultTenant,
		Users: []natsauth.TenantUser{{Name: agent.User, Password: agent.Password}}}})
	if err != nil {
		return nil, err
	}
	svc := &server.User{Username: Service, Password: password, Account: acc, Permissions: natsauth.Service()}
	opts.Users = append(opts.Users, svc,
		&server.User{Username: Eraser, Password: password, Account: acc, Permissions: natsauth.Eraser()})
	if operator.User != "" {
		opts.Users = append(opts.Users, &server.User{Username: operator.User, Password: operator.Password, Account: acc, Permissions: natsauth.Operator()})
	}
	return svc, nil
}

// FromConfig adds up's Service user to the users of a server
// configuration file that asks for authentication, in the account and
// with the permissions of the file's "service" user, and its Eraser user
// with those of the file's "eraser" user when there is one. It returns
// the Service user, nil when the file asks for no authentication.
func FromConfig(opts *server.Options, password string) (*server.User, error) {
	if len(opts.Users) == 0 && len(opts.Nkeys) == 0 && opts.Username == "" && opts.Authorization == "" && len(opts.TrustedOperators) == 0 {
		return nil, nil // the file asks for no authentication
	}
	var tmpl *server.User
	for _, u := range opts.Users {
		if slices.Contains(Own, u.Username) {
			return nil, fmt.Errorf("user %q is up's own", u.Username)
		}
		if u.Username == "service" {
			tmpl = u
		}
	}
	if tmpl == nil {
		return nil, errors.New(`no user "service" whose account and permissions up's services can take (see deploy/nats/auth.conf)`)
	}
	svc := &server.User{Username: Service, Password: password, Account: tmpl.Account, Permissions: clonePermissions(tmpl.Permissions)}
	opts.Users = append(opts.Users, svc)
	// The repairer takes the file's "eraser" user's rights (erase,
	// retention); a file without one leaves it the services' rights.
	if er := Find(opts, "eraser"); er != nil {
		opts.Users = append(opts.Users, &server.User{Username: Eraser, Password: password, Account: er.Account, Permissions: clonePermissions(er.Permissions)})
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

// Password is a new random password for up's own users.
func Password() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("service password: %w", err)
	}
	return "p" + hex.EncodeToString(b), nil
}
