package writer_test

import (
	"bytes"
	"context"
	"slices"
	"testing"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/writer"
)

// A writer on a sealing store (docs/adr/011-sealed-bodies.md) stores
// every event sealed and works as on a plain one: appends chained from
// its cache, a writer started later (no cache, no key in memory) folds
// the session from its sealed bodies and appends after it, and
// sessions.api.read answers the plain events.
func TestWriterOnSealedBodies(t *testing.T) {
	srv := natstest.RunServerDir(t, t.TempDir())
	nc := natstest.Connect(t, srv)
	open := func() *logstore.Store {
		st, err := logstore.Open(context.Background(), nc, logstore.Config{SealBodies: true})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	_, stop := runService(t, writer.Config{Store: open(), Conn: nc})
	t.Cleanup(stop)
	e := &env{nc: nc}
	user := func(s string) map[string]any { return ev(schema.TypeMessageUser, "data", map[string]any{"content": s}) }
	mustOK(t, e.nc, map[string]any{"sessionId": "s-seal", "expectedSeq": 0, "events": events(created(), user("a"))})
	mustOK(t, e.nc, map[string]any{"sessionId": "s-seal", "events": events(user("b"))})

	stop()
	st2 := open()
	startWriter(t, st2, e.nc, writerConfig())
	mustOK(t, e.nc, map[string]any{"sessionId": "s-seal", "expectedSeq": 3, "events": events(user("c"), user("d"))})

	r, ed, _ := readReq(t, e.nc, `{"sessionId":"s-seal"}`)
	if ed != nil {
		t.Fatalf("read: %+v", ed)
	}
	if got := seqs(t, r.Events); !slices.Equal(got, []uint64{1, 2, 3, 4, 5}) {
		t.Fatalf("read seqs %v", got)
	}
	evs, _, err := st2.ReadEvents(context.Background(), "s-seal", 0)
	if err != nil || len(evs) != 5 {
		t.Fatalf("judged read: %d events, %v", len(evs), err)
	}
	stream, err := natstest.JetStream(t, e.nc).Stream(context.Background(), logstore.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		m, err := stream.GetMsg(context.Background(), ev.StreamSeq)
		if err != nil {
			t.Fatal(err)
		}
		if !logstore.Sealed(m.Header) || bytes.Contains(m.Data, []byte(`"content"`)) {
			t.Fatalf("stream seq %d is stored plain", ev.StreamSeq)
		}
	}
}
