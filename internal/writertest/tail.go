package writertest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// CheckTail checks that l, an agentlog.Log whose sink names a new session
// wire and the writer stores as stored, reads the tail through the
// writer on nc, as the writer judges it, not from the store st: a
// missing session has none; a session's tail is the writer's last seq
// and the id of the event there; a session being erased (its events still
// in the store) answers erased, as the writer does (codeOf reads the code
// of l's errors). Events give the stored events back under wire.
func CheckTail(t testing.TB, nc *nats.Conn, st *logstore.Store, l agentlog.Log, wire, stored string, codeOf func(error) api.Code) {
	t.Helper()
	ctx := context.Background()
	if seq, id, err := l.Tail(ctx, wire); err != nil || seq != 0 || id != "" {
		t.Fatalf("tail of a missing session: %d %q %v", seq, id, err)
	}
	evs := []schema.Envelope{
		{SessionID: wire, Seq: 1, EventID: "created", Type: schema.TypeSessionCreated, Data: json.RawMessage(`{"agent":"test"}`)},
		{SessionID: wire, Seq: 2, EventID: "m.1", Type: schema.TypeMessageUser, Data: json.RawMessage(`{"content":"one"}`)},
	}
	if last, dup, err := l.Append(ctx, wire, 0, evs); err != nil || last != 2 || dup {
		t.Fatalf("append: %d %v %v", last, dup, err)
	}
	if seq, id, err := l.Tail(ctx, wire); err != nil || seq != 2 || id != "m.1" {
		t.Fatalf("tail: %d %q %v, want 2 m.1", seq, id, err)
	}
	var got []string
	if err := l.Events(ctx, wire, 0, func(e schema.Envelope) error {
		got = append(got, e.SessionID+"/"+e.EventID)
		return nil
	}); err != nil || len(got) != 2 || got[0] != wire+"/created" || got[1] != wire+"/m.1" {
		t.Fatalf("events %v (%v), want both under %s", got, err, wire)
	}
	// An erase begun: the store still holds the events, the writer
	// answers erased.
	if _, _, err := st.MarkErased(ctx, logstore.Erasure{SessionID: stored, By: "test", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	if tail, err := st.Tail(ctx, stored); err != nil || tail.Seq != 2 {
		t.Fatalf("the store's tail: %+v %v, want seq 2", tail, err)
	}
	_, readErr := client.New(nc).Read(ctx, api.ReadRequest{SessionID: stored})
	if client.CodeOf(readErr) != schema.CodeErased {
		t.Fatalf("the writer reads a session being erased: %v", readErr)
	}
	if _, _, err := l.Tail(ctx, wire); codeOf(err) != schema.CodeErased {
		t.Fatalf("tail of a session being erased: %v (%s), want the writer's erased: %v", err, codeOf(err), readErr)
	}
}
