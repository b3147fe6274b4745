package otelexport

import (
	"context"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Sender sends the spans of one session's events as they are read, a turn
// at a time, in requests of up to MaxExportSpans: it holds the events of
// the turn under way (with those since the previous turn's end, which go
// to its span) and the spans not sent yet, never the session. Each turn is
// built as the projector's live export builds it, from the session's
// first event and the turn's own (the same spans as Build of the whole
// session).
type Sender struct {
	ctx     context.Context
	exp     sdktrace.SpanExporter
	created *schema.Envelope
	turn    []schema.Envelope
	pending []sdktrace.ReadOnlySpan
	// Turns and Spans count what was built so far.
	Turns, Spans int
}

// NewSender sends with exp.
func NewSender(ctx context.Context, exp sdktrace.SpanExporter) *Sender {
	return &Sender{ctx: ctx, exp: exp}
}

// Add takes the session's next event (in seq order, from seq 1).
func (s *Sender) Add(e *schema.Envelope) error {
	if e.Type == schema.TypeSessionCreated && s.created == nil {
		c := *e
		s.created = &c
	}
	s.turn = append(s.turn, *e)
	if e.Type != schema.TypeTurnEnded {
		return nil
	}
	evs := s.turn
	if s.created != nil && evs[0].Type != schema.TypeSessionCreated {
		evs = append([]schema.Envelope{*s.created}, evs...)
	}
	for _, sp := range Build(evs) {
		if sp.Name() == SpanInvokeAgent {
			s.Turns++
		}
		s.Spans++
		s.pending = append(s.pending, sp)
	}
	s.turn = s.turn[:0]
	if len(s.pending) >= MaxExportSpans {
		return s.send()
	}
	return nil
}

// Close sends the spans still held; the events of a turn that has not
// ended give none.
func (s *Sender) Close() error { return s.send() }

func (s *Sender) send() error {
	for len(s.pending) > 0 {
		n := min(len(s.pending), MaxExportSpans)
		if err := s.exp.ExportSpans(s.ctx, s.pending[:n]); err != nil {
			return err
		}
		s.pending = s.pending[n:]
	}
	s.pending = nil
	return nil
}
