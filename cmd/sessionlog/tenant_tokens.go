package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/sessionlog/sessionlog/internal/httpauth"
)

// tenantTokens is the repeatable --tenant-token TENANT[:AGENT,...]=TOKEN
// of up and the projector: token -> what it names
// (httpauth.RequireTenants).
type tenantTokens map[string]string

const tenantTokenUsage = "a tenant's HTTP token, `TENANT[:AGENT,...]=TOKEN`: TENANT=TOKEN for the whole tenant, TENANT:AGENT[,AGENT...]=TOKEN for those agents (NATS users) of it (repeatable; needs --http-token, the operator's): a request bearing it in 'Authorization: Bearer' sees only that tenant's sessions (ids as stored, _T<TENANT>_<id>; the default tenant AGENTS has the plain ids), with agents only those owned by or granted to one of them, and may not act"

func tenantTokensFlag(fs *flag.FlagSet) tenantTokens {
	t := tenantTokens{}
	fs.Var(t, "tenant-token", tenantTokenUsage)
	return t
}

func (t tenantTokens) String() string {
	names := make([]string, 0, len(t))
	for _, n := range t {
		names = append(names, n)
	}
	return strings.Join(names, ",")
}

func (t tenantTokens) Set(v string) error {
	names, token, err := httpauth.ParseTenantToken(v)
	if err != nil {
		return err
	}
	if _, dup := t[token]; dup {
		return errors.New("two tenant tokens are the same")
	}
	for _, n := range t {
		if n == names {
			return fmt.Errorf("%s has a token already", names)
		}
	}
	t[token] = names
	return nil
}

// check refuses tenant tokens without an operator token, or one of them
// equal to it.
func (t tenantTokens) check(operator string) error {
	if len(t) == 0 {
		return nil
	}
	if operator == "" {
		return errors.New("--tenant-token needs --http-token (the operator's): without it every request is the operator's")
	}
	if _, ok := t[operator]; ok {
		return errors.New("a --tenant-token is the --http-token")
	}
	return nil
}
