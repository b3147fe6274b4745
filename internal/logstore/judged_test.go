package logstore_test

import (
	"context"
	"slices"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/natstest/tamper"
)

// A judge reading a session from its start notes the prefix it accepted
// (JudgedThrough); a batch from an event within it, with the subject's
// count read before it, shows that prefix whole (PrefixJudged) until a
// message before the batch's lead is deleted, and never for a lead past
// the prefix. A copy in the session (two messages for one seq) is noted
// with the prefix, and counted before the events after it.
// Alike with sealed bodies (the copy's body sealed again with the
// session's key, as a store that seals writes it).
func TestPrefixJudged(t *testing.T) { natstest.ForEachSealing(t, testPrefixJudged) }

func testPrefixJudged(t *testing.T, sealed bool) {
	ctx := context.Background()
	const sid = "judged"
	nc, st, want, tail := interleavedOnOneNodeWith(t, logstore.Config{SealBodies: sealed}, sid, 6, 5) // 30 events
	if _, ok := st.JudgedThrough(sid); ok {
		t.Fatal("a prefix judged before any judge read")
	}
	if err := st.FirstUnreadable(ctx, sid); err != nil {
		t.Fatal(err)
	}
	judged, ok := st.JudgedThrough(sid)
	if !ok || judged.Tail != tail {
		t.Fatalf("judged through %+v %v, want the tail %+v", judged, ok, tail)
	}
	count, err := st.StoredCount(ctx, sid)
	if err != nil || count.N != uint64(len(want)) {
		t.Fatalf("count %+v %v, want %d", count, err, len(want))
	}
	holds := func(after uint64, count logstore.Count) bool {
		t.Helper()
		c, err := st.ReadChained(ctx, sid, tail, after, 2, 0)
		if err != nil {
			t.Fatalf("after %d: %v", after, err)
		}
		return c.PrefixJudged(judged, after, count)
	}
	for _, after := range []uint64{1, 2, 10, 29} {
		if !holds(after, count) {
			t.Errorf("after %d: the prefix is not shown whole", after)
		}
		less, more := count, count
		less.N--
		more.N++
		if holds(after, less) || holds(after, more) {
			t.Errorf("after %d: another count shows the prefix whole", after)
		}
	}
	if (logstore.Chained{}).PrefixJudged(judged, 10, count) {
		t.Error("a batch without its answer's count shows the prefix whole")
	}
	short := judged
	short.Seq, short.StreamSeq = 9, 0
	if c, _ := st.ReadChained(ctx, sid, tail, 10, 4, 0); c.PrefixJudged(short, 10, count) {
		t.Error("a lead past the judged prefix shows it whole")
	}

	// Delete event 5: every batch led from event 6 on sees it.
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, "SESSIONS")
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(logstore.SubjectPrefix+sid))
	if err != nil {
		t.Fatal(err)
	}
	seq := m.Sequence
	for i := 1; i < 5; i++ {
		if m, err = s.GetMsg(ctx, seq+1, jetstream.WithGetMsgSubject(logstore.SubjectPrefix+sid)); err != nil {
			t.Fatal(err)
		}
		seq = m.Sequence
	}
	if err := s.DeleteMsg(ctx, seq); err != nil {
		t.Fatal(err)
	}
	if count, err = st.StoredCount(ctx, sid); err != nil || count.N != uint64(len(want)-1) {
		t.Fatalf("count after the delete %+v %v", count, err)
	}
	for _, after := range []uint64{6, 10, 29} {
		if holds(after, count) {
			t.Errorf("after %d: the prefix shown whole with event 5 deleted", after)
		}
	}
	if !holds(2, count) {
		t.Error("after 2: the prefix before the deleted event is not shown whole")
	}

	// A copy of event 3, then events 4..6: the judge reads the session
	// and notes the prefix with the copy, which counts before every event
	// after it.
	copied := "copied"
	appendRun(t, st, copied, 3)
	tamper.Copy(t, nc, "SESSIONS", logstore.SubjectPrefix+copied)
	if got := tamper.Sealed(t, nc, "SESSIONS", logstore.SubjectPrefix+copied); got != sealed {
		t.Fatalf("the copied session stored sealed %v, want %v", got, sealed)
	}
	appendRun(t, st, copied, 3)
	if err := st.FirstUnreadable(ctx, copied); err != nil {
		t.Fatalf("a copy judged %v", err)
	}
	judged, ok = st.JudgedThrough(copied)
	if !ok || judged.Seq != 6 || !slices.Equal(judged.Copies, []uint64{3}) {
		t.Fatalf("judged through %+v %v, want seq 6 with a copy of 3", judged, ok)
	}
	if count, err = st.StoredCount(ctx, copied); err != nil || count.N != 7 {
		t.Fatalf("count %+v %v, want 7", count, err)
	}
	tail, err = st.Tail(ctx, copied)
	if err != nil {
		t.Fatal(err)
	}
	// (A batch led by event 3 meets its copy: ReadChained refuses it.)
	for _, after := range []uint64{1, 2, 4, 5} {
		c, err := st.ReadChained(ctx, copied, tail, after, 1, 0)
		if err != nil {
			t.Fatalf("after %d: %v", after, err)
		}
		less := count
		less.N--
		if !c.PrefixJudged(judged, after, count) || c.PrefixJudged(judged, after, less) {
			t.Errorf("after %d: the prefix with a copy is not told whole by its count", after)
		}
	}
}

