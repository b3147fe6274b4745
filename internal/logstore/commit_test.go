package logstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// take gathers the oldest send and every later send of another subject,
// within the limits; a subject already in the batch or passed over stays
// queued, in order.
func TestGroupCommitTake(t *testing.T) {
	msgs := func(subject string, n int) []*nats.Msg {
		out := make([]*nats.Msg, n)
		for i := range out {
			out[i] = &nats.Msg{Subject: subject, Data: []byte("x")}
		}
		return out
	}
	c := &committer{}
	q := func(subject string, n int) *pendingSend {
		p := newPending(msgs(subject, n))
		c.queue = append(c.queue, p)
		return p
	}
	a1, b1, a2, big, c1, d1 := q("a", 1), q("b", 3), q("a", 1), q("big", groupMaxMsgs), q("c", 2), q("d", 1)
	b2 := q("b", 1)
	got := c.take()
	if want := []*pendingSend{a1, b1, c1, d1}; !slices.Equal(got, want) {
		t.Fatalf("first batch %v, want %v", subjects(got), subjects(want))
	}
	if want := []*pendingSend{a2, big, b2}; !slices.Equal(c.queue, want) {
		t.Fatalf("queued %v, want %v", subjects(c.queue), subjects(want))
	}
	// A batch of 1+groupMaxMsgs would be over the limit: big waits, b2 is
	// taken past it.
	if got := c.take(); !slices.Equal(got, []*pendingSend{a2, b2}) {
		t.Fatalf("second batch %v, want a/1 b/1", subjects(got))
	}
	if got := c.take(); !slices.Equal(got, []*pendingSend{big}) || len(c.queue) != 0 {
		t.Fatalf("third batch %v, queued %v", subjects(got), subjects(c.queue))
	}
}

func subjects(ps []*pendingSend) string {
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%s/%d", p.subject, len(p.msgs)))
	}
	return strings.Join(out, " ")
}

// groupStore is a store on a server that fsyncs before it acknowledges,
// as sessionlog ships it, with one event stored in each of sessions.
func groupStore(t *testing.T, sessions ...string) (*Store, map[string]uint64) {
	t.Helper()
	o := natstest.Options(t.TempDir())
	o.SyncAlways = true
	srv, err := natstest.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	st, err := Open(context.Background(), natstest.Connect(t, srv), Config{})
	if err != nil {
		t.Fatal(err)
	}
	tails := map[string]uint64{}
	for _, sid := range sessions {
		r, err := st.Append(context.Background(), AppendRequest{SessionID: sid, Events: EventsForTest(sid, 1, 1, "e")})
		if err != nil {
			t.Fatal(err)
		}
		tails[sid] = r.StreamSeq
	}
	return st, tails
}

// EventsForTest are n events of session sid from seq from, with ids
// prefix-<seq> (the first of a session a session/created); the external
// tests use them too.
func EventsForTest(sid string, from uint64, n int, prefix string) []schema.Envelope {
	out := make([]schema.Envelope, n)
	for i := range out {
		seq := from + uint64(i)
		typ, data := schema.TypeMessageUser, `{"content":"hi"}`
		if seq == 1 {
			typ, data = schema.TypeSessionCreated, `{}`
		}
		out[i] = schema.Envelope{SchemaVersion: schema.Version, SessionID: sid, Seq: seq, EventID: fmt.Sprintf("%s-%d", prefix, seq),
			Time: time.Now().UTC(), Type: typ, Data: []byte(data)}
	}
	return out
}

// One batch of several sessions stores each session's messages
// contiguously and answers each send with its own last stream seq.
func TestGroupCommitBatch(t *testing.T) {
	st, tails := groupStore(t, "g1", "g2", "g3")
	ctx := context.Background()
	var batch []*pendingSend
	for i, sid := range []string{"g1", "g2", "g3"} {
		msgs, err := st.Messages(&AppendRequest{SessionID: sid, ExpectedStreamSeq: tails[sid], Events: EventsForTest(sid, 2, i+1, "e")})
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, newPending(msgs))
	}
	st.committerFor("SESSIONS").sendBatch(batch)
	for i, sid := range []string{"g1", "g2", "g3"} {
		r := <-batch[i].done
		if r.err != nil || r.dup {
			t.Fatalf("%s: %+v", sid, r)
		}
		m, err := st.MsgAt(ctx, "SESSIONS", r.streamSeq)
		if err != nil || m == nil || m.Subject != SubjectPrefix+sid || eventIDOf(m.Header.Get(HeaderMsgID)) != fmt.Sprintf("e-%d", i+2) {
			t.Fatalf("%s: stream seq %d holds %+v, %v", sid, r.streamSeq, m, err)
		}
	}
}

