package writer_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/natstest/tamper"
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
// and the answer names the break; alike with sealed bodies, which the
// tamper opens and seals again with the session's key. A sealed body
// changed without the key names no break of the chain: it does not open,
// so the session is unreadable for that reason.
func TestChainBreakWriter(t *testing.T) { natstest.ForEachSealing(t, testChainBreakWriter) }

func testChainBreakWriter(t *testing.T, sealed bool) {
	e := newEnv(t, envOpts{store: logstore.Config{SealBodies: sealed}})
	want := map[string][]string{tamper.BreakDelete: {"hash chain broken", "gap"}, tamper.BreakChange: {"hash chain broken", "changed"},
		tamper.BreakSwap: {"hash chain broken", "gap"}, tamper.BreakGarble: {"the sealed body does not open"}}
	kinds := tamper.BreakKinds
	if sealed {
		kinds = append(kinds, tamper.BreakGarble)
	}
	for _, how := range kinds {
		t.Run(how, func(t *testing.T) {
			sid := "broken-" + how
			mustOK(t, e.nc, map[string]any{"sessionId": sid, "events": events(created(), userEv("u1", "one"), userEv("u2", "two"), userEv("u3", "three"))})
			tamper.BreakChain(t, e.nc, "SESSIONS", logstore.SubjectPrefix+sid, how)
			if got := tamper.Sealed(t, e.nc, "SESSIONS", logstore.SubjectPrefix+sid); got != sealed {
				t.Fatalf("stored sealed %v, want %v", got, sealed)
			}
			cold, err := writer.New(writer.Config{Store: e.st, Conn: e.nc})
			if err != nil {
				t.Fatal(err)
			}
			r := direct(t, cold)(map[string]any{"sessionId": sid, "events": events(userEv("next", "x"))})
			if r.err == nil || r.err.Code != schema.CodeUnreadable {
				t.Fatalf("got %+v %+v, want unreadable", r.ok, r.err)
			}
			for _, w := range want[how] {
				if !strings.Contains(r.err.Message, w) {
					t.Fatalf("unreadable %q does not say %q", r.err.Message, w)
				}
			}
			t.Log(r.err.Message)
		})
	}
}
