package writer_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/writer"
)

// A tenant's agents append at most TenantEventsPerSecond events a second
// (a burst of as many); over it quota_exceeded, nothing stored. Other
// tenants and the operators are not held back, and the clock refills it.
func TestTenantQuota(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	reg := prometheus.NewRegistry()
	e := newEnv(t, envOpts{writer: writer.Config{Registerer: reg, Now: clock, TenantEventsPerSecond: 3}})
	ctx := context.Background()
	alice := api.Caller{Tenant: "acme", Agent: "alice"}
	carol := api.Caller{Tenant: "globex", Agent: "carol"}
	body := func(id string, n int) []byte {
		evs := []map[string]any{}
		for range n {
			evs = append(evs, ev("message/user", "data", map[string]any{"content": "x"}))
		}
		b, err := json.Marshal(map[string]any{"sessionId": id, "events": evs})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	mustAppend := func(c api.Caller, b []byte) {
		t.Helper()
		if _, err := e.w.AppendAs(ctx, c, b); err != nil {
			t.Fatalf("%v: %v", c, err)
		}
	}
	create := func(id string) []byte {
		b, _ := json.Marshal(map[string]any{"sessionId": id, "events": []map[string]any{created()}})
		return b
	}
	mustAppend(alice, create("q-1"))
	mustAppend(alice, body("q-1", 2))
	before := streamMsgs(t, e.nc)
	if _, err := e.w.AppendAs(ctx, alice, body("q-1", 1)); schema.CodeOf(err) != schema.CodeQuotaExceeded {
		t.Fatalf("the fourth event in a second: %v, want quota_exceeded", err)
	}
	if got := streamMsgs(t, e.nc); got != before {
		t.Fatalf("the refused append stored %d messages", got-before)
	}
	mustAppend(carol, create("q-1"))
	mustAppend(api.Caller{}, body("_Tacme_q-1", 5)) // alice's q-1, as an operator names it
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	mustAppend(alice, body("q-1", 3))
	if got := counterSum(t, reg, "sessionlog_writer_tenant_events_total", "tenant", "acme", "result", "stored"); got != 6 {
		t.Fatalf("acme's stored events counted %v, want 6", got)
	}
	if got := counterSum(t, reg, "sessionlog_writer_tenant_events_total", "tenant", "acme", "result", "quota_exceeded"); got != 1 {
		t.Fatalf("acme's refused events counted %v, want 1", got)
	}
}

// A tenant's own rate (TenantBounds' EventsPerSecond, --tenant-limit's
// third part) replaces TenantEventsPerSecond for it: acme may append 5
// events a second, globex 0 (no bound), every other tenant 2; the refusal
// names the setting that bounds the tenant.
func TestTenantQuotaOwnRate(t *testing.T) {
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	e := newEnv(t, envOpts{writer: writer.Config{Registerer: prometheus.NewRegistry(), Now: clock, TenantEventsPerSecond: 2,
		TenantBounds: map[string]logstore.TenantBound{"acme": {EventsPerSecond: new(5.0)}, "globex": {EventsPerSecond: new(0.0)}}}})
	ctx := context.Background()
	appendN := func(tenant string, n int) error {
		evs := []map[string]any{created()}
		for range n - 1 {
			evs = append(evs, ev("message/user", "data", map[string]any{"content": "x"}))
		}
		b, err := json.Marshal(map[string]any{"sessionId": "r-1", "events": evs})
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.w.AppendAs(ctx, api.Caller{Tenant: tenant, Agent: "a"}, b)
		return err
	}
	for tenant, c := range map[string]struct {
		ok      int
		refused string
	}{"acme": {5, "(--tenant-limit acme)"}, "initech": {2, "(--tenant-events-per-second)"}, "globex": {50, ""}} {
		if err := appendN(tenant, c.ok); err != nil {
			t.Fatalf("%s: %d events in a second: %v", tenant, c.ok, err)
		}
		if c.refused == "" {
			continue
		}
		err := appendN(tenant, 1)
		if schema.CodeOf(err) != schema.CodeQuotaExceeded || !strings.Contains(err.Error(), c.refused) {
			t.Fatalf("%s: one more event: %v, want quota_exceeded naming %s", tenant, err, c.refused)
		}
	}
}
