package writer_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/writer"
)

// An event appended between the read API's count of the session's
// messages and its batch makes the count look short of the judged prefix
// (logstore.Chained.PrefixJudged): the page counts again and reads the
// batch again, and is served from it, not by the judge reading the
// session from its start. The append is made inside the count
// (logstore.FaultCounted), so the race happens on every run.
//
// Which of the two served the page shows in the judged prefix the store
// keeps: a batch notes a prefix only when it is longer than the one known
// (the whole session, judged before the page), while the judge reading
// from the start records where it stopped, the page's end.
func TestReadRetriesCountRacedByAppend(t *testing.T) {
	const sid, n = "count-race", 30
	var (
		w       atomic.Pointer[writer.Service]
		armed   atomic.Bool
		counts  atomic.Int32
		hookErr = make(chan error, 1)
	)
	e := newEnv(t, envOpts{store: logstore.Config{FaultHook: func(s logstore.FaultStage) error {
		if s != logstore.FaultCounted || !armed.Load() {
			return nil
		}
		if counts.Add(1) == 1 {
			body, _ := json.Marshal(map[string]any{"sessionId": sid, "expectedSeq": n, "events": events(ev(schema.TypeTurnStarted, "turnId", "raced"))})
			_, err := w.Load().Append(context.Background(), body)
			hookErr <- err
		}
		return nil
	}}})
	w.Store(e.w)
	page := judgedThenRead(t, e, sid, n, &armed)
	select {
	case err := <-hookErr:
		if err != nil {
			t.Fatalf("the append inside the count: %v", err)
		}
	default:
		t.Fatal("the count was not read: no append raced it")
	}
	if page.LastSeq != n && page.LastSeq != n+1 {
		t.Fatalf("lastSeq %d", page.LastSeq)
	}
	if c := counts.Load(); c != 2 {
		t.Errorf("the session's messages counted %d times, want 2 (the count and its retry)", c)
	}
	if j, _ := e.st.JudgedThrough(sid); j.Seq < n {
		t.Errorf("judged through seq %d after the page: the judge read the session from its start, not the batch read again", j.Seq)
	}
}

