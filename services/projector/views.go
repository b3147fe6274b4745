package projector

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"sort"
	"strconv"
	"time"

	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

// ViewVersion changes whenever the projector lays out or derives its views
// differently. The checkpoint records it with session.ReducerVersion;
// either changing forces a rebuild.
const ViewVersion = 7

// Version is the checkpoint's version string.
func Version() string {
	return "reducer=" + itoa(session.ReducerVersion) + ",views=" + itoa(ViewVersion)
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// Session statuses (DESIGN.md section 5).
//
// They are derived from the log alone, never from the clock, so a rebuild
// reproduces them exactly:
//   - closed: session/closed was folded;
//   - paused: paused (by the agent or a repair) and not resumed;
//   - active: a turn or any other work (step, attempt, tool call, approval,
//     compaction, job) is open, or a fork copy is still being written;
//   - interrupted: nothing is open and the last turn ended interrupted,
//     aborted or failed;
//   - idle: nothing is open and the last turn (if any) completed;
//   - unreadable: the session holds an event this reader must not fold
//     (unknown required type, newer schema, undecodable, or one that
//     breaks the session rules); folding stopped before it;
//   - gap: an event's seq skipped ahead and the stream did not hold the
//     missing ones; folding stopped before it.
//
// How long ago the last activity was is the reader's business: the API
// returns lastActivity and the dashboard shows it relative to now.
const (
	StatusActive      = "active"
	StatusIdle        = "idle"
	StatusPaused      = "paused"
	StatusInterrupted = "interrupted"
	StatusClosed      = "closed"
	StatusUnreadable  = "unreadable"
	StatusGap         = "gap"
)

// Statuses lists every status.
var Statuses = []string{StatusActive, StatusIdle, StatusPaused, StatusInterrupted, StatusClosed, StatusUnreadable, StatusGap}

func validStatus(s string) bool {
	for _, v := range Statuses {
		if v == s {
			return true
		}
	}
	return false
}

// TurnView is an open or the last ended turn.
type TurnView struct {
	ID       string `json:"id"`
	StartSeq uint64 `json:"startSeq"`
	EndSeq   uint64 `json:"endSeq,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// ToolView is an open tool call and its phase.
type ToolView struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	TurnID     string `json:"turnId"`
	Phase      string `json:"phase"`
	StartSeq   uint64 `json:"startSeq"`
	StartedSeq uint64 `json:"startedSeq,omitempty"`
	Idempotent bool   `json:"idempotent,omitempty"`
}

// ApprovalView is a pending approval.
type ApprovalView struct {
	ID         string `json:"id"`
	TurnID     string `json:"turnId"`
	ToolCallID string `json:"toolCallId,omitempty"`
	Prompt     string `json:"prompt"`
	StartSeq   uint64 `json:"startSeq"`
}

// CompactionView is the last ended compaction.
type CompactionView struct {
	ID         string `json:"id"`
	ThroughSeq uint64 `json:"throughSeq"`
	EndSeq     uint64 `json:"endSeq"`
}

// Problem says why folding stopped (status unreadable or gap).
type Problem struct {
	// Seq is the position where folding stopped: the seq the message at
	// StreamSeq should have had (for a gap: the first missing seq).
	Seq       uint64 `json:"seq"`
	StreamSeq uint64 `json:"streamSeq"`
	Code      string `json:"code"`
	Message   string `json:"message"`
	// GotSeq is the seq that arrived instead, when the message claims
	// another one (a gap's next seq; a forged or repeated seq).
	GotSeq uint64 `json:"gotSeq,omitempty"`
}

// Summary is the per-session view (GET /v1/sessions and /v1/sessions/{id}).
// Its JSON is stored as is, so every field must come from the log.
type Summary struct {
	SessionID     string    `json:"sessionId"`
	Status        string    `json:"status"`
	LastSeq       uint64    `json:"lastSeq"`
	LastStreamSeq uint64    `json:"lastStreamSeq"`
	LastEventID   string    `json:"lastEventId,omitempty"`
	LastType      string    `json:"lastType,omitempty"`
	CreatedAt     time.Time `json:"createdAt"`
	LastActivity  time.Time `json:"lastActivity"`
	LastHash      string    `json:"lastHash,omitempty"` // the chain's link of the last folded event: SL-Prev of the next (DESIGN.md section 2)

	Title     string            `json:"title,omitempty"`
	Agent     string            `json:"agent,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	Workspace string            `json:"workspace,omitempty"`
	Parent    *schema.Parent    `json:"parent,omitempty"`
	Forking   bool              `json:"forking,omitempty"`
	// Owner and Grants: who may write to the session (ADR 010), from its
	// session/created and session/granted events; the watch shows only
	// their live events (api.Authorize).
	Owner  *schema.Owner `json:"owner,omitempty"`
	Grants []string      `json:"grants,omitempty"`

	PauseReason string `json:"pauseReason,omitempty"`
	CloseReason string `json:"closeReason,omitempty"`

	Turns            int                `json:"turns"`
	OpenTurn         *TurnView          `json:"openTurn,omitempty"`
	LastTurn         *TurnView          `json:"lastTurn,omitempty"`
	OpenTools        []ToolView         `json:"openTools,omitempty"`
	PendingApprovals []ApprovalView     `json:"pendingApprovals,omitempty"`
	OpenWork         []session.OpenItem `json:"openWork,omitempty"`
	Goal             *session.Goal      `json:"goal,omitempty"`
	Compaction       *CompactionView    `json:"compaction,omitempty"`
	Repairs          int                `json:"repairs,omitempty"`
	LastRepairSeq    uint64             `json:"lastRepairSeq,omitempty"`
	Rewinds          int                `json:"rewinds,omitempty"`
	ForkCommittedSeq uint64             `json:"forkCommittedSeq,omitempty"`

	Problem *Problem `json:"problem,omitempty"`
}

// Detail is GET /v1/sessions/{id}: the summary plus the derived children.
type Detail struct {
	Summary
	Children []string `json:"children"`
}

// derive fills the state-dependent fields of sum from st.
func derive(sum *Summary, st *session.State) {
	sum.LastSeq = st.LastSeq
	sum.LastEventID = st.LastEventID
	sum.LastActivity = st.LastTime
	sum.CreatedAt = st.CreatedAt
	m := st.Meta
	sum.Title, sum.Agent, sum.Labels, sum.Workspace, sum.Parent = m.Title, m.Agent, m.Labels, m.Workspace, m.Parent
	sum.Owner, sum.Grants = m.Owner, m.Grants
	sum.Forking = st.Forking
	sum.PauseReason, sum.CloseReason = st.PauseReason, st.CloseReason
	sum.Turns = st.Turns
	sum.OpenTurn, sum.LastTurn = turnView(st.Turn), turnView(st.LastTurn)
	sum.OpenWork = st.OpenWork()
	sum.OpenTools = sum.OpenTools[:0]
	sum.PendingApprovals = sum.PendingApprovals[:0]
	for _, it := range sum.OpenWork {
		switch it.Kind {
		case session.OpenToolNotStarted, session.OpenToolStarted:
			t := st.Tools[it.ID]
			sum.OpenTools = append(sum.OpenTools, ToolView{ID: t.ID, Name: t.Name, TurnID: t.TurnID, Phase: t.Phase, StartSeq: t.StartSeq, StartedSeq: t.StartedSeq, Idempotent: t.Idempotent})
		case session.OpenApproval:
			a := st.Approvals[it.ID]
			sum.PendingApprovals = append(sum.PendingApprovals, ApprovalView{ID: a.ID, TurnID: a.TurnID, ToolCallID: a.ToolCallID, Prompt: a.Prompt, StartSeq: a.StartSeq})
		}
	}
	if len(sum.OpenTools) == 0 {
		sum.OpenTools = nil
	}
	if len(sum.PendingApprovals) == 0 {
		sum.PendingApprovals = nil
	}
	sum.Goal = st.Goal
	sum.Compaction = nil
	if c := st.Compacted; c != nil {
		sum.Compaction = &CompactionView{ID: c.ID, ThroughSeq: c.ThroughSeq, EndSeq: c.EndSeq}
	}
	sum.Repairs, sum.LastRepairSeq, sum.ForkCommittedSeq = st.Repairs, st.LastRepairSeq, st.ForkCommittedSeq
	sum.Rewinds = st.Rewinds
	sum.Status = statusOf(st, len(sum.OpenWork) > 0)
}

func statusOf(st *session.State, openWork bool) string {
	switch {
	case st.Closed:
		return StatusClosed
	case st.Paused:
		return StatusPaused
	case st.Turn != nil || openWork || st.Forking:
		return StatusActive
	case st.LastTurn != nil && st.LastTurn.Reason != "" && st.LastTurn.Reason != schema.TurnCompleted:
		return StatusInterrupted
	}
	return StatusIdle
}

func turnView(t *session.Turn) *TurnView {
	if t == nil {
		return nil
	}
	return &TurnView{ID: t.ID, StartSeq: t.StartSeq, EndSeq: t.EndSeq, Reason: t.Reason}
}

// The event index value: the event's stream sequence (8 bytes big endian)
// followed, for model-visible events, by the context entry JSON.

// appendIndex appends the index value of event e to dst. canonical says
// e was decoded from a canonical body (schema.DecodeCanonical), whose data
// is as json.Marshal writes it (see appendContextEntryOf).
func appendIndex(dst []byte, streamSeq uint64, e *schema.Envelope, canonical bool) []byte {
	dst = binary.BigEndian.AppendUint64(dst, streamSeq)
	return appendContextEntryOf(dst, e, canonical)
}

func decodeIndex(v []byte) (streamSeq uint64, entry []byte) {
	if len(v) < 8 {
		return 0, nil
	}
	return binary.BigEndian.Uint64(v), v[8:]
}

// ContextEntry is one model-visible item of the context view.
type ContextEntry struct {
	Seq        uint64          `json:"seq"`
	Type       string          `json:"type"`
	Role       string          `json:"role"`
	TurnID     string          `json:"turnId,omitempty"`
	AttemptID  string          `json:"attemptId,omitempty"`
	ToolCallID string          `json:"toolCallId,omitempty"`
	Synthetic  bool            `json:"synthetic,omitempty"`
	Data       json.RawMessage `json:"data"`
}

// contextRole says which events the model sees, and as whom. Attempts,
// turns, approvals and bookkeeping are not part of the transcript.
func contextRole(typ string) string {
	switch typ {
	case schema.TypeMessageUser:
		return "user"
	case schema.TypeMessageAssistant:
		return "assistant"
	case schema.TypeToolRequested:
		return "tool_call"
	case schema.TypeToolResult:
		return "tool_result"
	case schema.TypeContextRewound:
		// Not shown to the model: indexed so the context view can drop
		// what it abandoned.
		return "rewind"
	}
	return ""
}

// appendContextEntry appends the context entry of e to dst (nothing for an
// event the model does not see). The usual entry is
// written by hand: its ids and type are plain ASCII, and its data as
// stored is already what json.Marshal makes of a RawMessage (compact, with
// <, >, & and U+2028/U+2029 escaped), so both are copied as they are.
// Anything else goes through json.Marshal.
func appendContextEntry(dst []byte, e *schema.Envelope) []byte {
	return appendContextEntryOf(dst, e, false)
}

// appendContextEntryOf is appendContextEntry for an event whose data is
// known to be as json.Marshal writes it (dataAsIs), which it then does not
// scan again: the data of a canonical body is what schema.Encode wrote,
// which is json.Marshal's (or checked to be it), so the scan of every
// model-visible event's data (a tenth of a fold's instructions besides
// the hash) answers what the decode answered already.
func appendContextEntryOf(dst []byte, e *schema.Envelope, dataAsIs bool) []byte {
	role, data := contextOf(e)
	if role == "" {
		return dst
	}
	if !plainString(e.Type) || !plainString(e.TurnID) || !plainString(e.AttemptID) || !plainString(e.ToolCallID) || !(dataAsIs || marshalsAsIs(data)) {
		return append(dst, marshalContextEntry(e, role, data)...)
	}
	dst = append(dst, `{"seq":`...)
	dst = strconv.AppendUint(dst, e.Seq, 10)
	dst = appendMember(dst, "type", e.Type)
	dst = appendMember(dst, "role", role)
	if e.TurnID != "" {
		dst = appendMember(dst, "turnId", e.TurnID)
	}
	if e.AttemptID != "" {
		dst = appendMember(dst, "attemptId", e.AttemptID)
	}
	if e.ToolCallID != "" {
		dst = appendMember(dst, "toolCallId", e.ToolCallID)
	}
	if e.Synthetic {
		dst = append(dst, `,"synthetic":true`...)
	}
	dst = append(dst, `,"data":`...)
	dst = append(dst, data...)
	return append(dst, '}')
}

// appendMember appends ,"key":"value" for a plainString value.
func appendMember(dst []byte, key, value string) []byte {
	dst = append(append(append(dst, `,"`...), key...), `":"`...)
	return append(append(dst, value...), '"')
}

// plainString reports whether json.Marshal writes s as it is between
// quotes: printable ASCII but for the quote, the backslash and the
// characters it escapes for HTML.
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// marshalsAsIs reports whether json.Marshal writes the valid JSON value v
// unchanged as a RawMessage: no whitespace outside strings, and none of
// <, >, & or U+2028/U+2029 inside them.
func marshalsAsIs(v []byte) bool {
	in := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !in {
			switch c {
			case ' ', '\t', '\n', '\r':
				return false
			case '"':
				in = true
			}
			continue
		}
		switch c {
		case '\\':
			i++
		case '"':
			in = false
		case '<', '>', '&':
			return false
		case 0xE2:
			if i+2 < len(v) && v[i+1] == 0x80 && (v[i+2] == 0xA8 || v[i+2] == 0xA9) {
				return false
			}
		}
	}
	return true
}

