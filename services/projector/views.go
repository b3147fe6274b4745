package projector

import (
	"encoding/json"
	"sort"

	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
	"github.com/sessionlog/sessionlog/services/projector/store"
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

// The session statuses (store.StatusActive...), named here for the fold.
const (
	StatusActive      = store.StatusActive
	StatusIdle        = store.StatusIdle
	StatusPaused      = store.StatusPaused
	StatusInterrupted = store.StatusInterrupted
	StatusClosed      = store.StatusClosed
	StatusUnreadable  = store.StatusUnreadable
	StatusGap         = store.StatusGap
)

// derive fills the state-dependent fields of sum from st.
func derive(sum *store.Summary, st *session.State) {
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
			sum.OpenTools = append(sum.OpenTools, store.ToolView{ID: t.ID, Name: t.Name, TurnID: t.TurnID, Phase: t.Phase, StartSeq: t.StartSeq, StartedSeq: t.StartedSeq, Idempotent: t.Idempotent})
		case session.OpenApproval:
			a := st.Approvals[it.ID]
			sum.PendingApprovals = append(sum.PendingApprovals, store.ApprovalView{ID: a.ID, TurnID: a.TurnID, ToolCallID: a.ToolCallID, Prompt: a.Prompt, StartSeq: a.StartSeq})
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
		sum.Compaction = &store.CompactionView{ID: c.ID, ThroughSeq: c.ThroughSeq, EndSeq: c.EndSeq}
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

func turnView(t *session.Turn) *store.TurnView {
	if t == nil {
		return nil
	}
	return &store.TurnView{ID: t.ID, StartSeq: t.StartSeq, EndSeq: t.EndSeq, Reason: t.Reason}
}

func sortedKeys[M ~map[string]V, V any](m M) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// SummaryOf is the summary view of a session folded to st, as a batch
// would store it after its last event at streamSeq of type lastType.
func SummaryOf(st *session.State, streamSeq uint64, lastType string) store.Summary {
	sum := store.Summary{SessionID: st.SessionID, LastStreamSeq: streamSeq, LastType: lastType}
	derive(&sum, st)
	return sum
}
