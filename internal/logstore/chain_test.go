package logstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/natstest/tamper"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// storedMsgs reads a session's stored messages and their event seqs.
func storedMsgs(t *testing.T, st *logstore.Store, sid string) (msgs []*logstore.Msg, seqs []uint64) {
	t.Helper()
	_, err := st.ReadSession(context.Background(), sid, 0, func(m *logstore.Msg) error {
		e, err := schema.Decode(m.Data)
		if err != nil {
			return err
		}
		msgs, seqs = append(msgs, m), append(seqs, e.Seq)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return msgs, seqs
}

// Every stored event but the first carries SL-Prev, the hash of the body
// stored before it, whoever appended it: a caller passing PrevHash, one
// leaving it to the store's cached tail, one to a read (another store).
func TestChainPrevHeader(t *testing.T) {
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	st := open(t, nc, logstore.Config{})
	ctx := context.Background()
	r1, err := st.Append(ctx, logstore.AppendRequest{SessionID: "c1", Events: events("c1", 1, 1, "e")})
	if err != nil || r1.Hash == "" {
		t.Fatalf("append = %+v, %v", r1, err)
	}
	r2, err := st.Append(ctx, logstore.AppendRequest{SessionID: "c1", ExpectedStreamSeq: r1.StreamSeq, PrevHash: r1.Hash, Events: events("c1", 2, 3, "e")})
	if err != nil {
		t.Fatal(err)
	}
	// From the cached tail.
	r3, err := st.Append(ctx, logstore.AppendRequest{SessionID: "c1", ExpectedStreamSeq: r2.StreamSeq, Events: events("c1", 5, 1, "e")})
	if err != nil {
		t.Fatal(err)
	}
	// From a read: a store that never saw the session.
	other := open(t, nc, logstore.Config{})
	if _, err := other.Append(ctx, logstore.AppendRequest{SessionID: "c1", ExpectedStreamSeq: r3.StreamSeq, Events: events("c1", 6, 2, "e")}); err != nil {
		t.Fatal(err)
	}
	msgs, seqs := storedMsgs(t, st, "c1")
	if len(msgs) != 7 {
		t.Fatalf("%d messages, want 7", len(msgs))
	}
	if h := msgs[0].Header.Get(logstore.HeaderPrev); h != "" {
		t.Errorf("seq 1 carries %s %q, want none", logstore.HeaderPrev, h)
	}
	for i := 1; i < len(msgs); i++ {
		if got, want := msgs[i].Header.Get(logstore.HeaderPrev), logstore.ChainHash(msgs[i-1].Data); got != want || len(got) != 32 {
			t.Errorf("seq %d: %s = %q, want %q", seqs[i], logstore.HeaderPrev, got, want)
		}
	}
	if b := logstore.CheckChain(msgs, seqs); len(b) != 0 {
		t.Errorf("whole chain reported broken: %v", b)
	}
}

// CheckChain names each break: an event deleted in the middle (a gap
// at seq 3), a body changed (seq 2 changed), two swapped (reordered),
// alike for sealed bodies (the tamper opens and seals them again with the
// session's key). A sealed body changed without the key is not a link
// of the chain at all: it does not open, and the read answers
// unreadable. Events stored without SL-Prev (before the header) are
// accepted.
func TestChainBreaks(t *testing.T) { natstest.ForEachSealing(t, testChainBreaks) }

func testChainBreaks(t *testing.T, sealed bool) {
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	st := open(t, nc, logstore.Config{SealBodies: sealed})
	ctx := context.Background()
	want := map[string]string{tamper.BreakDelete: "gap@3", tamper.BreakChange: "changed@2", tamper.BreakSwap: "reordered@3"}
	kinds := tamper.BreakKinds
	if sealed {
		kinds = append(kinds, tamper.BreakGarble)
	}
	for _, how := range kinds {
		sid := "b-" + how
		if _, err := st.Append(ctx, logstore.AppendRequest{SessionID: sid, Events: events(sid, 1, 5, "e")}); err != nil {
			t.Fatal(err)
		}
		tamper.BreakChain(t, nc, "SESSIONS", logstore.SubjectPrefix+sid, how)
		if got := tamper.Sealed(t, nc, "SESSIONS", logstore.SubjectPrefix+sid); got != sealed {
			t.Fatalf("%s: stored sealed %v, want %v", how, got, sealed)
		}
		if how == tamper.BreakGarble {
			// A definite answer about the message, not a stalled read
			// that a retry may get past (a session of 8 events or less is
			// read by leader gets).
			_, err := st.ReadSession(ctx, sid, 0, func(*logstore.Msg) error { return nil })
			if schema.CodeOf(err) != schema.CodeUnreadable || !strings.Contains(fmt.Sprint(err), "does not open") || errors.Is(err, logstore.ErrReadStalled) {
				t.Errorf("%s: read %v, want unreadable: the body does not open", how, err)
			}
			// The judge's verdict, as on a body that does not decode: at
			// the message after seq 1.
			var ue *logstore.UnreadableError
			if err := st.FirstUnreadable(ctx, sid); !errors.As(err, &ue) || ue.Kind != logstore.KindUnopened || ue.AfterSeq != 1 {
				t.Errorf("%s: the judge finds %v, want the message after seq 1 unopened", how, err)
			}
			continue
		}
		breaks := logstore.CheckChain(storedMsgs(t, st, sid))
		if len(breaks) == 0 || fmt.Sprintf("%s@%d", breaks[0].Kind, breaks[0].Seq) != want[how] {
			t.Errorf("%s: breaks %v, want first %s", how, breaks, want[how])
		}
	}
	// Old events, stored by a writer older than the header: no SL-Prev,
	// nothing to check but the seqs.
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events("old", 1, 4, "e") {
		m := nats.NewMsg(logstore.SubjectPrefix + "old")
		m.Header.Set(logstore.HeaderSeq, strconv.FormatUint(e.Seq, 10))
		if m.Data, err = schema.Encode(&e); err != nil {
			t.Fatal(err)
		}
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if b := logstore.CheckChain(storedMsgs(t, st, "old")); len(b) != 0 {
		t.Errorf("old events: %v", b)
	}
}

// ChainSum is ChainHash unspelled: its String is ChainHash, Spells
// knows that spelling and no other, ParseChainSum reads it back and
// refuses what ChainHash never writes.
func TestChainSum(t *testing.T) {
	for _, body := range []string{"", "x", `{"schemaVersion":1}`} {
		s := logstore.ChainSumOf([]byte(body))
		h := logstore.ChainHash([]byte(body))
		if s.String() != h || !s.Spells(h) {
			t.Fatalf("%q: sum %s spells %v, ChainHash %s", body, s, s.Spells(h), h)
		}
		if got, ok := logstore.ParseChainSum(h); !ok || got != s {
			t.Fatalf("ParseChainSum(%s) = %s %v", h, got, ok)
		}
		if other := logstore.ChainHash([]byte(body + ".")); s.Spells(other) {
			t.Fatalf("%s spells %s", s, other)
		}
		for _, bad := range []string{"", "A" + h[1:], h[:31], h + "0", h[:31] + "g"} {
			if _, ok := logstore.ParseChainSum(bad); ok || s.Spells(bad) {
				t.Fatalf("%q: parsed %v, spelled by %s %v", bad, ok, s, s.Spells(bad))
			}
		}
	}
}