// contextOf is the role and data of e's context entry (role "": the model
// does not see e).
func contextOf(e *schema.Envelope) (role string, data json.RawMessage) {
	data = e.Data
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	return contextRole(e.Type), data
}

// marshalContextEntry is the context entry of e by json.Marshal.
func marshalContextEntry(e *schema.Envelope, role string, data json.RawMessage) []byte {
	b, _ := json.Marshal(ContextEntry{Seq: e.Seq, Type: e.Type, Role: role, TurnID: e.TurnID, AttemptID: e.AttemptID, ToolCallID: e.ToolCallID, Synthetic: e.Synthetic, Data: data})
	return b
}

// CompactionSummary is the stored summary of the last ended compaction.
type CompactionSummary struct {
	CompactionID string `json:"compactionId"`
	ThroughSeq   uint64 `json:"throughSeq"`
	EndSeq       uint64 `json:"endSeq"`
	Summary      string `json:"summary"`
}

// Context is GET /v1/sessions/{id}/context.
type Context struct {
	SessionID string `json:"sessionId"`
	LastSeq   uint64 `json:"lastSeq"`
	// Compaction is the last ended compaction: the model sees its summary
	// in place of events 1..throughSeq.
	Compaction *CompactionSummary `json:"compaction,omitempty"`
	Entries    []ContextEntry     `json:"entries"`
}

