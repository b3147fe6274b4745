package otelexport_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/otelexport"
	"github.com/sessionlog/sessionlog/internal/sessionfixture"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// recorder is an exporter that keeps what it is sent, request by request.
type recorder struct{ requests [][]sdktrace.ReadOnlySpan }

func (r *recorder) ExportSpans(_ context.Context, ss []sdktrace.ReadOnlySpan) error {
	r.requests = append(r.requests, slices.Clone(ss))
	return nil
}
func (r *recorder) Shutdown(context.Context) error { return nil }

// spanLines are the spans, all that an export says of each, sorted.
func spanLines(ss []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range ss {
		var ev []string
		for _, e := range s.Events() {
			ev = append(ev, fmt.Sprintf("%s%v@%s", e.Name, e.Attributes, e.Time.UTC().Format(time.RFC3339Nano)))
		}
		out = append(out, fmt.Sprintf("%s %s/%s/%s %v %v %s-%s %v", s.Name(), s.SpanContext().TraceID(), s.SpanContext().SpanID(), s.Parent().SpanID(),
			s.Attributes(), s.Status(), s.StartTime().UTC().Format(time.RFC3339Nano), s.EndTime().UTC().Format(time.RFC3339Nano), ev))
	}
	sort.Strings(out)
	return out
}

// TestSenderSendsWhatBuildMakes: a session sent a turn at a time as it is
// read (Sender) gives the spans Build makes of the whole session, in
// requests of at most MaxExportSpans; a turn that has not ended gives none.
func TestSenderSendsWhatBuildMakes(t *testing.T) {
	chat := slices.Collect(gen.Chat("otel-long", 300, 120, true, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	open := append(slices.Clone(chat), schema.Envelope{SchemaVersion: schema.Version, SessionID: "otel-long", Seq: chat[len(chat)-1].Seq + 1,
		EventID: "open", Time: chat[len(chat)-1].Time.Add(time.Second), Type: schema.TypeTurnStarted, TurnID: "t-open", Data: []byte(`{}`)})
	for name, evs := range map[string][]schema.Envelope{"Fixture": sessionfixture.Events("otel-fixture"), "Chat": chat, "OpenTurn": open} {
		t.Run(name, func(t *testing.T) {
			want := otelexport.Build(evs)
			rec := &recorder{}
			snd := otelexport.NewSender(context.Background(), rec)
			for i := range evs {
				if err := snd.Add(&evs[i]); err != nil {
					t.Fatal(err)
				}
			}
			if err := snd.Close(); err != nil {
				t.Fatal(err)
			}
			var got []sdktrace.ReadOnlySpan
			for _, req := range rec.requests {
				if len(req) > otelexport.MaxExportSpans {
					t.Errorf("a request of %d spans", len(req))
				}
				got = append(got, req...)
			}
			if snd.Spans != len(want) || len(got) != len(want) {
				t.Fatalf("sent %d spans (counted %d), Build makes %d", len(got), snd.Spans, len(want))
			}
			if a, b := spanLines(got), spanLines(want); strings.Join(a, "\n") != strings.Join(b, "\n") {
				for i := range a {
					if a[i] != b[i] {
						t.Fatalf("span %d differs:\n%s\n%s", i, a[i], b[i])
					}
				}
			}
		})
	}
}
