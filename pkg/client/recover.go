package client

import (
	"context"
	"sort"

	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

// Recovery says what an agent may do next with a session that a crash
// interrupted or the repairer closed (DESIGN.md sections 6 and 8). It is
// derived from the log alone: restart = reload state, never re-run tools.
type Recovery struct {
	SessionID string `json:"sessionId"`
	LastSeq   uint64 `json:"lastSeq"`
	// Repaired: the repairer closed work of this session; LastRepairSeq is
	// the seq of its latest repair/applied.
	Repaired      bool   `json:"repaired"`
	LastRepairSeq uint64 `json:"lastRepairSeq,omitempty"`
	// Paused: no new turn until session/resumed is appended (MustResume).
	Paused      bool   `json:"paused"`
	PauseReason string `json:"pauseReason,omitempty"`
	MustResume  bool   `json:"mustResume"`
	Closed      bool   `json:"closed"`
	// InterruptedTurn is the turn the crash cut short (ended interrupted,
	// or still open), if any.
	InterruptedTurn string `json:"interruptedTurn,omitempty"`
	// Reschedule: calls that never started (tool/result not_started):
	// their side effect did not happen, so they may be requested again
	// (as a new call id).
	Reschedule []RecoveryCall `json:"reschedule,omitempty"`
	// CheckWorld: calls that started and whose outcome is unknown: the side
	// effect may or may not have happened. Check the world before doing
	// anything that depends on it; never retry blindly.
	CheckWorld []RecoveryCall `json:"checkWorld,omitempty"`
	// Retry: calls with an unknown outcome whose request said idempotent:
	// running them again is safe.
	Retry []RecoveryCall `json:"retry,omitempty"`
	// PendingApprovals: approvals still waiting for a decision (kept
	// pending by the repairer's configuration, or not repaired yet).
	PendingApprovals []string `json:"pendingApprovals,omitempty"`
	// ExpiredApprovals: approvals the repair expired; ask again if needed.
	ExpiredApprovals []string `json:"expiredApprovals,omitempty"`
	// Open: work still open (not repaired yet: the holder may still be
	// alive, or the repairer has not acted).
	Open []session.OpenItem `json:"open,omitempty"`
}

// RecoveryCall is one tool call in a Recovery.
type RecoveryCall struct {
	ToolCallID string `json:"toolCallId"`
	TurnID     string `json:"turnId"`
	Name       string `json:"name"`
	Idempotent bool   `json:"idempotent,omitempty"`
	Status     string `json:"status"`
}

// StateLoader loads a session's folded state from the log.
type StateLoader interface {
	LoadState(ctx context.Context, sessionID string) (*session.State, error)
}

// Recover loads the session and reports what the agent may do next.
func Recover(ctx context.Context, l StateLoader, sessionID string) (*Recovery, error) {
	if !schema.ValidSessionID(sessionID) {
		return nil, schema.Errorf(schema.CodeBadRequest, "session id %q is not valid", sessionID)
	}
	st, err := l.LoadState(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	if !st.Exists() {
		return nil, schema.Errorf(schema.CodeNotFound, "session %s does not exist", sessionID)
	}
	return RecoveryOf(st), nil
}

// RecoveryOf derives the Recovery of a folded state. Calls are reported
// from the latest repair on (the closers follow its repair/applied); for a
// session never repaired, from its open or last turn.
func RecoveryOf(st *session.State) *Recovery {
	r := &Recovery{
		SessionID: st.SessionID, LastSeq: st.LastSeq,
		Repaired: st.Repairs > 0, LastRepairSeq: st.LastRepairSeq,
		Paused: st.Paused, PauseReason: st.PauseReason, MustResume: st.Paused && !st.Closed,
		Closed: st.Closed, Open: st.OpenWork(),
	}
	turn := ""
	switch {
	case st.Turn != nil:
		turn = st.Turn.ID
	case st.LastTurn != nil && st.LastTurn.Reason == schema.TurnInterrupted:
		turn = st.LastTurn.ID
	}
	r.InterruptedTurn = turn
	relevant := func(endSeq uint64, turnID string) bool {
		if r.Repaired {
			return endSeq > st.LastRepairSeq
		}
		return turn != "" && turnID == turn
	}
	for _, t := range st.Tools {
		if t.Phase != session.PhaseDone || !relevant(t.EndSeq, t.TurnID) {
			continue
		}
		c := RecoveryCall{ToolCallID: t.ID, TurnID: t.TurnID, Name: t.Name, Idempotent: t.Idempotent, Status: t.Status}
		switch t.Status {
		case schema.ToolNotStarted:
			r.Reschedule = append(r.Reschedule, c)
		case schema.ToolOutcomeUnknown:
			if t.Idempotent {
				r.Retry = append(r.Retry, c)
			} else {
				r.CheckWorld = append(r.CheckWorld, c)
			}
		}
	}
	for _, a := range st.Approvals {
		switch {
		case a.Open():
			r.PendingApprovals = append(r.PendingApprovals, a.ID)
		case a.Decision == schema.DecisionExpired && relevant(a.EndSeq, a.TurnID):
			r.ExpiredApprovals = append(r.ExpiredApprovals, a.ID)
		}
	}
	byID := func(cs []RecoveryCall) {
		sort.Slice(cs, func(i, j int) bool { return cs[i].ToolCallID < cs[j].ToolCallID })
	}
	byID(r.Reschedule)
	byID(r.CheckWorld)
	byID(r.Retry)
	sort.Strings(r.PendingApprovals)
	sort.Strings(r.ExpiredApprovals)
	return r
}

var _ StateLoader = (*Client)(nil)

// ReaderLoader loads states through a Reader (a process that reads pages
// in process rather than through a Client).
type ReaderLoader struct{ Reader Reader }

// LoadState folds every stored event of the session (see Load).
func (l ReaderLoader) LoadState(ctx context.Context, sessionID string) (*session.State, error) {
	return Load(ctx, l.Reader, sessionID)
}
