// Package otelexport turns sessions into OpenTelemetry traces (DESIGN.md
// section 15) with the GenAI semantic conventions: a trace per turn, its
// root an `invoke_agent` span, a `chat` span per attempt and an
// `execute_tool` span per tool call under it; repairs, approvals and
// compactions as span events; interrupted turns, attempts and tool calls
// that failed or whose outcome is unknown with an error status. Every
// span carries session.id and gen_ai.conversation.id = the session id.
//
// Trace and span ids are derived from the session id and the id of the
// event that opens each span, so exporting a session twice gives the
// same ids (a collector or a tracing UI sees the same spans again, not
// new ones). The spans are built with the SDK's own tracer, given an
// IDGenerator that hands out the derived ids, and collected by a span
// processor of this package instead of being exported one by one: Build
// is pure, and Export sends what it built through any SpanExporter
// (OTLP/HTTP in sessionlog).
package otelexport

import (
	"context"
	"crypto/sha256"
	"slices"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkresource "go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/usage"
)

// Span names.
const (
	SpanInvokeAgent = "invoke_agent"
	SpanChat        = "chat"
	SpanExecuteTool = "execute_tool"
)

// Attributes of sessionlog's own (the GenAI conventions have no place for
// them).
const (
	AttrTurnID     = attribute.Key("sessionlog.turn.id")
	AttrTurnReason = attribute.Key("sessionlog.turn.reason")
	AttrAttemptID  = attribute.Key("sessionlog.attempt.id")
	AttrToolStatus = attribute.Key("sessionlog.tool.status")
	AttrSynthetic  = attribute.Key("sessionlog.synthetic")
	AttrEventID    = attribute.Key("sessionlog.event.id")
	AttrSeq        = attribute.Key("sessionlog.seq")
)

// scope is the instrumentation scope of every span.
const scope = "github.com/sessionlog/sessionlog/internal/otelexport"

// TraceID is the trace of the turn that turn/started event eventID opens.
func TraceID(sessionID, eventID string) trace.TraceID {
	var t trace.TraceID
	h := sha256.Sum256([]byte("sessionlog\x00trace\x00" + sessionID + "\x00" + eventID))
	copy(t[:], h[:])
	return t
}

// SpanID is the span that event eventID opens.
func SpanID(sessionID, eventID string) trace.SpanID {
	var s trace.SpanID
	h := sha256.Sum256([]byte("sessionlog\x00span\x00" + sessionID + "\x00" + eventID))
	copy(s[:], h[:])
	return s
}

// ids hands the tracer the ids Build derived, through the context each
// span is started with.
type ids struct{}

type idsKey struct{}

type wantIDs struct {
	trace trace.TraceID
	span  trace.SpanID
}

func withIDs(ctx context.Context, t trace.TraceID, s trace.SpanID) context.Context {
	return context.WithValue(ctx, idsKey{}, wantIDs{t, s})
}

func (ids) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	w, _ := ctx.Value(idsKey{}).(wantIDs)
	return w.trace, w.span
}

func (ids) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	w, _ := ctx.Value(idsKey{}).(wantIDs)
	return w.span
}

var _ sdktrace.IDGenerator = ids{}

// collector keeps the spans that end, in order.
type collector struct {
	mu    sync.Mutex
	spans []sdktrace.ReadOnlySpan
}

func (c *collector) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (c *collector) OnEnd(s sdktrace.ReadOnlySpan) {
	c.mu.Lock()
	c.spans = append(c.spans, s)
	c.mu.Unlock()
}
func (c *collector) Shutdown(context.Context) error   { return nil }
func (c *collector) ForceFlush(context.Context) error { return nil }

var _ sdktrace.SpanProcessor = (*collector)(nil)

// Resource is the resource of every span: the service sessionlog.
func Resource() *sdkresource.Resource {
	return sdkresource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceNameKey.String("sessionlog"))
}

