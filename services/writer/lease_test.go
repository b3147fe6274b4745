package writer_test

import (
	"context"
	"errors"
	"testing"
	"time"

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
	// A new holder renews at once.
	mustOK(t, e.nc, map[string]any{"sessionId": "s1", "holder": "agent-2", "events": events(ev(schema.TypeMessageUser, "data", map[string]any{"content": "x"}))})
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
