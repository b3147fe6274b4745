package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/sre"
	"github.com/sessionlog/sessionlog/internal/writertest"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/writer"
)

// storedUsage is each tenant's true usage, read from the streams event
// by event: its sessions, and the sizes of their stored bodies.
func storedUsage(t *testing.T, st *logstore.Store) map[string]logstore.TenantUsage {
	t.Helper()
	ctx := context.Background()
	list, err := st.ListSessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]logstore.TenantUsage{}
	for _, s := range list {
		tail, err := st.Tail(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		bodies, err := st.ReadBatch(ctx, s.ID, tail, 0, int(tail.Seq), 0)
		if err != nil {
			t.Fatal(err)
		}
		u := out[logstore.UsageTenant(s.ID)]
		u.Sessions++
		for _, b := range bodies {
			u.Bytes += int64(len(b))
		}
		out[logstore.UsageTenant(s.ID)] = u
	}
	return out
}

// checkUsage fails unless the bucket holds want for every tenant of want
// (exact) or, with atLeast, no less than it.
func checkUsage(t *testing.T, st *logstore.Store, want map[string]logstore.TenantUsage, atLeast bool) {
	t.Helper()
	for tenant, w := range want {
		got, err := st.UsageOf(context.Background(), tenant)
		if err != nil {
			t.Fatal(err)
		}
		if atLeast && (got.Sessions < w.Sessions || got.Bytes < w.Bytes) || !atLeast && got != w {
			t.Errorf("tenant %s: usage %+v, the streams hold %+v (at least: %v)", tenant, got, w, atLeast)
		}
	}
}

func runRecount(t *testing.T, url string) {
	t.Helper()
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"tenants", "--recount", "--json", "--nats-url", url}, &out, &errb); code != 0 {
		t.Fatalf("tenants --recount: exit %d: %s", code, errb.String())
	}
}

// An import appends around the writer: it counts each session and its
// stored bytes in the tenant's usage, and a session of a tenant at its
// sessions bound is refused quota_exceeded with nothing of it stored,
// while the other sessions of the file go in (exit 1).
func TestImportCountsUsageAndRefusesOverBound(t *testing.T) {
	ctx := context.Background()
	file := exportOf(t, 6, "_Tacme_a", "_Tacme_b", "_Tacme_c", "s-1")
	dst, dstStore := storeOnServer(t)
	if err := dstStore.PutUsageLimits(ctx, logstore.TenantLimits{Tenants: map[string]logstore.TenantBound{"acme": {Sessions: 2}}}); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := Main(ctx, []string{"import", "--file", file, "--nats-url", dst.ClientURL()}, &out, &errb)
	if code != 1 || !strings.Contains(out.String(), "imported 3 sessions, 18 events (0 sessions already present, 1 over their tenant's bounds left out)") ||
		!strings.Contains(errb.String(), "session _Tacme_c not imported: quota_exceeded") || !strings.Contains(errb.String(), "tenant acme has 2 sessions, its bound is 2") {
		t.Fatalf("import: exit %d\nstdout %s\nstderr %s", code, out.String(), errb.String())
	}
	if tail, err := dstStore.Tail(ctx, "_Tacme_c"); err != nil || tail.Seq != 0 {
		t.Fatalf("the refused session holds %+v (%v): want nothing stored", tail, err)
	}
	want := storedUsage(t, dstStore)
	if want["acme"].Sessions != 2 || want[logstore.UsageTenant("s-1")].Sessions != 1 {
		t.Fatalf("stored %+v", want)
	}
	checkUsage(t, dstStore, want, false)
}

