package main

import (
	"errors"
	"strings"
	"testing"

	natsauth "github.com/sessionlog/sessionlog/deploy/nats"
	"github.com/sessionlog/sessionlog/internal/upusers"
)

// up's users come from deploy/nats/perms.go, the definition auth.conf spells.
func TestUpUsers(t *testing.T) {
	parse := func(args ...string) (*upFlags, error) {
		fs := newFlags("up")
		var f upFlags
		fs.StringVar(&f.dataDir, "data-dir", t.TempDir(), "")
		fs.StringVar(&f.natsListen, "nats-listen", defaultNATSListen, "")
		fs.StringVar(&f.sync, "sync", defaultSync, "")
		fs.StringVar(&f.natsConfig, "nats-config", "", "")
		fs.StringVar(&f.natsUser, "nats-user", "", "")
		fs.StringVar(&f.natsPassword, "nats-password", "", "")
		fs.StringVar(&f.operatorUser, "operator-user", "", "")
		fs.StringVar(&f.operatorPassword, "operator-password", "", "")
		if err := parseFlagsEnv(fs, args, func(string) (string, bool) { return "", false }); err != nil {
			return nil, err
		}
		opts, svc, err := upServerOptions(fs, &f)
		if err != nil {
			return nil, err
		}
		users := map[string]bool{}
		for _, u := range opts.Users {
			users[u.Username] = true
			switch u.Username {
			case "fleet":
				if !natsauth.Equal(u.Permissions, natsauth.Agent()) {
					t.Errorf("agent user: %+v", u.Permissions)
				}
			case "sre":
				if u.Permissions != nil {
					t.Errorf("operator restricted: %+v", u.Permissions)
				}
			case upusers.Service:
				if u != svc || !natsauth.Equal(u.Permissions, natsauth.Service()) || len(u.Password) < 40 {
					t.Errorf("service user: %+v", u)
				}
			case upusers.Eraser:
				// The repairer's: the services' rights plus erasure.
				if !natsauth.Equal(u.Permissions, natsauth.Eraser()) || len(u.Password) < 40 {
					t.Errorf("eraser user: %+v", u)
				}
			default:
				t.Errorf("unexpected user %q", u.Username)
			}
		}
		if (svc == nil) != (len(opts.Users) == 0) {
			t.Errorf("service user %v with users %v", svc, users)
		}
		return &f, nil
	}
	if _, err := parse("--nats-user", "fleet", "--nats-password", "p1", "--operator-user", "sre", "--operator-password", "p2", "--nats-listen", "0.0.0.0:0"); err != nil {
		t.Fatal(err)
	}
	if _, err := parse(); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"SERVICE", "ERASER", "AGENT", "OPERATOR", "SYS"} {
		t.Setenv("SESSIONLOG_"+v+"_PASSWORD", "pPlaceholder"+v)
	}
	var ue *usageError
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--nats-listen", "0.0.0.0:4222"}, "no credentials"},
		{[]string{"--nats-listen", "192.0.2.1:4222"}, "no credentials"},
		{[]string{"--nats-user", "fleet"}, "go together"},
		{[]string{"--operator-user", "sre", "--operator-password", "p"}, "needs --nats-user"},
		{[]string{"--nats-user", "a", "--nats-password", "p", "--operator-user", "a", "--operator-password", "q"}, "must differ"},
		{[]string{"--nats-user", upusers.Service, "--nats-password", "p"}, "up's own"},
		{[]string{"--nats-user", "a", "--nats-password", "p", "--operator-user", upusers.Eraser, "--operator-password", "q"}, "up's own"},
		{[]string{"--nats-config", "../../deploy/nats/server.conf", "--nats-user", "a", "--nats-password", "p"}, "do not go with --nats-config"},
	} {
		_, err := parse(c.args...)
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want a usage error with %q", c.args, err, c.want)
		}
	}
}