func sortedKeys[M ~map[string]V, V any](m M) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// IndexValue appends the event index value the projector stores for e
// (the catch-up benchmark sizes its floor's keys by it).
func IndexValue(dst []byte, streamSeq uint64, e *schema.Envelope) []byte {
	return appendIndex(dst, streamSeq, e, false)
}

// SummaryOf is the summary view of a session folded to st, as a batch
// would store it after its last event at streamSeq of type lastType.
func SummaryOf(st *session.State, streamSeq uint64, lastType string) Summary {
	sum := Summary{SessionID: st.SessionID, LastStreamSeq: streamSeq, LastType: lastType}
	derive(&sum, st)
	return sum
}

// marshalSummary is json.Marshal(sum), byte for byte, written by hand for
// the usual summary: a batch stores the summary of every session it
// touched, and encoding/json's reflection walk of one cost as much as
// folding twenty events. A string json.Marshal would escape, or a time it
// refuses, and the rarer members (labels, parent, goal, approvals,
// problem) go through json.Marshal.
func marshalSummary(sum *Summary) ([]byte, error) { return appendSummary(make([]byte, 0, 512), sum) }

// appendSummary appends marshalSummary(sum) to dst (dst's room is the
// size expected: the session's last stored summary's).
func appendSummary(dst []byte, sum *Summary) ([]byte, error) {
	if !jsonTime(sum.CreatedAt) || !jsonTime(sum.LastActivity) {
		return json.Marshal(sum)
	}
	w := summaryWriter{b: dst}
	w.b = append(w.b, '{')
	w.str("sessionId", sum.SessionID, false)
	w.str("status", sum.Status, false)
	w.uint("lastSeq", sum.LastSeq, false)
	w.uint("lastStreamSeq", sum.LastStreamSeq, false)
	w.str("lastEventId", sum.LastEventID, true)
	w.str("lastType", sum.LastType, true)
	w.time("createdAt", sum.CreatedAt)
	w.time("lastActivity", sum.LastActivity)
	w.str("lastHash", sum.LastHash, true)
	w.str("title", sum.Title, true)
	w.str("agent", sum.Agent, true)
	if len(sum.Labels) > 0 {
		w.value("labels", sum.Labels)
	}
	w.str("workspace", sum.Workspace, true)
	if sum.Parent != nil {
		w.value("parent", sum.Parent)
	}
	w.flag("forking", sum.Forking)
	if sum.Owner != nil {
		w.value("owner", sum.Owner)
	}
	if len(sum.Grants) > 0 {
		w.value("grants", sum.Grants)
	}
	w.str("pauseReason", sum.PauseReason, true)
	w.str("closeReason", sum.CloseReason, true)
	w.uint("turns", uint64(sum.Turns), false)
	w.turn("openTurn", sum.OpenTurn)
	w.turn("lastTurn", sum.LastTurn)
	w.array("openTools", len(sum.OpenTools), func(i int) {
		t := &sum.OpenTools[i]
		w.str("id", t.ID, false)
		w.str("name", t.Name, false)
		w.str("turnId", t.TurnID, false)
		w.str("phase", t.Phase, false)
		w.uint("startSeq", t.StartSeq, false)
		w.uint("startedSeq", t.StartedSeq, true)
		w.flag("idempotent", t.Idempotent)
	})
	if len(sum.PendingApprovals) > 0 {
		w.value("pendingApprovals", sum.PendingApprovals)
	}
	w.array("openWork", len(sum.OpenWork), func(i int) {
		it := &sum.OpenWork[i]
		w.str("kind", string(it.Kind), false)
		w.str("id", it.ID, false)
		w.str("turnId", it.TurnID, true)
		w.uint("startSeq", it.StartSeq, false)
		w.flag("idempotent", it.Idempotent)
	})
	if sum.Goal != nil {
		w.value("goal", sum.Goal)
	}
	if c := sum.Compaction; c != nil {
		w.key("compaction")
		w.b = append(w.b, '{')
		w.str("id", c.ID, false)
		w.uint("throughSeq", c.ThroughSeq, false)
		w.uint("endSeq", c.EndSeq, false)
		w.b = append(w.b, '}')
	}
	w.uint("repairs", uint64(sum.Repairs), true)
	w.uint("lastRepairSeq", sum.LastRepairSeq, true)
	w.uint("rewinds", uint64(sum.Rewinds), true)
	w.uint("forkCommittedSeq", sum.ForkCommittedSeq, true)
	if sum.Problem != nil {
		w.value("problem", sum.Problem)
	}
	if w.err != nil || sum.Turns < 0 || sum.Repairs < 0 || sum.Rewinds < 0 {
		return json.Marshal(sum)
	}
	return append(w.b, '}'), nil
}

