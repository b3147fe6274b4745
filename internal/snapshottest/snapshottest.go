// Package snapshottest has the services' tests store sessions'
// snapshots as the writer stores them (DESIGN.md section 2, "Snapshots").
package snapshottest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/writer"
)

// ByWriter has a writer snapshot each session: a writer on st and nc
// that snapshots every 100 events appends one user message (event id
// "by-writer") to each (it folds the session whole, then stores a
// snapshot at that message) and stops, which waits for its snapshots. It
// returns each session's head, checked to be at the session's tail.
func ByWriter(t testing.TB, st *logstore.Store, nc *nats.Conn, ids ...string) map[string]*logstore.SnapshotHead {
	t.Helper()
	ctx := context.Background()
	w, err := writer.New(writer.Config{Store: st, Conn: nc, SnapshotEvery: 100})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, w.Ready)
	for _, id := range ids {
		body, _ := json.Marshal(map[string]any{"sessionId": id, "events": []map[string]any{
			{"eventId": "by-writer", "type": schema.TypeMessageUser, "data": map[string]any{"content": "hi"}}}})
		m, err := nc.Request(logstore.SubjectAppend, body, 30*time.Second)
		if err == nil && strings.Contains(string(m.Data), `"error"`) {
			err = errors.New(string(m.Data))
		}
		if err != nil {
			stop()
			<-done
			t.Fatalf("append to %s: %v", id, err)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	heads := map[string]*logstore.SnapshotHead{}
	for _, id := range ids {
		h, err := st.SnapshotHeadOf(ctx, id)
		tail, terr := st.Tail(ctx, id)
		if err != nil || terr != nil || h == nil || h.Seq != tail.Seq {
			t.Fatalf("%s: snapshot head %+v (%v), tail %+v (%v)", id, h, err, tail, terr)
		}
		heads[id] = h
	}
	return heads
}
