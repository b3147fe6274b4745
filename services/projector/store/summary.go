package store

import (
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

// The value of the summary view (SummaryKey): a Summary as JSON, written
// by AppendSummary. The fold derives the summary from the session's state;
// this file says only how it is laid out and written.

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
// Its JSON is stored as is at SummaryKey, so every field must come from
// the log.
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

// marshalSummary is json.Marshal(sum), byte for byte, written by hand for
// the usual summary: a batch stores the summary of every session it
// touched, and encoding/json's reflection walk of one cost as much as
// folding twenty events. A string json.Marshal would escape, or a time it
// refuses, and the rarer members (labels, parent, goal, approvals,
// problem) go through json.Marshal.
func marshalSummary(sum *Summary) ([]byte, error) { return AppendSummary(make([]byte, 0, 512), sum) }

// AppendSummary appends marshalSummary(sum) to dst (dst's room is the
// size expected: the session's last stored summary's).
func AppendSummary(dst []byte, sum *Summary) ([]byte, error) {
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

// DecodeSummary decodes a value of the summary view into sum.
func DecodeSummary(v []byte, sum *Summary) error { return json.Unmarshal(v, sum) }

// Summary reads the summary view of session id as the snapshot sees it
// (nil: no session).
func (s Snapshot) Summary(id string) (*Summary, error) {
	return getJSON[Summary](s, SummaryKey(id))
}

// ErasedOwner is what ErasedOwnerKey keeps of an erased session: its
// owner and grants, as its summary had them when its views were removed.
type ErasedOwner struct {
	Owner  *schema.Owner `json:"owner"`
	Grants []string      `json:"grants,omitempty"`
}

// ErasedOwner reads what the store keeps of erased session id (nil:
// nothing).
func (s Snapshot) ErasedOwner(id string) (*ErasedOwner, error) {
	return getJSON[ErasedOwner](s, ErasedOwnerKey(id))
}
