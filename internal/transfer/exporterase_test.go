package transfer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/otelexport"
	"github.com/sessionlog/sessionlog/internal/otelexport/otlptest"
	"github.com/sessionlog/sessionlog/internal/transfer"
	"github.com/sessionlog/sessionlog/internal/writertest"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// appendSession appends events to session id through the writer, as many
// a request as fit.
func appendSession(t *testing.T, cl *client.Client, id string, events []schema.Envelope) {
	t.Helper()
	for len(events) > 0 {
		n, size := 0, 0
		for n < len(events) && n < 500 && size+len(events[n].Data) < 256<<10 {
			size += len(events[n].Data)
			n++
		}
		if _, err := cl.Append(context.Background(), client.AppendRequest{SessionID: id, Events: events[:n]}); err != nil {
			t.Fatal(err)
		}
		events = events[n:]
	}
}

func event(typ, turn, data string) schema.Envelope {
	return schema.Envelope{Type: typ, TurnID: turn, Data: json.RawMessage(data)}
}

// turnsSession is a session of n turns, each a turn/started and its
// turn/ended: a span each.
func turnsSession(n int) []schema.Envelope {
	evs := []schema.Envelope{event(schema.TypeSessionCreated, "", `{}`)}
	for i := range n {
		tid := fmt.Sprintf("t%d", i)
		evs = append(evs, event(schema.TypeTurnStarted, tid, `{}`), event(schema.TypeTurnEnded, tid, `{"reason":"completed"}`))
	}
	return evs
}

// erasingWriter is stdout that erases (writes the erasure record of)
// session id on its first write, then takes the bytes.
type erasingWriter struct {
	bytes.Buffer
	once  sync.Once
	erase func()
}

func (w *erasingWriter) Write(p []byte) (int, error) {
	w.once.Do(w.erase)
	return w.Buffer.Write(p)
}

// markErased writes session id's erasure record, as an erase does before
// it deletes anything.
func markErased(t *testing.T, st *logstore.Store, id string) {
	if _, _, err := st.MarkErased(context.Background(), logstore.Erasure{SessionID: id, By: "test", Reason: "erased during the export", ErasedAt: "2026-12-07T00:00:00Z"}); err != nil {
		t.Error(err)
	}
}

