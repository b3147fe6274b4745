package sre

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"text/tabwriter"

	"github.com/sessionlog/sessionlog/internal/bytesize"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/api"
)

// Tenants prints each tenant's usage and limits (after recounting the
// usage from the streams, with recount), as a table or as JSON lines.
func Tenants(ctx context.Context, st *logstore.Store, asJSON, recount bool, stdout, stderr io.Writer) (err error) {
	if recount {
		found, err := st.RecountUsage(ctx)
		if err != nil {
			return fmt.Errorf("tenants --recount: %w", err)
		}
		fmt.Fprintf(stderr, "recounted %d tenants from the streams\n", len(found))
	}
	list, err := st.ListSessions(ctx)
	if err != nil {
		return err
	}
	usage, err := st.ListUsage(ctx)
	if err != nil {
		return err
	}
	limits, _, err := st.UsageLimits(ctx)
	if err != nil {
		return err
	}
	by := map[string]*TenantUsage{}
	of := func(t string) *TenantUsage {
		u := by[t]
		if u == nil {
			u = &TenantUsage{Tenant: t}
			by[t] = u
		}
		return u
	}
	for _, s := range list {
		t, _ := api.WireOf(s.ID)
		if t == "" {
			t = api.DefaultTenant
		}
		u := of(t)
		u.Sessions++
		u.Messages += s.Messages
	}
	for t, v := range usage {
		u := of(t)
		u.Counted, u.Bytes = v.Sessions, v.Bytes
	}
	for t := range limits.Tenants {
		of(t)
	}
	out := make([]TenantUsage, 0, len(by))
	for t, u := range by {
		b := limits.For(t)
		u.MaxSessions, u.MaxBytes, u.MaxEventsPerSecond = b.Sessions, b.Bytes, limits.RateOf(t)
		out = append(out, *u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tenant < out[j].Tenant })
	if asJSON {
		enc := json.NewEncoder(stdout)
		if err := enc.Encode(map[string]any{"limits": limits}); err != nil {
			return err
		}
		for _, u := range out {
			if err := enc.Encode(u); err != nil {
				return err
			}
		}
		return nil
	}
	fmt.Fprintf(stdout, "limits (as the last writer started): events per second per tenant %s\n",
		limitText(limits.EventsPerSecond, strconv.FormatFloat(limits.EventsPerSecond, 'g', -1, 64)))
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tSESSIONS\tMESSAGES\tCOUNTED SESSIONS\tBYTES\tMAX SESSIONS\tMAX BYTES\tMAX EVENTS/S")
	for _, u := range out {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", u.Tenant, u.Sessions, u.Messages, u.Counted, u.Bytes,
			limitText(float64(u.MaxSessions), strconv.FormatInt(u.MaxSessions, 10)),
			limitText(float64(u.MaxBytes), (*bytesize.Size)(&u.MaxBytes).String()),
			limitText(u.MaxEventsPerSecond, strconv.FormatFloat(u.MaxEventsPerSecond, 'g', -1, 64)))
	}
	return tw.Flush()
}

// TenantUsage is what `sessionlog tenants` prints per tenant: its
// sessions and their stored messages, from the streams' per-subject state
// (ADR 010: a tenant's sessions are stored as _T<tenant>_<id>; every other
// session is the default tenant's), and the sessions and stored bytes the
// writers counted in TENANT_USAGE, which their limits judge by.
type TenantUsage struct {
	Tenant   string `json:"tenant"`
	Sessions int    `json:"sessions"`
	Messages uint64 `json:"messages"`
	// Counted and Bytes: TENANT_USAGE (sessions stored before it was kept
	// are not counted until a recount, tenants --recount).
	Counted int64 `json:"countedSessions"`
	Bytes   int64 `json:"bytes"`
	// MaxSessions, MaxBytes and MaxEventsPerSecond: the tenant's bounds
	// as the last writer started had them (0: none).
	MaxSessions        int64   `json:"maxSessions"`
	MaxBytes           int64   `json:"maxBytes"`
	MaxEventsPerSecond float64 `json:"maxEventsPerSecond"`
}

// runTenants prints each tenant's sessions, stored messages and bytes,
// and the writers' limits per tenant.

func limitText(v float64, s string) string {
	if v <= 0 {
		return "none"
	}
	return s
}
