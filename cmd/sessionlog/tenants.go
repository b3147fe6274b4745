package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	"github.com/sessionlog/sessionlog/pkg/api"
)

// tenantUsage is what `sessionlog tenants` prints per tenant: its
// sessions and their stored messages, from the streams' per-subject state
// (ADR 010: a tenant's sessions are stored as _T<tenant>_<id>; every other
// session is the default tenant's).
type tenantUsage struct {
	Tenant   string `json:"tenant"`
	Sessions int    `json:"sessions"`
	Messages uint64 `json:"messages"`
}

// runTenants prints each tenant's sessions and stored messages.
func runTenants(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, nf := sreFlags("tenants", stderr)
	asJSON := fs.Bool("json", false, "print JSON lines instead of a table")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("tenants takes no arguments")
	}
	c, err := openSRE(ctx, "tenants", fs, nf, stderr)
	if err != nil {
		return err
	}
	defer c.close()
	list, err := c.store.ListSessions(c.ctx)
	if err != nil {
		return err
	}
	by := map[string]*tenantUsage{}
	for _, s := range list {
		t, _ := api.WireOf(s.ID)
		if t == "" {
			t = api.DefaultTenant
		}
		u := by[t]
		if u == nil {
			u = &tenantUsage{Tenant: t}
			by[t] = u
		}
		u.Sessions++
		u.Messages += s.Messages
	}
	out := make([]tenantUsage, 0, len(by))
	for _, u := range by {
		out = append(out, *u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tenant < out[j].Tenant })
	if *asJSON {
		enc := json.NewEncoder(stdout)
		for _, u := range out {
			if err := enc.Encode(u); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tSESSIONS\tMESSAGES")
	for _, u := range out {
		fmt.Fprintf(tw, "%s\t%d\t%d\n", u.Tenant, u.Sessions, u.Messages)
	}
	return tw.Flush()
}
