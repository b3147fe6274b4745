package logstore_test

import (
	"context"
	"testing"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// A grouped append stores every session's events with the stream seqs it
// reports, all or nothing: one session's failed check refuses the group
// (nothing stored), and its parts then append alone.
func TestAppendGroup(t *testing.T) {
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	st := open(t, nc, logstore.Config{})
	ctx := context.Background()
	part := func(sid string, expected uint64, from uint64, n int) logstore.GroupPart {
		req := &logstore.AppendRequest{SessionID: sid, ExpectedStreamSeq: expected, Events: events(sid, from, n, "g")}
		msgs, err := st.Messages(req)
		if err != nil {
			t.Fatal(err)
		}
		return logstore.GroupPart{Req: req, Msgs: msgs}
	}
	res, err := st.AppendGroup(ctx, []logstore.GroupPart{part("ga", 0, 1, 2), part("gb", 0, 1, 3)})
	if err != nil {
		t.Fatal(err)
	}
	for i, sid := range []string{"ga", "gb"} {
		tail, err := st.Tail(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		if res[i].StreamSeq != tail.StreamSeq || res[i].LastSeq != tail.Seq || res[i].FirstSeq != 1 {
			t.Fatalf("%s: result %+v, tail %+v", sid, res[i], tail)
		}
		if c, ok := st.CachedTail(sid); !ok || c != tail {
			t.Fatalf("%s: cached tail %+v (%v), want %+v", sid, c, ok, tail)
		}
	}
	// gb's expectation is stale: the whole group is refused.
	ta, _ := st.Tail(ctx, "ga")
	_, err = st.AppendGroup(ctx, []logstore.GroupPart{part("ga", ta.StreamSeq, 3, 1), part("gb", ta.StreamSeq, 4, 1), part("gc", 0, 1, 1)})
	if err == nil || logstore.ClassifySend(err) != logstore.SendRefused {
		t.Fatalf("stale group: %v, want a refusal", err)
	}
	for sid, want := range map[string]uint64{"ga": 2, "gb": 3, "gc": 0} {
		if tail, err := st.Tail(ctx, sid); err != nil || tail.Seq != want {
			t.Fatalf("%s after a refused group: %+v %v, want seq %d", sid, tail, err, want)
		}
	}
	// What no group may hold.
	p := part("gd", 0, 1, 1)
	for name, parts := range map[string][]logstore.GroupPart{
		"empty":        nil,
		"same session": {p, p},
	} {
		if _, err := st.AppendGroup(ctx, parts); schema.CodeOf(err) != schema.CodeBadRequest {
			t.Errorf("%s: %v, want bad_request", name, err)
		}
	}
}