// A recount sets each tenant's usage to what the streams hold: sessions
// stored around every count, a bucket emptied, a bucket deleted.
func TestTenantsRecountAfterBucketLost(t *testing.T) {
	ctx := context.Background()
	s, st := storeOnServer(t)
	for id, n := range map[string]int{"s-1": 3, "s-2": 40, "_Tacme_x": 7, "_Tglobex_y": 1} {
		if _, err := gen.Seed(ctx, st, id, n, 5); err != nil {
			t.Fatal(err)
		}
	}
	want := storedUsage(t, st)
	if _, _, err := st.AddUsage(ctx, "acme", logstore.TenantUsage{Sessions: 9, Bytes: 1}, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.AddUsage(ctx, "initech", logstore.TenantUsage{Sessions: 2, Bytes: 100}, nil); err != nil {
		t.Fatal(err)
	}
	runRecount(t, s.ClientURL())
	checkUsage(t, st, want, false)
	checkUsage(t, st, map[string]logstore.TenantUsage{"initech": {}}, false)

	js, err := jetstream.New(natstest.Connect(t, s))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, logstore.UsageBucket)
	if err != nil {
		t.Fatal(err)
	}
	for tenant := range want {
		if err := kv.Purge(ctx, tenant); err != nil {
			t.Fatal(err)
		}
	}
	checkUsage(t, st, map[string]logstore.TenantUsage{"acme": {}}, false)
	runRecount(t, s.ClientURL())
	checkUsage(t, st, want, false)

	if err := js.DeleteKeyValue(ctx, logstore.UsageBucket); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := Main(ctx, []string{"tenants", "--recount", "--json", "--nats-url", s.ClientURL()}, &out, &errb); code != 0 {
		t.Fatalf("tenants --recount: exit %d: %s", code, errb.String())
	}
	checkUsage(t, st, want, false)
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n")[1:] {
		var u sre.TenantUsage
		if err := json.Unmarshal([]byte(l), &u); err != nil {
			t.Fatal(err)
		}
		if w := want[u.Tenant]; u.Counted != w.Sessions || int64(u.Sessions) != w.Sessions || u.Bytes != w.Bytes {
			t.Errorf("tenants after the recount: %s, the streams hold %+v", l, w)
		}
	}
}

// A recount racing a writer's appends (and its usage flushes, every 5 ms
// here) loses none of them: once the writer stopped, every tenant's usage
// is at least what the streams hold, and a recount in the quiet that
// follows makes it exact.
func TestTenantsRecountRacingWriterLosesNothing(t *testing.T) {
	ctx := context.Background()
	s, st := storeOnServer(t)
	// Old sessions enough that each recount's walk takes a while (8000
	// messages), with the writer's flushes landing during it.
	for i := range 40 {
		if _, err := gen.Seed(ctx, st, fmt.Sprintf("_Tacme_old-%d", i), 200, 100); err != nil {
			t.Fatal(err)
		}
	}
	w, err := writer.New(writer.Config{Store: st, Conn: natstest.Connect(t, s), UsageFlush: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	stop := writertest.Run(t, w)

	cl := client.New(natstest.Connect(t, s))
	var wg sync.WaitGroup
	appended := make(chan struct{})
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				id := fmt.Sprintf("_Tacme_live-%d-%d", g, i)
				// An operator names the owner of a tenant's session (ADR 010).
				events := []schema.Envelope{{Type: schema.TypeSessionCreated, Data: json.RawMessage(`{"owner":{"tenant":"acme","agent":"alice"}}`)}}
				last := uint64(0)
				for turn := range 3 {
					r, err := cl.Append(ctx, client.AppendRequest{SessionID: id, ExpectedSeq: client.Seq(last), Events: events})
					if err != nil {
						t.Errorf("append %s: %v", id, err)
						return
					}
					last = r.LastSeq
					tid := fmt.Sprintf("t%d", turn)
					events = []schema.Envelope{{Type: schema.TypeTurnStarted, TurnID: tid}, {Type: schema.TypeTurnEnded, TurnID: tid, Data: json.RawMessage(`{"reason":"completed"}`)}}
				}
			}
		}()
	}
	go func() { wg.Wait(); close(appended) }()
	recounts := 0
	for racing := true; racing || recounts < 3; recounts++ {
		runRecount(t, s.ClientURL())
		select {
		case <-appended:
			racing = false
		default:
		}
	}
	t.Logf("%d recounts ran", recounts)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	want := storedUsage(t, st)
	if want["acme"].Sessions != 80 {
		t.Fatalf("stored %+v: want 80 sessions of acme", want)
	}
	checkUsage(t, st, want, true)
	runRecount(t, s.ClientURL())
	checkUsage(t, st, want, false)
}
