package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/sessionlog/sessionlog/internal/httpauth"
)

// tenantTokens is the repeatable --tenant-token TENANT=TOKEN of up and
// the projector: token -> tenant (httpauth.RequireTenants).
type tenantTokens map[string]string

const tenantTokenUsage = "a tenant's HTTP token, `TENANT=TOKEN` (repeatable; needs --http-token, the operator's): a request bearing it in 'Authorization: Bearer' (never ?token= or the cookie) sees only that tenant's sessions (ids as stored, _T<TENANT>_<id>; the default tenant AGENTS has the plain ids) and may not act"

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
	tenant, token, err := httpauth.ParseTenantToken(v)
	if err != nil {
		return err
	}
	if _, dup := t[token]; dup {
		return errors.New("two tenants have the same token")
	}
	for _, n := range t {
		if n == tenant {
			return fmt.Errorf("tenant %s has a token already", tenant)
		}
	}
	t[token] = tenant
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