// summaryWriter appends the members of a JSON object; the first member
// of an object is the one right after its '{'.
type summaryWriter struct {
	b   []byte
	err error
}

// array writes the member k, an array of n objects (none: omitted),
// each one's members written by member(i).
func (w *summaryWriter) array(k string, n int, member func(i int)) {
	if n == 0 {
		return
	}
	w.key(k)
	w.b = append(w.b, '[')
	for i := range n {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.b = append(w.b, '{')
		member(i)
		w.b = append(w.b, '}')
	}
	w.b = append(w.b, ']')
}

// flag writes the member k: true, omitted when false.
func (w *summaryWriter) flag(k string, v bool) {
	if v {
		w.key(k)
		w.b = append(w.b, "true"...)
	}
}

func (w *summaryWriter) key(k string) {
	if c := w.b[len(w.b)-1]; c != '{' {
		w.b = append(w.b, ',')
	}
	w.b = append(append(append(w.b, '"'), k...), `":`...)
}

func (w *summaryWriter) str(k, v string, omitEmpty bool) {
	if omitEmpty && v == "" {
		return
	}
	w.key(k)
	if plainString(v) {
		w.b = append(append(append(w.b, '"'), v...), '"')
		return
	}
	b, err := json.Marshal(v)
	w.b = append(w.b, b...)
	w.err = errors.Join(w.err, err)
}

