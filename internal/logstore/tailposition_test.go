package logstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/natstest/tamper"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// TestTailPosition: TailPosition answers where a session's last stored
// message is, with Tail's verdict on it: Tail's own answer for an event,
// and for a message Tail refuses (a body that is not an event, an event
// of a newer schema without SL-Seq, a sealed body that does not open)
// its stream seq, the seq it claims, and the *UnreadableError, while
// Tail still refuses it.
func TestTailPosition(t *testing.T) {
	nc, st := sealedStore(t)
	ctx := context.Background()
	js := natstest.JetStream(t, nc)
	last := func() uint64 {
		t.Helper()
		n, err := st.LastStreamSeq(ctx, logstore.StreamName)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, id := range []string{"ok", "garbage", "newer", "unopened"} {
		if _, err := st.Append(ctx, logstore.AppendRequest{SessionID: id, Events: events(id, 1, 3, id)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.Publish(ctx, logstore.SubjectPrefix+"garbage", []byte("not an event")); err != nil {
		t.Fatal(err)
	}
	garbage := last()
	newerBody := fmt.Sprintf(`{"schemaVersion":%d,"sessionId":"newer","seq":4,"eventId":"newer-4","type":"session/closed","time":"2026-12-01T00:00:00Z"}`, schema.Version+1)
	if _, err := js.Publish(ctx, logstore.SubjectPrefix+"newer", []byte(newerBody)); err != nil {
		t.Fatal(err)
	}
	newer := last()
	tamper.BreakChainAt(t, nc, "SESSIONS", logstore.SubjectPrefix+"unopened", tamper.BreakGarble, 2)
	unopened := last()

	want, err := st.Tail(ctx, "ok")
	if err != nil {
		t.Fatal(err)
	}
	if got, ue, err := st.TailPosition(ctx, "ok"); got != want || ue != nil || err != nil {
		t.Errorf("ok: TailPosition = %+v, %v, %v; want Tail's %+v", got, ue, err, want)
	}
	if got, ue, err := st.TailPosition(ctx, "none"); got.Exists() || ue != nil || err != nil {
		t.Errorf("none: TailPosition = %+v, %v, %v; want no tail", got, ue, err)
	}
	for _, c := range []struct {
		id, kind       string
		streamSeq, seq uint64
	}{
		{"garbage", logstore.KindGarbage, garbage, 0},
		{"newer", logstore.KindNewer, newer, 0},
		{"unopened", logstore.KindUnopened, unopened, 3},
	} {
		got, ue, err := st.TailPosition(ctx, c.id)
		if err != nil || ue == nil || ue.Kind != c.kind || ue.StreamSeq != c.streamSeq || got != (logstore.Tail{Seq: c.seq, StreamSeq: c.streamSeq}) {
			t.Errorf("%s: TailPosition = %+v, %v, %v; want seq %d at stream seq %d, verdict %s", c.id, got, ue, err, c.seq, c.streamSeq, c.kind)
		}
		var tue *logstore.UnreadableError
		if _, err := st.Tail(ctx, c.id); !errors.As(err, &tue) || tue.Kind != c.kind {
			t.Errorf("%s: Tail = %v, want its verdict %s", c.id, err, c.kind)
		}
	}
}

// TestAppendAfterTailThatDoesNotOpen: Append with ExpectedStreamSeq at a
// session's last message whose sealed body does not open, no PrevHash
// and no cached tail, has no body to chain to: it answers the verdict on
// that message (code unreadable, the session and stream seq named) and
// stores nothing. Before, it stored the event without SL-Prev.
func TestAppendAfterTailThatDoesNotOpen(t *testing.T) {
	nc, st, tail := garbledTail(t)
	ctx := context.Background()
	// Another store: no cached tail.
	other := open(t, nc, logstore.Config{SealBodies: true})
	_, err := other.Append(ctx, logstore.AppendRequest{SessionID: "g", ExpectedStreamSeq: tail, Events: events("g", 4, 1, "g")})
	var ue *logstore.UnreadableError
	if !errors.As(err, &ue) || ue.Kind != logstore.KindUnopened || ue.StreamSeq != tail || schema.CodeOf(err) != schema.CodeUnreadable {
		t.Fatalf("Append after the tail that does not open: %v, want unreadable at stream seq %d: the sealed body does not open", err, tail)
	}
	if last, err := st.LastStreamSeq(ctx, logstore.StreamName); err != nil || last != tail {
		t.Fatalf("last stream seq %d (%v), want %d: nothing stored", last, err, tail)
	}
}

// garbledTail stores session g's three events sealed on a new server and
// changes a byte of the last one's stored body, so that it no longer
// opens: the connection, the store and the stream seq of that tail.
func garbledTail(t *testing.T) (*nats.Conn, *logstore.Store, uint64) {
	t.Helper()
	nc, st := sealedStore(t)
	ctx := context.Background()
	if _, err := st.Append(ctx, logstore.AppendRequest{SessionID: "g", Events: events("g", 1, 3, "g")}); err != nil {
		t.Fatal(err)
	}
	tamper.BreakChainAt(t, nc, "SESSIONS", logstore.SubjectPrefix+"g", tamper.BreakGarble, 2)
	tail, err := st.LastStreamSeq(ctx, logstore.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	return nc, st, tail
}

// TestTailPositionKeyGone: a session whose last message is a sealed body
// whose key is gone answers ErrKeyGone (erased, for a reader that serves
// it) beside that message's position (its stream seq and SL-Seq), so that
// a caller deleting it (the eraser) needs no read of its own; Tail still
// answers ErrKeyGone alone.
func TestTailPositionKeyGone(t *testing.T) {
	nc, st := sealedStore(t)
	ctx := context.Background()
	r, err := st.Append(ctx, logstore.AppendRequest{SessionID: "gone", Events: events("gone", 1, 3, "gone")})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DropSessionRecords(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	for _, reader := range []*logstore.Store{st, open(t, nc, logstore.Config{})} {
		got, ue, err := reader.TailPosition(ctx, "gone")
		if !errors.Is(err, logstore.ErrKeyGone) || schema.CodeOf(err) != schema.CodeErased || ue != nil || got != (logstore.Tail{Seq: 3, StreamSeq: r.StreamSeq}) {
			t.Errorf("TailPosition = %+v, %v, %v; want seq 3 at stream seq %d and ErrKeyGone", got, ue, err, r.StreamSeq)
		}
		if tail, err := reader.Tail(ctx, "gone"); !errors.Is(err, logstore.ErrKeyGone) || tail.Exists() {
			t.Errorf("Tail = %+v, %v; want ErrKeyGone and no tail", tail, err)
		}
	}
}

// sealedStore is a store that seals bodies, on a new server, and its
// connection.
func sealedStore(t *testing.T) (*nats.Conn, *logstore.Store) {
	t.Helper()
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	return nc, open(t, nc, logstore.Config{SealBodies: true})
}
