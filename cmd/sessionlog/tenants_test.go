package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
)

// `sessionlog tenants` counts each tenant's sessions and messages by their
// stored ids: _T<tenant>_<id>, every other id the default tenant's; it
// shows the sessions and bytes the writers counted (TENANT_USAGE), a
// tenant whose sessions are all erased too, and the writers' limits.
func TestTenantsVerb(t *testing.T) {
	s := natstest.RunServer(t)
	nc := natstest.Connect(t, s)
	ctx := context.Background()
	st, err := logstore.Open(ctx, nc, logstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for id, n := range map[string]int{"s-1": 3, "_Tacme_s-1": 2, "_Tacme_s-2": 4, "_Tglobex_x": 1} {
		if _, err := gen.Seed(ctx, st, id, n, 0); err != nil {
			t.Fatal(err)
		}
	}
	for tenant, u := range map[string]logstore.TenantUsage{"acme": {Sessions: 2, Bytes: 900}, "initech": {Sessions: 0, Bytes: 0}} {
		if _, _, err := st.AddUsage(ctx, tenant, u, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.PutUsageLimits(ctx, logstore.TenantLimits{Sessions: 10, Bytes: 1 << 30, Tenants: map[string]logstore.TenantBound{"globex": {Sessions: 3, EventsPerSecond: new(7.0)}}}); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := Main(ctx, []string{"tenants", "--json", "--nats-url", s.ClientURL()}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	counts := map[string]uint64{}
	for _, id := range []string{"s-1", "_Tacme_s-1", "_Tacme_s-2", "_Tglobex_x"} {
		tail, err := st.Tail(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		counts[id] = tail.Seq
	}
	want := strings.Join([]string{
		`{"limits":{"sessions":10,"bytes":1073741824,"eventsPerSecond":0,"tenants":{"globex":{"sessions":3,"bytes":0,"eventsPerSecond":7}}}}`,
		`{"tenant":"AGENTS","sessions":1,"messages":` + strconv.FormatUint(counts["s-1"], 10) + `,"countedSessions":0,"bytes":0,"maxSessions":10,"maxBytes":1073741824,"maxEventsPerSecond":0}`,
		`{"tenant":"acme","sessions":2,"messages":` + strconv.FormatUint(counts["_Tacme_s-1"]+counts["_Tacme_s-2"], 10) + `,"countedSessions":2,"bytes":900,"maxSessions":10,"maxBytes":1073741824,"maxEventsPerSecond":0}`,
		`{"tenant":"globex","sessions":1,"messages":` + strconv.FormatUint(counts["_Tglobex_x"], 10) + `,"countedSessions":0,"bytes":0,"maxSessions":3,"maxBytes":0,"maxEventsPerSecond":7}`,
		`{"tenant":"initech","sessions":0,"messages":0,"countedSessions":0,"bytes":0,"maxSessions":10,"maxBytes":1073741824,"maxEventsPerSecond":0}`,
	}, "\n") + "\n"
	if got := out.String(); got != want {
		t.Fatalf("tenants --json printed\n%s\nwant\n%s", got, want)
	}
	out.Reset()
	if code := Main(ctx, []string{"tenants", "--nats-url", s.ClientURL()}, &out, &errb); code != 0 || !strings.Contains(out.String(), "events per second per tenant none\nTENANT") {
		t.Fatalf("tenants: exit %d: %q %s", code, out.String(), errb.String())
	}
	found := false
	for _, l := range strings.Split(out.String(), "\n") {
		found = found || strings.Join(strings.Fields(l), " ") == "globex 1 1 0 0 3 none 7"
	}
	if !found {
		t.Fatalf("tenants printed no row of globex's own limits:\n%s", out.String())
	}
}

// The writer's (and up's) limits per tenant: --tenant-max-sessions and
// --tenant-max-bytes for every tenant, --tenant-limit TENANT=SESSIONS:SIZE
// (repeatable) for one.
func TestTenantLimitFlags(t *testing.T) {
	fs := flag.NewFlagSet("writer", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg := writerFlags(fs)
	if err := fs.Parse([]string{"--tenant-max-sessions", "100", "--tenant-max-bytes", "10GiB",
		"--tenant-limit", "acme=5:1MiB", "--tenant-limit", "globex=0:0", "--tenant-limit", "initech=2:1KiB:250", "--tenant-limit", "umbrella=1:0:0"}); err != nil {
		t.Fatal(err)
	}
	if got := fs.Lookup("tenant-limit").Value.String(); got != "acme=5:1MiB,globex=0:0,initech=2:1KiB:250,umbrella=1:0:0" {
		t.Errorf("--tenant-limit prints %q", got)
	}
	limits := logstore.TenantLimits{EventsPerSecond: 9, Tenants: cfg.TenantBounds}
	if got := []float64{limits.RateOf("acme"), limits.RateOf("initech"), limits.RateOf("umbrella"), limits.RateOf("other")}; !slices.Equal(got, []float64{9, 250, 0, 9}) {
		t.Errorf("rates of acme, initech, umbrella and another: %v, want [9 250 0 9]", got)
	}
	for k, b := range cfg.TenantBounds {
		b.EventsPerSecond = nil // compared above
		cfg.TenantBounds[k] = b
	}
	want := map[string]logstore.TenantBound{"acme": {Sessions: 5, Bytes: 1 << 20}, "globex": {}, "initech": {Sessions: 2, Bytes: 1 << 10}, "umbrella": {Sessions: 1}}
	if cfg.TenantMaxSessions != 100 || cfg.TenantMaxBytes != 10<<30 || !maps.Equal(cfg.TenantBounds, want) {
		t.Fatalf("parsed %d, %d, %v", cfg.TenantMaxSessions, cfg.TenantMaxBytes, cfg.TenantBounds)
	}
	for _, bad := range []string{"acme", "acme=5", "=5:1MiB", "acme=x:1MiB", "acme=-1:0", "acme=5:lots", "acme=1:1,acme=2:2",
		"acme=5:1MiB:x", "acme=5:1MiB:-1", "acme=5:1MiB:1:2", "acme=5:1MiB:Inf"} {
		fs := flag.NewFlagSet("writer", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		writerFlags(fs)
		var args []string
		for _, v := range strings.Split(bad, ",") {
			args = append(args, "--tenant-limit", v)
		}
		if err := fs.Parse(args); err == nil {
			t.Errorf("--tenant-limit %s: parsed", bad)
		}
	}
}