// A prefix judged in a stream that was deleted and made again under the
// same name is not trusted there: stream seqs start over, so the new
// stream can hold, at the same stream seqs and in the same number, messages
// the judge never read (here a message that is not an event, in event 3's
// place). The session's first message, kept with the prefix, tells the
// two streams apart.
func TestPrefixJudgedStreamMadeAgain(t *testing.T) {
	ctx := context.Background()
	const sid, n = "remade", 20
	nc := natstest.Connect(t, natstest.RunServer(t))
	st := open(t, nc, logstore.Config{})
	appendRun(t, st, sid, n)
	if err := st.FirstUnreadable(ctx, sid); err != nil {
		t.Fatal(err)
	}
	judged, ok := st.JudgedThrough(sid)
	if !ok || judged.Seq != n {
		t.Fatalf("judged through %+v %v, want seq %d", judged, ok, n)
	}
	holds := func(st *logstore.Store) bool {
		t.Helper()
		tail, err := st.Tail(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		count, err := st.StoredCount(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		c, err := st.ReadChained(ctx, sid, tail, 10, 2, 0)
		if err != nil {
			t.Fatal(err)
		}
		return c.PrefixJudged(judged, 10, count)
	}
	if !holds(st) {
		t.Fatal("the prefix is not shown whole in the stream it was judged in")
	}

	// The stream made again; the session written anew: events 1 and 2,
	// a message that is not an event, events 4..n. Same count, same
	// stream seqs for each event from 4 on.
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(ctx, "SESSIONS"); err != nil {
		t.Fatal(err)
	}
	again := open(t, nc, logstore.Config{})
	if _, err := again.Append(ctx, logstore.AppendRequest{SessionID: sid, Events: events(sid, 1, 2, "f")}); err != nil {
		t.Fatal(err)
	}
	pa, err := js.Publish(ctx, logstore.SubjectPrefix+sid, []byte("not an event"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := again.Append(ctx, logstore.AppendRequest{SessionID: sid, ExpectedStreamSeq: pa.Sequence, Events: events(sid, 4, n-3, "f")}); err != nil {
		t.Fatal(err)
	}
	if err := again.FirstUnreadable(ctx, sid); err == nil {
		t.Fatal("the judge reads the session made again whole")
	}
	if holds(st) {
		t.Fatal("a prefix judged in the deleted stream is shown whole in the one made again")
	}
}
