package writer_test

import (
	"context"
	"testing"

	"github.com/sessionlog/sessionlog/internal/logstore"
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