func (w *summaryWriter) uint(k string, v uint64, omitEmpty bool) {
	if omitEmpty && v == 0 {
		return
	}
	w.key(k)
	w.b = strconv.AppendUint(w.b, v, 10)
}

func (w *summaryWriter) time(k string, t time.Time) {
	w.key(k)
	w.b = append(t.AppendFormat(append(w.b, '"'), time.RFC3339Nano), '"')
}

func (w *summaryWriter) turn(k string, t *TurnView) {
	if t == nil {
		return
	}
	w.key(k)
	w.b = append(w.b, '{')
	w.str("id", t.ID, false)
	w.uint("startSeq", t.StartSeq, false)
	w.uint("endSeq", t.EndSeq, true)
	w.str("reason", t.Reason, true)
	w.b = append(w.b, '}')
}

func (w *summaryWriter) value(k string, v any) {
	w.key(k)
	b, err := json.Marshal(v)
	w.b = append(w.b, b...)
	w.err = errors.Join(w.err, err)
}

// jsonTime reports whether time.Time.MarshalJSON writes t as
// AppendFormat(RFC3339Nano) between quotes: a year of four digits and a
// zone offset within a day (an offset of whole minutes, as RFC 3339 has).
func jsonTime(t time.Time) bool {
	if y := t.Year(); y < 0 || y > 9999 {
		return false
	}
	_, off := t.Zone()
	return off%60 == 0 && off > -24*3600 && off < 24*3600
}