// A session whose stream was deleted and made again under the same name,
// holding at the same stream seqs and in the same number messages the
// judge never read (a message that is not an event in event 3's place),
// is read as the judge finds it, unreadable, though a reader of the same
// store judged a prefix of the session in the old stream: its first
// message now is another.
func TestReadStreamMadeAgain(t *testing.T) {
	ctx := context.Background()
	const sid, n = "remade", 20
	nc := natstest.Connect(t, natstest.RunServer(t))
	st, err := logstore.Open(ctx, nc, logstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gen.Seed(ctx, st, sid, n, n); err != nil {
		t.Fatal(err)
	}
	r := writer.StoreReader{Store: st}
	if p, err := r.Read(ctx, writer.ReadRequest{SessionID: sid}); err != nil || len(p.Events) != n {
		t.Fatalf("%d events, %v", len(p.Events), err)
	}
	old, ok := st.JudgedThrough(sid)
	if !ok || old.Seq != n {
		t.Fatalf("judged through %+v %v, want seq %d", old, ok, n)
	}

	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(ctx, "SESSIONS"); err != nil {
		t.Fatal(err)
	}
	again, err := logstore.Open(ctx, nc, logstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var evs []schema.Envelope
	if err := gen.Exact(sid, n, func(e schema.Envelope) error { evs = append(evs, e); return nil }); err != nil {
		t.Fatal(err)
	}
	evs[0].EventID = "made-again" // else the same bytes as the old stream's
	if _, err := again.Append(ctx, logstore.AppendRequest{SessionID: sid, Events: evs[:2]}); err != nil {
		t.Fatal(err)
	}
	pa, err := js.Publish(ctx, logstore.SubjectPrefix+sid, []byte("not an event"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := again.Append(ctx, logstore.AppendRequest{SessionID: sid, ExpectedStreamSeq: pa.Sequence, Events: evs[3:]}); err != nil {
		t.Fatal(err)
	}
	for _, after := range []uint64{10, n} {
		// Each read that judges anew records the new stream's prefix:
		// the old one is put back for the next.
		st.NoteJudged(sid, old)
		_, err := r.Read(ctx, writer.ReadRequest{SessionID: sid, AfterSeq: after, Limit: 5})
		var u *logstore.UnreadableError
		if !errors.As(err, &u) || u.StreamSeq != pa.Sequence {
			t.Errorf("after %d: %v, want the session unreadable at stream seq %d", after, err, pa.Sequence)
		}
	}
}

// Pages past an exact copy of an event (a publish retried past the
// duplicate window stores one; every reader skips it) are served from a
// batch over the prefix judged through the copy, whose count holds the
// copy, not by the judge reading the session from its start each time.
// A page whose lead the copy follows is read through the judge.
//
// As in TestReadRetriesCountRacedByAppend, the judged prefix tells which
// served a page: a batch never shortens it, the judge reading from the
// start records where it stopped.
func TestReadPastACopy(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	const sid, n, copied = "past-copy", 30, 10
	var evs []schema.Envelope
	if err := gen.Exact(sid, n, func(e schema.Envelope) error { evs = append(evs, e); return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Append(ctx, logstore.AppendRequest{SessionID: sid, Events: evs[:copied]}); err != nil {
		t.Fatal(err)
	}
	tail, err := e.st.Tail(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	m, err := e.st.MsgAt(ctx, "SESSIONS", tail.StreamSeq)
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(e.nc)
	if err != nil {
		t.Fatal(err)
	}
	// The body alone, without the Nats-Msg-Id the stream would drop as a
	// duplicate: the judge takes it as a copy of the event.
	pa, err := js.Publish(ctx, logstore.SubjectPrefix+sid, m.Data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Append(ctx, logstore.AppendRequest{SessionID: sid, ExpectedStreamSeq: pa.Sequence, Events: evs[copied:]}); err != nil {
		t.Fatal(err)
	}
	if err := e.st.FirstUnreadable(ctx, sid); err != nil {
		t.Fatal(err)
	}
	if j, ok := e.st.JudgedThrough(sid); !ok || j.Seq != n {
		t.Fatalf("judged through %+v %v, want seq %d with the copy", j, ok, n)
	}
	const limit = 5
	page := func(after uint64) {
		t.Helper()
		p, err := e.w.Read(ctx, writer.ReadRequest{SessionID: sid, AfterSeq: after, Limit: limit})
		if err != nil {
			t.Fatalf("after %d: %v", after, err)
		}
		checkRun(t, seqs(t, p.Events), after+1, limit)
		if !p.More || p.LastSeq != n {
			t.Fatalf("after %d: more %v lastSeq %d", after, p.More, p.LastSeq)
		}
	}
	for _, after := range []uint64{copied + 1, 20} {
		page(after)
		if j, _ := e.st.JudgedThrough(sid); j.Seq != n {
			t.Errorf("after %d: judged through seq %d, want %d: the judge read the session from its start", after, j.Seq, n)
		}
	}
	if p, err := e.w.Read(ctx, writer.ReadRequest{SessionID: sid, AfterSeq: n}); err != nil || len(p.Events) != 0 || p.More {
		t.Fatalf("after the tail: %+v %v", p, err)
	}
	page(copied)
}

// A page whose batch came in more than one answer (a replica behind the
// leader answered it, here made so by logstore.FaultBatch, and the leader
// completed it) has no count of its own: its batch is read once more,
// and the page served from that one when it is whole, not by the judge
// reading the session from its start. As in
// TestReadRetriesCountRacedByAppend, the judged prefix tells which served
// it.
func TestReadRetriesBatchCompletedByLeader(t *testing.T) {
	const sid, n = "leader-completed", 30
	var armed atomic.Bool
	var batches atomic.Int32
	e := newEnv(t, envOpts{store: logstore.Config{FaultHook: func(s logstore.FaultStage) error {
		if s == logstore.FaultBatch && armed.Load() && batches.Add(1) == 1 {
			return errors.New("injected: a replica behind the leader")
		}
		return nil
	}}})
	if page := judgedThenRead(t, e, sid, n, &armed); page.LastSeq != n {
		t.Fatalf("lastSeq %d", page.LastSeq)
	}
	if b := batches.Load(); b != 2 {
		t.Errorf("%d batches read, want 2 (the one the leader completed and its retry)", b)
	}
	if j, _ := e.st.JudgedThrough(sid); j.Seq != n {
		t.Errorf("judged through seq %d after the page, want %d: the judge read the session from its start", j.Seq, n)
	}
}

// judgedThenRead stores sid of n events, has the judge read it whole
// (the store then knows it judged through n), and reads its page of 5
// events after seq 10 with armed set, which it checks holds those.
func judgedThenRead(t *testing.T, e *env, sid string, n int, armed *atomic.Bool) writer.ReadReply {
	t.Helper()
	ctx := context.Background()
	if _, err := gen.Seed(ctx, e.st, sid, n, n); err != nil {
		t.Fatal(err)
	}
	if err := e.st.FirstUnreadable(ctx, sid); err != nil {
		t.Fatal(err)
	}
	if j, ok := e.st.JudgedThrough(sid); !ok || j.Seq != uint64(n) {
		t.Fatalf("judged through %+v %v, want seq %d", j, ok, n)
	}
	const after, limit = 10, 5
	armed.Store(true)
	page, err := e.w.Read(ctx, writer.ReadRequest{SessionID: sid, AfterSeq: after, Limit: limit})
	armed.Store(false)
	if err != nil {
		t.Fatal(err)
	}
	checkRun(t, seqs(t, page.Events), after+1, limit)
	if !page.More {
		t.Fatal("no more after the page")
	}
	return page
}