// open is a span being built.
type open struct {
	ctx  context.Context
	span trace.Span
}

// builder walks one session's events.
type builder struct {
	sid    string
	tracer trace.Tracer
	agent  string
	// turn is the open turn's span; tools and attempts those open in it.
	turn     *open
	turnID   string
	attempts map[string]*open
	tools    map[string]*open
	// approvals: the tool call each approval asked about, so its
	// decision goes on the same span.
	approvals map[string]string
	// early: events before the first turn (or between turns) that become
	// events of the next turn's span.
	early []schema.Envelope
	// ended: the traces of turns that ended; only they are kept (Build).
	ended map[trace.TraceID]bool
}

// Build returns the spans of the turns that end in events (one session's,
// in seq order, from its start or from a turn/started). A turn that has
// not ended yet gives nothing (it is exported when it ends): its spans
// would change. Events outside any turn (a compaction between turns, a
// goal) go to the next turn's span.
func Build(events []schema.Envelope) []sdktrace.ReadOnlySpan {
	if len(events) == 0 {
		return nil
	}
	col := &collector{}
	tp := sdktrace.NewTracerProvider(sdktrace.WithIDGenerator(ids{}), sdktrace.WithSpanProcessor(col),
		sdktrace.WithResource(Resource()), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	b := &builder{sid: events[0].SessionID, tracer: tp.Tracer(scope), attempts: map[string]*open{}, tools: map[string]*open{}, approvals: map[string]string{}, ended: map[trace.TraceID]bool{}}
	for i := range events {
		b.event(&events[i])
	}
	// Spans of a turn still open end now so the tracer lets them go; they
	// are not kept.
	at := events[len(events)-1].Time
	for _, o := range b.tools {
		o.span.End(trace.WithTimestamp(at))
	}
	for _, o := range b.attempts {
		o.span.End(trace.WithTimestamp(at))
	}
	if b.turn != nil {
		b.turn.span.End(trace.WithTimestamp(at))
	}
	out := make([]sdktrace.ReadOnlySpan, 0, len(col.spans))
	for _, s := range col.spans {
		if b.ended[s.SpanContext().TraceID()] {
			out = append(out, s)
		}
	}
	return out
}

func (b *builder) common(e *schema.Envelope) []attribute.KeyValue {
	kv := []attribute.KeyValue{
		semconv.SessionIDKey.String(b.sid),
		semconv.GenAIConversationIDKey.String(b.sid),
		AttrEventID.String(e.EventID),
		AttrSeq.Int64(int64(e.Seq)),
	}
	if b.agent != "" {
		kv = append(kv, semconv.GenAIAgentNameKey.String(b.agent))
	}
	return kv
}

// start opens a span under parent (nil: a new trace) with the ids e
// derives.
func (b *builder) start(parent *open, name string, kind trace.SpanKind, e *schema.Envelope, attrs ...attribute.KeyValue) *open {
	ctx := context.Background()
	tid := TraceID(b.sid, e.EventID)
	opts := []trace.SpanStartOption{trace.WithTimestamp(e.Time), trace.WithSpanKind(kind), trace.WithAttributes(b.common(e)...), trace.WithAttributes(attrs...)}
	if parent != nil {
		ctx = parent.ctx
		tid = parent.span.SpanContext().TraceID()
	} else {
		opts = append(opts, trace.WithNewRoot())
	}
	ctx, span := b.tracer.Start(withIDs(ctx, tid, SpanID(b.sid, e.EventID)), name, opts...)
	return &open{ctx: ctx, span: span}
}

// pop takes the open span of id out of m (nil: none).
func pop(m map[string]*open, id string) *open {
	o := m[id]
	delete(m, id)
	return o
}

// note adds e as an event of the span of its tool call when open, else
// of the turn's span, else keeps it for the next turn.
func (b *builder) note(e *schema.Envelope, toolCallID string, name string, attrs ...attribute.KeyValue) {
	attrs = append(attrs, AttrEventID.String(e.EventID), AttrSeq.Int64(int64(e.Seq)))
	if e.Synthetic {
		attrs = append(attrs, AttrSynthetic.Bool(true))
	}
	target := b.tools[toolCallID]
	if target == nil {
		target = b.turn
	}
	if target == nil {
		b.early = append(b.early, *e)
		return
	}
	target.span.AddEvent(name, trace.WithTimestamp(e.Time), trace.WithAttributes(attrs...))
}

func (b *builder) event(e *schema.Envelope) {
	switch e.Type {
	case schema.TypeSessionCreated:
		var d schema.SessionCreated
		_ = e.DecodeData(&d)
		b.agent = d.Agent
	case schema.TypeTurnStarted:
		b.turn = b.start(nil, SpanInvokeAgent, trace.SpanKindInternal, e, semconv.GenAIOperationNameInvokeAgent, AttrTurnID.String(e.TurnID))
		b.turnID = e.TurnID
		early := b.early
		b.early = nil
		for i := range early {
			b.event(&early[i])
		}
	case schema.TypeTurnEnded:
		if b.turn == nil || e.TurnID != b.turnID {
			return
		}
		var d schema.Reason
		_ = e.DecodeData(&d)
		b.turn.span.SetAttributes(AttrTurnReason.String(d.Reason))
		if d.Reason != schema.TurnCompleted {
			b.turn.span.SetStatus(codes.Error, "turn "+d.Reason)
		}
		b.ended[b.turn.span.SpanContext().TraceID()] = true
		b.turn.span.End(trace.WithTimestamp(e.Time))
		b.turn = nil
	case schema.TypeAttemptStarted:
		if b.turn == nil {
			return
		}
		var d schema.AttemptStarted
		_ = e.DecodeData(&d)
		attrs := []attribute.KeyValue{semconv.GenAIOperationNameChat, AttrAttemptID.String(e.AttemptID)}
		if d.Model != "" {
			attrs = append(attrs, semconv.GenAIRequestModelKey.String(d.Model))
		}
		b.attempts[e.AttemptID] = b.start(b.turn, SpanChat, trace.SpanKindClient, e, attrs...)
	case schema.TypeMessageAssistant:
		o := pop(b.attempts, e.AttemptID)
		if o == nil {
			return
		}
		var d schema.Message
		_ = e.DecodeData(&d)
		if c, ok := usage.Read(d.Usage); ok {
			o.span.SetAttributes(
				semconv.GenAIUsageInputTokensKey.Int64(c.InputTokens),
				semconv.GenAIUsageOutputTokensKey.Int64(c.OutputTokens),
			)
			if c.CacheReadTokens > 0 {
				o.span.SetAttributes(semconv.GenAIUsageCacheReadInputTokensKey.Int64(c.CacheReadTokens))
			}
			if c.CacheCreationTokens > 0 {
				o.span.SetAttributes(semconv.GenAIUsageCacheCreationInputTokensKey.Int64(c.CacheCreationTokens))
			}
		}
		o.span.End(trace.WithTimestamp(e.Time))
	case schema.TypeAttemptInterrupt:
		o := pop(b.attempts, e.AttemptID)
		if o == nil {
			return
		}
		var d schema.Reason
		_ = e.DecodeData(&d)
		o.span.SetStatus(codes.Error, "attempt interrupted: "+d.Reason)
		if e.Synthetic {
			o.span.SetAttributes(AttrSynthetic.Bool(true))
		}
		o.span.End(trace.WithTimestamp(e.Time))
	case schema.TypeToolRequested:
		if b.turn == nil {
			return
		}
		var d schema.ToolRequested
		_ = e.DecodeData(&d)
		b.tools[e.ToolCallID] = b.start(b.turn, SpanExecuteTool, trace.SpanKindInternal, e, semconv.GenAIOperationNameExecuteTool,
			semconv.GenAIToolNameKey.String(d.Name), semconv.GenAIToolCallIDKey.String(e.ToolCallID))
	case schema.TypeToolStarted:
		b.note(e, e.ToolCallID, "tool.started")
	case schema.TypeToolResult:
		o := pop(b.tools, e.ToolCallID)
		if o == nil {
			return
		}
		var d schema.ToolResult
		_ = e.DecodeData(&d)
		o.span.SetAttributes(AttrToolStatus.String(d.Status))
		if e.Synthetic {
			o.span.SetAttributes(AttrSynthetic.Bool(true))
		}
		switch d.Status {
		case schema.ToolOK:
		case schema.ToolOutcomeUnknown:
			o.span.SetStatus(codes.Error, "outcome_unknown: the call started and its result was never recorded; check its effect before any retry")
		default:
			o.span.SetStatus(codes.Error, d.Status)
		}
		o.span.End(trace.WithTimestamp(e.Time))
	case schema.TypeApprovalRequested:
		var d schema.ApprovalRequested
		_ = e.DecodeData(&d)
		b.approvals[d.ApprovalID] = d.ToolCallID
		b.note(e, d.ToolCallID, "approval.requested", attribute.String("sessionlog.approval.id", d.ApprovalID))
	case schema.TypeApprovalDecided:
		var d schema.ApprovalDecided
		_ = e.DecodeData(&d)
		b.note(e, b.approvals[d.ApprovalID], "approval.decided", attribute.String("sessionlog.approval.id", d.ApprovalID),
			attribute.String("sessionlog.approval.decision", d.Decision), attribute.String("sessionlog.approval.by", d.By))
	case schema.TypeRepairApplied:
		var d schema.RepairApplied
		_ = e.DecodeData(&d)
		closed := make([]string, 0, len(d.Closed))
		for _, c := range d.Closed {
			closed = append(closed, c.Kind+":"+c.ID)
		}
		b.note(e, "", "repair.applied", attribute.String("sessionlog.repair.reason", d.Reason), attribute.StringSlice("sessionlog.repair.closed", closed))
	case schema.TypeCompactionStarted:
		var d schema.CompactionStarted
		_ = e.DecodeData(&d)
		b.note(e, "", "compaction.started", attribute.String("sessionlog.compaction.id", d.CompactionID), attribute.Int64("sessionlog.compaction.through_seq", int64(d.ThroughSeq)))
	case schema.TypeCompactionEnded:
		var d schema.CompactionEnded
		_ = e.DecodeData(&d)
		b.note(e, "", "compaction.ended", attribute.String("sessionlog.compaction.id", d.CompactionID), attribute.Int64("sessionlog.compaction.through_seq", int64(d.ThroughSeq)),
			attribute.Int("sessionlog.compaction.summary_bytes", len(d.Summary)))
	case schema.TypeCompactionAborted:
		var d schema.CompactionAborted
		_ = e.DecodeData(&d)
		b.note(e, "", "compaction.aborted", attribute.String("sessionlog.compaction.id", d.CompactionID), attribute.String("sessionlog.compaction.reason", d.Reason))
	}
}

// MaxExportSpans bounds the spans of one export request: a long session
// goes in several, as a collector takes requests of a bounded size.
const MaxExportSpans = 512

// Export builds the spans of events and sends them with exp, at most
// MaxExportSpans a call.
func Export(ctx context.Context, exp sdktrace.SpanExporter, events []schema.Envelope) (turns, spans int, err error) {
	ss := Build(events)
	if len(ss) == 0 {
		return 0, 0, nil
	}
	for _, s := range ss {
		if s.Name() == SpanInvokeAgent {
			turns++
		}
	}
	for chunk := range slices.Chunk(ss, MaxExportSpans) {
		if err := exp.ExportSpans(ctx, chunk); err != nil {
			return 0, 0, err
		}
	}
	return turns, len(ss), nil
}
