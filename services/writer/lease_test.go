package writer_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/writer"
)

// An append naming a holder takes the lease (KV key with that holder and
// the TTL) before the reply; further appends within TTL/3 do not write it
// again; with nothing renewing, the key disappears after the TTL.
func TestLeaseRenewedByAppend(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, envOpts{store: logstore.Config{LeaseTTL: 1500 * time.Millisecond}, writer: writer.Config{Registerer: reg}})
	ctx := context.Background()
	mustOK(t, e.nc, map[string]any{"sessionId": "s1", "holder": "agent-1", "events": events(created())})
	l, _, err := e.st.GetLease(ctx, "s1")
	if err != nil || l == nil || l.Holder != "agent-1" {
		t.Fatalf("lease after append: %+v, %v", l, err)
	}
	if c, err := e.st.GetClaim(ctx, "s1"); err != nil || c == nil || c.Holder != "agent-1" {
		t.Fatalf("claim: %+v, %v", c, err)
	}
	for i := 0; i < 5; i++ {
		mustOK(t, e.nc, map[string]any{"sessionId": "s1", "holder": "agent-1", "events": events(ev(schema.TypeMessageUser, "data", map[string]any{"content": "x"}))})
	}
	if n := counterSum(t, reg, "sessionlog_writer_lease_renewals_total", "result", "ok"); n != 1 {
		t.Fatalf("%v renewals for appends within TTL/3, want 1", n)
	}
	// A new holder renews at once (it takes agent-1's live lease, which
	// it must say: DESIGN.md section 2).
	mustOK(t, e.nc, map[string]any{"sessionId": "s1", "holder": "agent-2", "takeover": true, "events": events(ev(schema.TypeMessageUser, "data", map[string]any{"content": "x"}))})
	if l, _, _ := e.st.GetLease(ctx, "s1"); l == nil || l.Holder != "agent-2" {
		t.Fatalf("lease after new holder: %+v", l)
	}
	// Appends without a holder do not renew; the lease expires.
	mustOK(t, e.nc, map[string]any{"sessionId": "s1", "events": events(ev(schema.TypeMessageUser, "data", map[string]any{"content": "x"}))})
	natstest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		if l, _, err := e.st.GetLease(ctx, "s1"); err != nil || l != nil {
			return errors.New("lease still live")
		}
		return nil
	})
}

// Heartbeats renew an existing session's lease and say for how long; an
// unknown session is not_found, a bad request bad_request; a session that
// heartbeats stays leased past the TTL.
func TestHeartbeat(t *testing.T) {
	ttl := 1200 * time.Millisecond
	e := newEnv(t, envOpts{store: logstore.Config{LeaseTTL: ttl}})
	ctx := context.Background()
	mustOK(t, e.nc, map[string]any{"sessionId": "s1", "events": events(created())})
	hb := func(body any) (writer.HeartbeatReply, *writer.ErrorDetail) {
		r := request(t, e.nc, logstore.SubjectHeartbeat, body)
		var rep writer.HeartbeatReply
		if r.err == nil {
			if err := decodeJSON(r.raw, &rep); err != nil {
				t.Fatal(err)
			}
		}
		return rep, r.err
	}
	for _, tc := range []struct {
		body any
		code schema.Code
	}{
		{`{`, schema.CodeBadRequest},
		{map[string]any{"sessionId": "a.b", "holder": "h"}, schema.CodeBadRequest},
		{map[string]any{"sessionId": "s1"}, schema.CodeBadRequest},
		{map[string]any{"sessionId": "nope", "holder": "h"}, schema.CodeNotFound},
	} {
		if _, err := hb(tc.body); err == nil || err.Code != tc.code {
			t.Errorf("heartbeat %v: %+v, want %s", tc.body, err, tc.code)
		}
	}
	if l, _, _ := e.st.GetLease(ctx, "nope"); l != nil {
		t.Fatal("heartbeat of an unknown session took a lease")
	}
	deadline := time.Now().Add(2 * ttl)
	for time.Now().Before(deadline) {
		rep, err := hb(map[string]any{"sessionId": "s1", "holder": "agent-1"})
		if err != nil || rep.SessionID != "s1" || rep.Holder != "agent-1" || rep.TTLMs <= 0 || rep.TTLMs > ttl.Milliseconds() {
			t.Fatalf("heartbeat: %+v %+v", rep, err)
		}
		if l, _, _ := e.st.GetLease(ctx, "s1"); l == nil || l.Holder != "agent-1" {
			t.Fatalf("lease during heartbeats: %+v", l)
		}
		time.Sleep(ttl / 4) // the heartbeat interval of this agent
	}
}

