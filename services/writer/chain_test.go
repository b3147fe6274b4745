package writer_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/writer"
)

// The writer chains what it appends (SL-Prev from its cached state), alone
// and in batches, after a fold and after its own appends.
func TestChainPrevWriter(t *testing.T) {
	e := newEnv(t, envOpts{})
	mustOK(t, e.nc, map[string]any{"sessionId": "w1", "events": events(created(), userEv("u1", "one"))})
	mustOK(t, e.nc, map[string]any{"sessionId": "w1", "events": events(userEv("u2", "two"))})
	// A writer that folds the session first.
	cold, err := writer.New(writer.Config{Store: e.st, Conn: e.nc})
	if err != nil {
		t.Fatal(err)
	}
	if r := direct(t, cold)(map[string]any{"sessionId": "w1", "events": events(userEv("u3", "three"), userEv("u4", "four"))}); r.err != nil {
		t.Fatal(r.err)
	}
	var msgs []*logstore.Msg
	var seqs []uint64
	if _, err := e.st.ReadSession(context.Background(), "w1", 0, func(m *logstore.Msg) error {
		ev, err := schema.Decode(m.Data)
		msgs, seqs = append(msgs, m), append(seqs, ev.Seq)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for i, m := range msgs {
		if h := m.Header.Get(logstore.HeaderPrev); (h == "") != (i == 0) {
			t.Errorf("seq %d: %s %q", seqs[i], logstore.HeaderPrev, h)
		}
	}
	if len(msgs) != 5 || len(logstore.CheckChain(msgs, seqs)) != 0 {
		t.Fatalf("%d messages, breaks %v", len(msgs), logstore.CheckChain(msgs, seqs))
	}
}

// A session whose stored chain is broken (an event deleted in the middle,
// a body changed, two swapped) is unreadable to a writer that folds it,
// and the answer names the break.
func TestChainBreakWriter(t *testing.T) {
	e := newEnv(t, envOpts{})
	want := map[string]string{natstest.BreakDelete: "gap", natstest.BreakChange: "changed", natstest.BreakSwap: "gap"}
	for _, how := range natstest.BreakKinds {
		t.Run(how, func(t *testing.T) {
			sid := "broken-" + how
			mustOK(t, e.nc, map[string]any{"sessionId": sid, "events": events(created(), userEv("u1", "one"), userEv("u2", "two"), userEv("u3", "three"))})
			natstest.BreakChain(t, e.nc, "SESSIONS", logstore.SubjectPrefix+sid, how)
			cold, err := writer.New(writer.Config{Store: e.st, Conn: e.nc})
			if err != nil {
				t.Fatal(err)
			}
			r := direct(t, cold)(map[string]any{"sessionId": sid, "events": events(userEv("next", "x"))})
			if r.err == nil || r.err.Code != schema.CodeUnreadable || !strings.Contains(r.err.Message, "hash chain broken") || !strings.Contains(r.err.Message, want[how]) {
				t.Fatalf("got %+v %+v, want unreadable naming a %s in the hash chain", r.ok, r.err, want[how])
			}
			t.Log(r.err.Message)
		})
	}
}
