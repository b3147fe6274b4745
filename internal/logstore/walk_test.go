package logstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/natstest/tamper"
)

// TestReadVerdicts: ReadVerdicts gives every stored message up to the
// tail with its verdict and goes on past the ones a read refuses: nil for
// an event, KindUnopened for a sealed body that does not open, KindGarbage
// for a plain body that is not an event, and once the key is gone
// ErrKeyGone for every sealed body, each with its body as stored.
func TestReadVerdicts(t *testing.T) {
	nc, st := sealedStore(t)
	ctx := context.Background()
	_, err := st.Append(ctx, logstore.AppendRequest{SessionID: "v", Events: events("v", 1, 4, "v")})
	if err != nil {
		t.Fatal(err)
	}
	tamper.BreakChainAt(t, nc, "SESSIONS", logstore.SubjectPrefix+"v", tamper.BreakGarble, 1)
	if _, err := natstest.JetStream(t, nc).Publish(ctx, logstore.SubjectPrefix+"v", []byte("not an event")); err != nil {
		t.Fatal(err)
	}
	var seqs []uint64 // the stream seqs of the first walk
	walk := func(after uint64) string {
		t.Helper()
		tail, _, err := st.TailPosition(ctx, "v")
		if err != nil && !errors.Is(err, logstore.ErrKeyGone) {
			t.Fatal(err)
		}
		var out []string
		if err := st.ReadVerdicts(ctx, "v", after, tail, func(m *logstore.Msg, verdict error) error {
			var ue *logstore.UnreadableError
			switch {
			case verdict == nil:
				out = append(out, "event")
			case errors.Is(verdict, logstore.ErrKeyGone):
				out = append(out, "gone")
			case errors.As(verdict, &ue):
				out = append(out, ue.Kind)
			default:
				out = append(out, verdict.Error())
			}
			if after == 0 && len(seqs) < 5 {
				seqs = append(seqs, m.StreamSeq)
			}
			if len(m.Data) == 0 {
				t.Errorf("stream seq %d: no body", m.StreamSeq)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return strings.Join(out, " ")
	}
	if got, want := walk(0), "event unopened event event garbage"; got != want {
		t.Errorf("walk = %q, want %q", got, want)
	}
	if got, want := walk(seqs[1]), "event event garbage"; got != want {
		t.Errorf("walk after 2 = %q, want %q", got, want)
	}
	if err := st.DropSessionRecords(ctx, "v"); err != nil {
		t.Fatal(err)
	}
	if got, want := walk(0), "gone gone gone gone garbage"; got != want {
		t.Errorf("walk with the key gone = %q, want %q", got, want)
	}
}
