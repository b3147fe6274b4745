package logstore

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// The batched direct read returns what the leader read returns, from the
// start and from a cached position, and refuses a tail it cannot reach.
// (Moved here from the repairer with the read.)
func TestReadSessionFromMatchesLeader(t *testing.T) {
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	ctx := context.Background()
	st, err := Open(ctx, nc, Config{})
	if err != nil {
		t.Fatal(err)
	}
	appendN := func(sid string, n int) {
		tail, err := st.Tail(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		evs := make([]schema.Envelope, n)
		for i := range evs {
			seq := tail.Seq + uint64(i) + 1
			typ, data := schema.TypeMessageUser, `{"content":"hi"}`
			if seq == 1 {
				typ, data = schema.TypeSessionCreated, `{}`
			}
			evs[i] = schema.Envelope{SchemaVersion: schema.Version, SessionID: sid, Seq: seq, EventID: fmt.Sprintf("e-%d", seq),
				Time: time.Now().UTC(), Type: typ, Data: []byte(data)}
		}
		if _, err := st.Append(ctx, AppendRequest{SessionID: sid, ExpectedStreamSeq: tail.StreamSeq, Events: evs}); err != nil {
			t.Fatal(err)
		}
	}
	appendN("r-1", 3)
	appendN("r-other", 1) // interleaved in the stream
	appendN("r-1", 1)
	want, wantTail, err := st.ReadEvents(ctx, "r-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, from := range []int{0, 1, 3} {
		var after, afterSeq uint64
		if from > 0 {
			after, afterSeq = want[from-1].StreamSeq, want[from-1].Seq
		}
		var got []*Msg
		tail, err := st.ReadSessionFrom(ctx, "r-1", after, afterSeq, func(m *Msg) error {
			got = append(got, m)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if tail != wantTail || len(got) != len(want)-from {
			t.Fatalf("from %d: tail %+v (want %+v), %d events (want %d)", from, tail, wantTail, len(got), len(want)-from)
		}
		for i, m := range got {
			w, err := st.NextAfter(ctx, "r-1", want[from+i].StreamSeq-1)
			if err != nil {
				t.Fatal(err)
			}
			if m.StreamSeq != w.StreamSeq || !bytes.Equal(m.Data, w.Data) {
				t.Fatalf("from %d event %d: stream seq %d, want %d (same body %v)", from, i, m.StreamSeq, w.StreamSeq, bytes.Equal(m.Data, w.Data))
			}
		}
	}
	loc, _ := Locate("r-1")
	if msgs, ok := st.directRead(ctx, loc, 0, len(want), wantTail.StreamSeq); !ok || len(msgs) != len(want) {
		t.Fatalf("direct read of the whole session: %d events, ok %v", len(msgs), ok)
	}
	// A tail the replica does not have (yet): refused, for the leader read.
	if _, ok := st.directRead(ctx, loc, 0, len(want)+1, wantTail.StreamSeq+100); ok {
		t.Fatal("direct read accepted a tail beyond the stored events")
	}
	if _, ok := st.directRead(ctx, loc, 0, len(want)-1, wantTail.StreamSeq); ok {
		t.Fatal("direct read accepted fewer events than the tail")
	}
}