// An export, the operator's (from the store) and an agent's (through the
// read API), JSON lines and --to otlp, leaves out a session erased during
// its second read (its erasure record written then) and goes on: it says
// so, with how many of the session's lines or spans went out before it
// learned it, counts it in the summary, ends without error, and writes or
// sends nothing more of it: of its lines, only the first write's (the
// export's buffer, written when full, erased during that write); of its
// spans, only the first request's, which the collector held while the
// session was erased. The session after it is exported whole.
func TestExportLeavesOutSessionErasedDuringIt(t *testing.T) {
	k := writertest.New(t, logstore.Config{})
	ctx := context.Background()
	exports := []struct {
		name  string
		lines func(ids []string, stdout, stderr io.Writer) error
		otlp  func(ids []string, exp *otlptest.Receiver, stderr io.Writer) error
	}{
		{"operator", func(ids []string, stdout, stderr io.Writer) error {
			return transfer.Export(ctx, k.St, ids, true, stdout, stderr)
		}, func(ids []string, rcv *otlptest.Receiver, stderr io.Writer) error {
			exp := otlpExporter(t, rcv)
			return transfer.ExportOTLP(ctx, k.St, ids, true, exp, rcv.URL, stderr)
		}},
		{"agent", func(ids []string, stdout, stderr io.Writer) error {
			return transfer.ExportRead(ctx, k.Cl, ids, true, stdout, stderr)
		}, func(ids []string, rcv *otlptest.Receiver, stderr io.Writer) error {
			exp := otlpExporter(t, rcv)
			return transfer.ExportOTLPRead(ctx, k.Cl, ids, true, exp, rcv.URL, stderr)
		}},
	}
	pad := strings.Repeat("x", 20000)
	for _, x := range exports {
		t.Run(x.name+" JSON lines", func(t *testing.T) {
			// Some 4 MB of lines: more than three times what the
			// export's buffer (1 MiB) holds, so that it writes out a
			// part of the session during its second read after the
			// write that erases it.
			big, after := "big-"+x.name, "after-"+x.name
			evs := []schema.Envelope{event(schema.TypeSessionCreated, "", `{}`)}
			for range 199 {
				evs = append(evs, event(schema.TypeMessageUser, "", `{"content":"`+pad+`"}`))
			}
			appendSession(t, k.Cl, big, evs)
			appendSession(t, k.Cl, after, turnsSession(1))
			var stderr bytes.Buffer
			out := &erasingWriter{erase: func() { markErased(t, k.St, big) }}
			if err := x.lines([]string{big, after}, out, &stderr); err != nil {
				t.Fatalf("export: %v\n%s", err, stderr.String())
			}
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			n := 0
			for n < len(lines) && strings.Contains(lines[n], `"sessionId":"`+big+`"`) {
				n++
			}
			if n == 0 || n >= len(evs) || len(lines) != n+3 {
				t.Fatalf("the export wrote %d lines, the first %d of %s (of its %d events); want some of its first, then the 3 of %s\n%s", len(lines), n, big, len(evs), after, stderr.String())
			}
			for _, l := range lines[n:] {
				if !strings.Contains(l, `"sessionId":"`+after+`"`) {
					t.Errorf("after the first %d lines of %s, the export wrote %.200s", n, big, l)
				}
			}
			for _, w := range []string{
				fmt.Sprintf("session %s not exported: erased during the export (%d of its lines went out before the export learned it)\n", big, n),
				"exported 1 sessions, 3 events (1 sessions erased during the export left out)\n",
			} {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("the export does not say %q:\n%s", w, stderr.String())
				}
			}
		})
		t.Run(x.name+" OTLP", func(t *testing.T) {
			// More spans than a request holds.
			turns, after := "turns-"+x.name, "then-"+x.name
			appendSession(t, k.Cl, turns, turnsSession(otelexport.MaxExportSpans+8))
			appendSession(t, k.Cl, after, turnsSession(1))
			rcv := otlptest.NewReceiver(t)
			held, release := rcv.Hold(t)
			go func() {
				<-held
				markErased(t, k.St, turns)
				release()
			}()
			var stderr bytes.Buffer
			if err := x.otlp([]string{turns, after}, rcv, &stderr); err != nil {
				t.Fatalf("export --to otlp: %v\n%s", err, stderr.String())
			}
			if got, want := rcv.Requests(), []int{otelexport.MaxExportSpans, 1}; !slices.Equal(got, want) {
				t.Errorf("the export sent requests of %v spans, want %v (the held one of %s, then %s's)", got, want, turns, after)
			}
			for _, w := range []string{
				fmt.Sprintf("session %s not exported: erased during the export (%d of its spans went out before the export learned it)\n", turns, otelexport.MaxExportSpans),
				"exported 1 sessions: 1 turns, 1 spans to " + rcv.URL + " (1 sessions erased during the export left out)\n",
			} {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("the export does not say %q:\n%s", w, stderr.String())
				}
			}
		})
	}
}

// otlpExporter is the OTLP/HTTP exporter of export --to otlp, to rcv.
func otlpExporter(t *testing.T, rcv *otlptest.Receiver) sdktrace.SpanExporter {
	exp, err := otelexport.NewOTLPHTTP(context.Background(), rcv.URL, otelexport.DefaultExportTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exp.Shutdown(context.Background()) })
	return exp
}

// A session named (not listed: `export --session`) and erased during its
// export is left out and said as a listed one is, and the export then
// fails naming it: the session asked for was not exported.
func TestExportOfNamedSessionErasedDuringItFails(t *testing.T) {
	k := writertest.New(t, logstore.Config{})
	ctx := context.Background()
	pad := strings.Repeat("x", 20000)
	for _, x := range []struct {
		name  string
		lines func(ids []string, stdout, stderr io.Writer) error
	}{
		{"operator", func(ids []string, stdout, stderr io.Writer) error {
			return transfer.Export(ctx, k.St, ids, false, stdout, stderr)
		}},
		{"agent", func(ids []string, stdout, stderr io.Writer) error {
			return transfer.ExportRead(ctx, k.Cl, ids, false, stdout, stderr)
		}},
	} {
		t.Run(x.name, func(t *testing.T) {
			id := "named-" + x.name
			evs := []schema.Envelope{event(schema.TypeSessionCreated, "", `{}`)}
			for range 199 {
				evs = append(evs, event(schema.TypeMessageUser, "", `{"content":"`+pad+`"}`))
			}
			appendSession(t, k.Cl, id, evs)
			var stderr bytes.Buffer
			out := &erasingWriter{erase: func() { markErased(t, k.St, id) }}
			err := x.lines([]string{id}, out, &stderr)
			if err == nil || !strings.Contains(err.Error(), "1 sessions named not exported (erased during the export): "+id) {
				t.Fatalf("export of %s named, erased during it: %v, want it to fail naming it\n%s", id, err, stderr.String())
			}
			if !strings.Contains(stderr.String(), "session "+id+" not exported: erased during the export (") {
				t.Errorf("the export does not say it left %s out:\n%s", id, stderr.String())
			}
		})
	}
}
