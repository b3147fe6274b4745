package main

// The users of up's embedded server (DESIGN.md section 10): the agents',
// the operator's, and up's own, which its services log in as. Their
// flags are checked here; internal/upusers builds them.

import (
	"fmt"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/sessionlog/sessionlog/internal/upusers"
)

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
	password, err := upusers.Password()
	if err != nil {
		return nil, err
	}
	if fromFile {
		// The passwords alone may be set: SESSIONLOG_OPERATOR_PASSWORD is
		// also a variable auth.conf reads.
		if f.natsUser != "" || f.operatorUser != "" {
			return nil, usageErrorf("--nats-user and --operator-user do not go with --nats-config: its users apply")
		}
		svc, err := upusers.FromConfig(opts, password)
		if err != nil {
			return nil, fmt.Errorf("--nats-config %s: %w", f.natsConfig, err)
		}
		return svc, nil
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
	for _, own := range upusers.Own {
		if f.natsUser == own || f.operatorUser == own {
			return nil, usageErrorf("user %q is up's own", own)
		}
	}
	svc, err := upusers.Set(opts, upusers.Login{User: f.natsUser, Password: f.natsPassword},
		upusers.Login{User: f.operatorUser, Password: f.operatorPassword}, password)
	if err != nil {
		return nil, usageErrorf("--nats-user: %v", err)
	}
	return svc, nil
}
