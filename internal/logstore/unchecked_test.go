package logstore_test

import (
	"context"
	"slices"
	"testing"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// PublishUnchecked stores events as Append would send them (same headers,
// chained by SL-Prev to the body stored before each) but with no sequence
// check: a gap is stored, the returned stream seq is the last one, and the
// session's cached tail is dropped.
func TestPublishUnchecked(t *testing.T) {
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	st := open(t, nc, logstore.Config{})
	ctx := context.Background()
	if _, err := st.Append(ctx, logstore.AppendRequest{SessionID: "u", Events: events("u", 1, 2, "u")}); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.CachedTail("u"); !ok {
		t.Fatal("no cached tail after Append")
	}
	// seq 3 is skipped: the writer would refuse 4 here.
	evs := append(events("u", 4, 2, "u"), events("v", 1, 1, "v")...)
	last, err := st.PublishUnchecked(ctx, func(yield func(schema.Envelope) bool) {
		for _, e := range evs {
			if !yield(e) {
				return
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if last != 5 {
		t.Fatalf("last stream seq %d, want 5", last)
	}
	if _, ok := st.CachedTail("u"); ok {
		t.Fatal("cached tail kept after an unchecked publish")
	}
	m, err := st.MsgAt(ctx, logstore.StreamName, 3)
	if err != nil || m == nil {
		t.Fatalf("stream seq 3: %v", err)
	}
	want := map[string]string{logstore.HeaderMsgID: "u:u-4", logstore.HeaderSeq: "4", logstore.HeaderType: schema.TypeMessageUser, logstore.HeaderSchema: "1", logstore.HeaderExpectedSeq: ""}
	for k, v := range want {
		if got := m.Header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	if e, err := schema.Decode(m.Data); err != nil || e.Seq != 4 || e.EventID != "u-4" {
		t.Fatalf("body: %+v %v", e, err)
	}
	// The chain: u-4 after u-2 (Append's, before the call), u-5 after
	// u-4 (the same call), v-1 the first of its session.
	msgs, seqs := storedMsgs(t, st, "u")
	for i := 1; i < len(msgs); i++ {
		if got, want := msgs[i].Header.Get(logstore.HeaderPrev), logstore.ChainHash(msgs[i-1].Data); got != want {
			t.Errorf("u seq %d: %s = %q, want %q", seqs[i], logstore.HeaderPrev, got, want)
		}
	}
	if b := logstore.CheckChain(msgs, seqs); len(b) != 1 || b[0].Kind != logstore.BreakGap || b[0].Seq != 4 {
		t.Errorf("u's chain: breaks %v, want the gap at seq 4 alone", b)
	}
	if v, _ := storedMsgs(t, st, "v"); len(v) != 1 || v[0].Header.Get(logstore.HeaderPrev) != "" {
		t.Errorf("v's first event: %d messages, %s %q", len(v), logstore.HeaderPrev, v[0].Header.Get(logstore.HeaderPrev))
	}
	// A later call chains a session's first event to its stored tail.
	if _, err := st.PublishUnchecked(ctx, slices.Values(events("v", 2, 1, "v"))); err != nil {
		t.Fatal(err)
	}
	if v, vseqs := storedMsgs(t, st, "v"); len(v) != 2 || v[1].Header.Get(logstore.HeaderPrev) != logstore.ChainHash(v[0].Data) {
		t.Errorf("v seq 2 after a second call: %d messages (seqs %v)", len(v), vseqs)
	}
	tail, err := st.Tail(ctx, "u")
	if err != nil || tail.Seq != 5 || tail.StreamSeq != 4 {
		t.Fatalf("tail %+v %v, want seq 5 at stream seq 4", tail, err)
	}
	// A bad event is refused as Append refuses it, nothing stored.
	bad := events("w", 1, 1, "w")[0]
	bad.SessionID = "bad.id"
	if _, err := st.PublishUnchecked(ctx, func(yield func(schema.Envelope) bool) { yield(bad) }); schema.CodeOf(err) != schema.CodeBadRequest {
		t.Fatalf("bad session id: %v", err)
	}
}