// A live lease belongs to its holder (DESIGN.md section 2): a heartbeat or
// an append naming another holder is refused with conflict naming the
// holder, and the append stores nothing; with takeover it is taken; an
// expired lease is taken by anyone.
func TestLeaseTakeover(t *testing.T) {
	ctx := context.Background()
	msg := func(i int) map[string]any {
		return ev(schema.TypeMessageUser, "eventId", "m"+string(rune('a'+i)), "data", map[string]any{"content": "x"})
	}
	holderOf := func(t *testing.T, st *logstore.Store, sid string) string {
		t.Helper()
		l, _, err := st.GetLease(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		if l == nil {
			return ""
		}
		return l.Holder
	}
	refused := func(t *testing.T, r reply, holder string) {
		t.Helper()
		if r.err == nil || r.err.Code != schema.CodeConflict || !strings.Contains(r.err.Message, `"`+holder+`"`) {
			t.Fatalf("got %s %+v, want conflict naming %s", r.code(), r.err, holder)
		}
	}

	live := func(t *testing.T, sealed bool) {
		e := newEnv(t, envOpts{store: logstore.Config{SealBodies: sealed}})
		mustOK(t, e.nc, map[string]any{"sessionId": "s1", "holder": "agent-1", "events": events(created())})
		before := stored(t, e.st, "s1")

		refused(t, request(t, e.nc, logstore.SubjectHeartbeat, map[string]any{"sessionId": "s1", "holder": "agent-2"}), "agent-1")
		refused(t, appendReq(t, e.nc, map[string]any{"sessionId": "s1", "holder": "agent-2", "events": events(msg(0))}), "agent-1")
		// Also with the right expectation and in a batch: the lease is
		// checked before the events are.
		refused(t, appendReq(t, e.nc, map[string]any{"sessionId": "s1", "expectedSeq": 1, "holder": "agent-2", "events": events(msg(1), msg(2))}), "agent-1")
		if got := stored(t, e.st, "s1"); len(got) != len(before) {
			t.Fatalf("refused appends stored events: %d, want %d", len(got), len(before))
		}
		if h := holderOf(t, e.st, "s1"); h != "agent-1" {
			t.Fatalf("lease holder after refusals: %q", h)
		}
		// The holder itself, and an append naming no holder, go on.
		mustOK(t, e.nc, map[string]any{"sessionId": "s1", "holder": "agent-1", "events": events(msg(3))})
		mustOK(t, e.nc, map[string]any{"sessionId": "s1", "events": events(msg(4))})
		if r := request(t, e.nc, logstore.SubjectHeartbeat, map[string]any{"sessionId": "s1", "holder": "agent-1"}); r.err != nil {
			t.Fatalf("holder's heartbeat: %+v", r.err)
		}

		// takeover: true takes the live lease, by heartbeat ...
		if r := request(t, e.nc, logstore.SubjectHeartbeat, map[string]any{"sessionId": "s1", "holder": "agent-2", "takeover": true}); r.err != nil {
			t.Fatalf("heartbeat with takeover: %+v", r.err)
		}
		if h := holderOf(t, e.st, "s1"); h != "agent-2" {
			t.Fatalf("lease holder after a heartbeat takeover: %q", h)
		}
		// ... and the former holder is now the other one, even though
		// this writer renewed its lease a moment ago.
		refused(t, appendReq(t, e.nc, map[string]any{"sessionId": "s1", "holder": "agent-1", "events": events(msg(5))}), "agent-2")
		refused(t, request(t, e.nc, logstore.SubjectHeartbeat, map[string]any{"sessionId": "s1", "holder": "agent-1"}), "agent-2")
		// ... or by append.
		mustOK(t, e.nc, map[string]any{"sessionId": "s1", "holder": "agent-3", "takeover": true, "events": events(msg(6))})
		if h := holderOf(t, e.st, "s1"); h != "agent-3" {
			t.Fatalf("lease holder after an append takeover: %q", h)
		}
		refused(t, appendReq(t, e.nc, map[string]any{"sessionId": "s1", "holder": "agent-2", "events": events(msg(7))}), "agent-3")
		if got := stored(t, e.st, "s1"); len(got) != len(before)+3 {
			t.Fatalf("%d events stored, want %d", len(got), len(before)+3)
		}
		// Under sealing the bucket holds no holder (DESIGN.md section 2).
		if v := storedValue(t, e, logstore.LeaseBucket, "s1"); bytes.HasPrefix(v, []byte(logstore.ValueSealPrefix)) != sealed || bytes.Contains(v, []byte("agent-3")) == sealed {
			t.Fatalf("sealed %v: the stored lease is %q", sealed, v)
		}
	}
	t.Run("Live", func(t *testing.T) { live(t, false) })
	// The same rules over sealed lease values.
	t.Run("LiveSealed", func(t *testing.T) { live(t, true) })

	t.Run("Expired", func(t *testing.T) {
		ttl := time.Second
		e := newEnv(t, envOpts{store: logstore.Config{LeaseTTL: ttl}})
		mustOK(t, e.nc, map[string]any{"sessionId": "s1", "holder": "agent-1", "events": events(created())})
		mustOK(t, e.nc, map[string]any{"sessionId": "s2", "holder": "agent-1", "events": events(created())})
		// Nothing renews: both leases run out.
		natstest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
			for _, sid := range []string{"s1", "s2"} {
				if h := holderOf(t, e.st, sid); h != "" {
					return errors.New("lease of " + sid + " still live")
				}
			}
			return nil
		})
		// Anyone takes an expired lease, without takeover.
		if r := request(t, e.nc, logstore.SubjectHeartbeat, map[string]any{"sessionId": "s1", "holder": "agent-2"}); r.err != nil {
			t.Fatalf("heartbeat on an expired lease: %+v", r.err)
		}
		if h := holderOf(t, e.st, "s1"); h != "agent-2" {
			t.Fatalf("lease holder of s1: %q", h)
		}
		mustOK(t, e.nc, map[string]any{"sessionId": "s2", "holder": "agent-2", "events": events(msg(0))})
		if h := holderOf(t, e.st, "s2"); h != "agent-2" {
			t.Fatalf("lease holder of s2: %q", h)
		}
		// And holds it now.
		refused(t, appendReq(t, e.nc, map[string]any{"sessionId": "s2", "holder": "agent-1", "events": events(msg(1))}), "agent-2")
	})
}

