package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/projector/httpapi"
	"github.com/sessionlog/sessionlog/services/projector/internal/projectortest"
)

// TestWatchLiveOnlyFromWriters: a watch shows a live event only if its
// publisher, as the Nats-Request-Info header names it, may write to the
// session (its owner, an agent its grants name, an operator: no header).
// Here the test writes the header the server would add on the tenants'
// shared import (e2e/perms TestTenants runs it through the shipped
// configuration): alice owns the session and grants bob; mallory's and
// carol's events are dropped and counted, until alice grants carol.
func TestWatchLiveOnlyFromWriters(t *testing.T) {
	liveWatch(t, false)
}

// TestWatchLiveHeldUntilViewsCatchUp: a live event that follows a
// durable seq the views have not folded yet (the projector lags the log)
// is held, not judged, until they have: carol's two events, published
// after the grant that lets her in but before the views fold it, come
// through in their order once they do; mallory's, which say they follow
// a seq no one ever writes, are dropped as forbidden, past what a session
// holds at once (her own first, not carol's) or once held for their time,
// and the events of a publisher allowed go on meanwhile.
func TestWatchLiveHeldUntilViewsCatchUp(t *testing.T) {
	liveWatch(t, true)
}

func liveWatch(t *testing.T, lag bool) {
	e := projectortest.NewEnv(t)
	reg := prometheus.NewRegistry()
	r := e.Start(t.TempDir(), func(c *projector.Config) {
		c.Registerer, c.Gatherer = reg, reg
		if lag {
			c.Watch.QueueBytes = 16 << 10 // what a session holds, too
		}
	})
	r.WaitReady(t)
	event := func(seq uint64, typ, data string) schema.Envelope {
		return schema.Envelope{SchemaVersion: schema.Version, SessionID: "owned", Seq: seq, EventID: fmt.Sprintf("o%d", seq),
			Time: projectortest.T0.Add(time.Duration(seq) * time.Millisecond), Type: typ, Data: json.RawMessage(data)}
	}
	store := func(ev schema.Envelope) {
		if _, err := gen.Publish(e.Ctx, e.LS, ev); err != nil {
			t.Fatal(err)
		}
	}
	store(event(1, schema.TypeSessionCreated, `{"title":"alice's","owner":{"tenant":"AGENTS","agent":"alice"},"grants":["bob"]}`))
	r.WaitSession(t, "owned", func(d httpapi.Detail) bool { return d.LastSeq == 1 })

	ctx, cancel := context.WithCancel(e.Ctx)
	defer cancel()
	ch, _ := projectortest.SSE(t, ctx, r.Srv.URL+"/v1/sessions/owned/watch?after=1", "")
	live, _ := logstore.LiveSubject("owned")
	publish := func(agent string, after uint64, text string) {
		m := nats.NewMsg(live)
		m.Data, _ = json.Marshal(map[string]any{"afterSeq": after, "kind": "delta", "text": text})
		if agent != "" {
			m.Header.Set(api.RequestInfoHeader, fmt.Sprintf(`{"acc":%q,"user":%q}`, api.DefaultTenant, agent))
		}
		if err := e.NC.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
		if err := e.NC.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	// want reads the watch's next transient event.
	want := func(text string) {
		t.Helper()
		ev := projectortest.Next(t, ch, true)
		if ev.Kind != "transient" || !strings.Contains(string(ev.Data.Event), `"`+text+`"`) {
			t.Fatalf("want the live event %s, got %s %s", text, ev.Kind, ev.Raw)
		}
	}
	// The watch subscribes before it answers: the first event is alice's.
	publish("alice", 1, "alice-1")
	want("alice-1")
	publish("mallory", 1, "mallory-1")
	publish("carol", 1, "carol-1")
	publish("bob", 1, "bob-1")
	publish("", 1, "operator-1")
	want("bob-1")
	want("operator-1")
	if got := projectortest.CounterValue(t, reg, "sessionlog_projector_transient_dropped_total", "forbidden"); got != 2 {
		t.Fatalf("dropped as forbidden: %v, want 2", got)
	}

	if lag {
		// carol has seen the grant at seq 2, the views have not.
		publish("carol", 2, "carol-early-1")
		// mallory floods what the session holds: her own events go first.
		for i := range 40 {
			publish("mallory", 99, fmt.Sprintf("mallory-ahead-%d-%s", i, strings.Repeat("m", 1000)))
		}
		publish("carol", 2, "carol-early-2")
		publish("bob", 1, "bob-2")
		want("bob-2")
		store(event(2, schema.TypeSessionGranted, `{"grants":["carol"]}`))
		if ev := projectortest.Next(t, ch, true); ev.Kind != "durable" || ev.Data.Seq != 2 {
			t.Fatalf("want the grant, got %s %s", ev.Kind, ev.Raw)
		}
		want("carol-early-1")
		want("carol-early-2")
		natstest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
			if got := projectortest.CounterValue(t, reg, "sessionlog_projector_transient_dropped_total", "forbidden"); got != 2+40 {
				return fmt.Errorf("dropped as forbidden: %v, want 42 (mallory's events past the budget, then the rest held for their time)", got)
			}
			return nil
		})
		return
	}
	// A grant, once folded, lets carol's events through.
	store(event(2, schema.TypeSessionGranted, `{"grants":["carol"]}`))
	if ev := projectortest.Next(t, ch, true); ev.Kind != "durable" || ev.Data.Seq != 2 {
		t.Fatalf("want the grant, got %s %s", ev.Kind, ev.Raw)
	}
	d := r.WaitSession(t, "owned", func(d httpapi.Detail) bool { return len(d.Grants) == 2 })
	if d.Owner == nil || *d.Owner != (schema.Owner{Tenant: api.DefaultTenant, Agent: "alice"}) || d.Grants[1] != "carol" {
		t.Fatalf("summary's owner %+v, grants %q", d.Owner, d.Grants)
	}
	publish("mallory", 2, "mallory-2")
	publish("carol", 2, "carol-2")
	want("carol-2")
	if got := projectortest.CounterValue(t, reg, "sessionlog_projector_transient_dropped_total", "forbidden"); got != 3 {
		t.Fatalf("dropped as forbidden: %v, want 3", got)
	}
}