// A batch refused whole (one session's expectation wrong, another's event
// stored already) is sent again at once, each append alone: every send gets
// the answer it would have had alone, and the wrong one stores nothing.
func TestGroupCommitRefusedAnswersEach(t *testing.T) {
	st, tails := groupStore(t, "ok1", "wrong", "dup", "ok3")
	ctx := context.Background()
	reqs := []AppendRequest{
		{SessionID: "ok1", ExpectedStreamSeq: tails["ok1"], Events: EventsForTest("ok1", 2, 1, "e")},
		{SessionID: "wrong", ExpectedStreamSeq: tails["wrong"] + 100, Events: EventsForTest("wrong", 2, 1, "e")},
		// Its stored event again: JetStream's duplicate window knows it.
		{SessionID: "dup", ExpectedStreamSeq: 0, Events: EventsForTest("dup", 1, 1, "e")},
		{SessionID: "ok3", ExpectedStreamSeq: tails["ok3"], Events: EventsForTest("ok3", 2, 3, "e")},
	}
	var batch []*pendingSend
	for i := range reqs {
		msgs, err := st.Messages(&reqs[i])
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, newPending(msgs))
	}
	st.committerFor("SESSIONS").sendBatch(batch)
	got := make([]sendResult, len(batch))
	for i := range batch {
		got[i] = <-batch[i].done
	}
	if got[0].err != nil || got[3].err != nil {
		t.Fatalf("the good appends: %+v, %+v", got[0], got[3])
	}
	if classify(got[1].err) != wrongSeq {
		t.Fatalf("wrong expectation: %+v, want wrong last sequence", got[1])
	}
	// The stored event again gets the answer it gets alone (the wrong
	// expectation first: Append resolves it from the log).
	_, aloneDup, aloneErr := st.publish(ctx, batch[2].msgs)
	if classify(got[2].err) != classify(aloneErr) || got[2].dup != aloneDup {
		t.Fatalf("stored event again: %+v (%v), alone %v %v", got[2], got[2].err, aloneDup, aloneErr)
	}
	for _, sid := range []string{"ok1", "wrong", "ok3"} {
		tail, err := st.Tail(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]uint64{"ok1": 2, "wrong": 1, "ok3": 4}[sid]; tail.Seq != want {
			t.Errorf("%s: last seq %d, want %d", sid, tail.Seq, want)
		}
	}
}

// Many sessions appending at once through Append: every session's events
// are stored once each, in order, and a session whose expectation is
// wrong gets its conflict while the others commit.
func TestGroupCommitConcurrentAppends(t *testing.T) {
	const sessions, rounds = 48, 8
	var sids []string
	for g := range sessions {
		sids = append(sids, fmt.Sprintf("c%d", g))
	}
	st, tails := groupStore(t, sids...)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for g, sid := range sids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			exp := tails[sid]
			for r := range rounds {
				seq := uint64(2 + r)
				if g%8 == 0 && r == rounds/2 {
					// A stale expectation: conflict, nothing stored.
					_, err := st.Append(ctx, AppendRequest{SessionID: sid, ExpectedStreamSeq: exp - 1, Events: EventsForTest(sid, seq, 1, "stale")})
					if _, ok := err.(*ConflictError); !ok {
						errs <- fmt.Errorf("%s: stale append: %v, want a conflict", sid, err)
						return
					}
				}
				res, err := st.Append(ctx, AppendRequest{SessionID: sid, ExpectedStreamSeq: exp, Events: EventsForTest(sid, seq, 1, "e")})
				if err != nil || res.Duplicate {
					errs <- fmt.Errorf("%s seq %d: %+v, %v", sid, seq, res, err)
					return
				}
				exp = res.StreamSeq
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	batches, appends, refused := st.GroupCommitStats()
	t.Logf("%d appends in %d sends, %d refused whole", appends, batches, refused)
	for _, sid := range sids {
		var seqs []uint64
		if _, err := st.ReadSession(ctx, sid, 0, func(m *Msg) error {
			seq, _ := seqOfMsg(m)
			seqs = append(seqs, seq)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(seqs) != 1+rounds {
			t.Fatalf("%s: seqs %v", sid, seqs)
		}
		for i, s := range seqs {
			if s != uint64(i+1) {
				t.Fatalf("%s: seqs %v", sid, seqs)
			}
		}
	}
}