// A holder's committed append whose claim could not be written (the claim
// bucket unavailable) leaves the writer owing the claim: it writes it once
// the bucket answers, though the holder sends nothing more (it may have
// died with its work open, and only a claim lets the repairer find it).
func TestWriterWritesOwedClaim(t *testing.T) {
	t.Run("plain", func(t *testing.T) { writesOwedClaim(t, false) })
	// A sealed claim (DESIGN.md section 2): written sealed, read plain.
	t.Run("sealed", func(t *testing.T) { writesOwedClaim(t, true) })
}

func writesOwedClaim(t *testing.T, sealed bool) {
	e := newEnv(t, envOpts{store: logstore.Config{LeaseTTL: time.Second, SealBodies: sealed}})
	ctx := context.Background()
	js := natstest.JetStream(t, e.nc)
	kv, err := js.KeyValue(ctx, logstore.ClaimBucket)
	if err != nil {
		t.Fatal(err)
	}
	status, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteKeyValue(ctx, logstore.ClaimBucket); err != nil {
		t.Fatal(err)
	}
	mustOK(t, e.nc, map[string]any{"sessionId": "owed", "holder": "agent-1", "events": events(created())})
	if _, err := js.CreateKeyValue(ctx, status.(*jetstream.KeyValueBucketStatus).Config()); err != nil {
		t.Fatal(err)
	}
	natstest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		rev, err := e.st.ClaimRevision(ctx, "owed")
		if err != nil || rev == 0 {
			return fmt.Errorf("no claim yet (%v)", err)
		}
		return nil
	})
	c, err := e.st.GetClaim(ctx, "owed")
	if err != nil || c == nil || c.Holder != "agent-1" {
		t.Fatalf("claim %+v %v, want agent-1's", c, err)
	}
	if v := storedValue(t, e, logstore.ClaimBucket, "owed"); bytes.HasPrefix(v, []byte(logstore.ValueSealPrefix)) != sealed || bytes.Contains(v, []byte("agent-1")) == sealed {
		t.Fatalf("sealed %v: the stored claim is %q", sealed, v)
	}
}

// storedValue is the value of bucket's key as the bucket stores it.
func storedValue(t *testing.T, e *env, bucket, key string) []byte {
	t.Helper()
	kv, err := natstest.JetStream(t, e.nc).KeyValue(context.Background(), bucket)
	if err != nil {
		t.Fatal(err)
	}
	en, err := kv.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("%s %s: %v", bucket, key, err)
	}
	return en.Value()
}
