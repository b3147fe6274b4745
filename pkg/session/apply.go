package session

import (
	"fmt"
	"strings"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

func structure(format string, args ...any) error {
	return schema.Errorf(schema.CodeStructure, format, args...)
}

func describe(items []OpenItem) string {
	parts := make([]string, len(items))
	for i, it := range items {
		parts[i] = fmt.Sprintf("%s %s", it.Kind, it.ID)
	}
	return strings.Join(parts, ", ")
}

// Check reports whether e may be appended next, without changing s. The
// error is a *schema.Error with code structure, paused, closed or forking.
// e.Seq, when set, must be LastSeq+1.
func (s *State) Check(e *schema.Envelope) error {
	_, err := s.plan(e)
	return err
}

// Apply checks e and folds it into s. On error s is unchanged.
func (s *State) Apply(e *schema.Envelope) error {
	mut, err := s.plan(e)
	if err != nil {
		return err
	}
	mut()
	s.track(e)
	s.LastSeq++ // plan checked that e.Seq is 0 or LastSeq+1
	s.LastEventID = e.EventID
	if !e.Time.IsZero() {
		s.LastTime = e.Time
	}
	return nil
}

// acceptedWhilePaused: the agent may only resume, update the goal or close a
// paused session. Services may also finish what they do: the forker's
// fork/committed (a fork of a repaired session ends its copy paused), and a
// repair batch (marker, closers, turn/ended; it is paused already) for a
// session paused with work still open, which nothing else could close.
func acceptedWhilePaused(e *schema.Envelope) bool {
	switch e.Type {
	case schema.TypeSessionResumed, schema.TypeGoalUpdated, schema.TypeSessionClosed:
		return true
	case schema.TypeForkCommitted, schema.TypeRepairApplied,
		schema.TypeAttemptInterrupt, schema.TypeToolResult, schema.TypeApprovalDecided,
		schema.TypeJobEnded, schema.TypeCompactionAborted, schema.TypeStepEnded, schema.TypeTurnEnded:
		return e.Synthetic
	}
	return false
}

// plan validates e against s and returns the mutation that folds it.
func (s *State) plan(e *schema.Envelope) (func(), error) {
	if e.Seq != 0 && e.Seq != s.LastSeq+1 {
		return nil, structure("seq %d does not follow last seq %d", e.Seq, s.LastSeq)
	}
	if e.SessionID != "" && s.SessionID != "" && e.SessionID != s.SessionID {
		return nil, structure("event of session %q folded into %q", e.SessionID, s.SessionID)
	}
	noop := func() {}
	if s.LastSeq == 0 {
		if e.Type != schema.TypeSessionCreated {
			return nil, structure("the first event of a session must be session/created, got %s", e.Type)
		}
	} else if e.Type == schema.TypeSessionCreated {
		return nil, structure("session/created is only valid as seq 1")
	}
	if s.Closed {
		return nil, schema.Errorf(schema.CodeClosed, "session is closed (%s): nothing may follow", s.CloseReason)
	}
	if s.Forking && !e.Synthetic {
		return nil, schema.Errorf(schema.CodeForking, "session is a fork still being copied; wait for fork/committed")
	}
	if s.Paused && !acceptedWhilePaused(e) {
		return nil, schema.Errorf(schema.CodePaused, "session is paused (%s): only session/resumed, goal/updated and session/closed are accepted", s.PauseReason)
	}
	spec, known := schema.Lookup(e.Type)
	if !known {
		if e.Ignorable {
			return noop, nil
		}
		return nil, schema.Errorf(schema.CodeUnknownType, "unknown event type %q", e.Type)
	}
	// Validate checks ids too; the fold must not trust that it ran.
	if err := spec.CheckIDs(e); err != nil {
		return nil, err
	}
	// Events that name a turn must name the open one.
	if e.TurnID != "" && e.Type != schema.TypeTurnStarted {
		if s.Turn == nil {
			return nil, structure("%s names turn %s but no turn is open", e.Type, e.TurnID)
		}
		if s.Turn.ID != e.TurnID {
			return nil, structure("%s names turn %s but the open turn is %s", e.Type, e.TurnID, s.Turn.ID)
		}
	}
	seq := e.Seq
	if seq == 0 {
		seq = s.LastSeq + 1
	}
	bad := func(err error) (func(), error) {
		return nil, schema.Errorf(schema.CodeInvalidEvent, "%s: %v", e.Type, err)
	}

	switch e.Type {
	case schema.TypeSessionCreated:
		var d schema.SessionCreated
		if err := e.DecodeData(&d); err != nil {
			return bad(err)
		}
		return func() {
			s.Meta = d
			s.CreatedAt = e.Time
			if s.SessionID == "" {
				s.SessionID = e.SessionID
			}
			s.Forking = d.Parent != nil
		}, nil
	case schema.TypeSessionPaused:
		var d schema.Reason
		if err := e.DecodeData(&d); err != nil {
			return bad(err)
		}
		return func() { s.Paused, s.PauseReason = true, d.Reason }, nil
	case schema.TypeSessionResumed:
		if !s.Paused {
			return nil, structure("session/resumed while the session is not paused")
		}
		return func() { s.Paused, s.PauseReason = false, "" }, nil
	case schema.TypeSessionClosed:
		var d schema.Reason
		if err := e.DecodeData(&d); err != nil {
			return bad(err)
		}
		return func() { s.Closed, s.CloseReason, s.Forking = true, d.Reason, false }, nil

	case schema.TypeTurnStarted:
		if s.Turn != nil {
			return nil, structure("turn %s is still open: at most one open turn", s.Turn.ID)
		}
		if _, used := s.usedTurns[e.TurnID]; used {
			return nil, structure("turn id %s was already used in this session", e.TurnID)
		}
		return func() {
			s.Turn = &Turn{Item: Item{ID: e.TurnID, StartSeq: seq}}
			if s.usedTurns == nil {
				s.usedTurns = map[string]struct{}{}
			}
			s.usedTurns[e.TurnID] = struct{}{}
			s.Turns++
		}, nil
	case schema.TypeTurnEnded:
		if open := s.openInTurn(e.TurnID); len(open) > 0 {
			return nil, structure("turn %s cannot end: still open: %s", e.TurnID, describe(open))
		}
		var d schema.Reason
		if err := e.DecodeData(&d); err != nil {
			return bad(err)
		}
		return func() {
			t := s.Turn
			t.EndSeq, t.Reason = seq, d.Reason
			s.endTurn(t)
			s.LastTurn, s.Turn = t, nil
		}, nil

	case schema.TypeStepStarted:
		k := key(e.TurnID, e.StepID)
		if _, open := s.Steps[k]; open {
			return nil, structure("step %s is already open", e.StepID)
		}
		return func() {
			if s.Steps == nil {
				s.Steps = map[string]*Item{}
			}
			s.Steps[k] = &Item{ID: e.StepID, TurnID: e.TurnID, StartSeq: seq}
		}, nil
	case schema.TypeStepEnded:
		k := key(e.TurnID, e.StepID)
		if _, open := s.Steps[k]; !open {
			return nil, structure("step/ended for step %s that is not open", e.StepID)
		}
		return func() { delete(s.Steps, k) }, nil

	case schema.TypeAttemptStarted:
		k := key(e.TurnID, e.AttemptID)
		if _, used := s.Attempts[k]; used {
			return nil, structure("attempt id %s was already used in turn %s: a new attempt needs a new attemptId", e.AttemptID, e.TurnID)
		}
		return func() {
			if s.Attempts == nil {
				s.Attempts = map[string]*Item{}
			}
			s.Attempts[k] = &Item{ID: e.AttemptID, TurnID: e.TurnID, StartSeq: seq}
		}, nil
	case schema.TypeMessageAssistant, schema.TypeAttemptInterrupt:
		a, ok := s.Attempts[key(e.TurnID, e.AttemptID)]
		if !ok {
			return nil, structure("%s for attempt %s that was never started", e.Type, e.AttemptID)
		}
		if !a.Open() {
			return nil, structure("%s for attempt %s that already ended at seq %d", e.Type, e.AttemptID, a.EndSeq)
		}
		return func() { a.EndSeq = seq }, nil
	case schema.TypeMessageUser:
		return noop, nil

	case schema.TypeToolRequested:
		if t, used := s.tool(e.ToolCallID); used {
			return nil, structure("tool call %s was already requested at seq %d", e.ToolCallID, t.StartSeq)
		}
		var d schema.ToolRequested
		if err := e.DecodeData(&d); err != nil {
			return bad(err)
		}
		return func() {
			if s.Tools == nil {
				s.Tools = map[string]*ToolCall{}
			}
			s.Tools[e.ToolCallID] = &ToolCall{Item: Item{ID: e.ToolCallID, TurnID: e.TurnID, StartSeq: seq}, Name: d.Name, Idempotent: d.Idempotent, Phase: PhaseRequested}
		}, nil
	case schema.TypeToolStarted:
		t, ok := s.tool(e.ToolCallID)
		switch {
		case !ok:
			return nil, structure("tool/started for call %s that was never requested", e.ToolCallID)
		case t.TurnID != e.TurnID:
			return nil, structure("tool call %s belongs to turn %s", e.ToolCallID, t.TurnID)
		case t.Phase != PhaseRequested:
			return nil, structure("tool call %s is already %s", e.ToolCallID, t.Phase)
		}
		return func() { t.Phase, t.StartedSeq = PhaseStarted, seq }, nil
	case schema.TypeToolResult:
		t, ok := s.tool(e.ToolCallID)
		if !ok {
			return nil, structure("tool/result for call %s that was never requested", e.ToolCallID)
		}
		if t.TurnID != e.TurnID {
			return nil, structure("tool call %s belongs to turn %s", e.ToolCallID, t.TurnID)
		}
		if t.Phase == PhaseDone {
			return nil, structure("tool call %s already has a result (%s): exactly one per call", e.ToolCallID, t.Status)
		}
		var d schema.ToolResult
		if err := e.DecodeData(&d); err != nil {
			return bad(err)
		}
		switch d.Status {
		case schema.ToolOK, schema.ToolError, schema.ToolOutcomeUnknown:
			if t.Phase != PhaseStarted {
				return nil, structure("tool/result %s for call %s needs tool/started first", d.Status, e.ToolCallID)
			}
		case schema.ToolNotStarted:
			if t.Phase != PhaseRequested {
				return nil, structure("tool/result not_started for call %s that was started: its outcome is unknown", e.ToolCallID)
			}
		default:
			return bad(fmt.Errorf("unknown status %q", d.Status))
		}
		return func() { t.Phase, t.Status, t.EndSeq = PhaseDone, d.Status, seq }, nil

	case schema.TypeApprovalRequested:
		var d schema.ApprovalRequested
		if err := e.DecodeData(&d); err != nil {
			return bad(err)
		}
		if a, used := s.approval(d.ApprovalID); used {
			return nil, structure("approval %s was already requested at seq %d", d.ApprovalID, a.StartSeq)
		}
		if d.ToolCallID != "" {
			t, ok := s.tool(d.ToolCallID)
			switch {
			case !ok:
				return nil, structure("approval %s names tool call %s that was never requested", d.ApprovalID, d.ToolCallID)
			case t.TurnID != e.TurnID:
				return nil, structure("approval %s names tool call %s of turn %s", d.ApprovalID, d.ToolCallID, t.TurnID)
			}
		}
		return func() {
			if s.Approvals == nil {
				s.Approvals = map[string]*Approval{}
			}
			s.Approvals[d.ApprovalID] = &Approval{Item: Item{ID: d.ApprovalID, TurnID: e.TurnID, StartSeq: seq}, ToolCallID: d.ToolCallID, Prompt: d.Prompt}
		}, nil
	case schema.TypeApprovalDecided:
		var d schema.ApprovalDecided
		if err := e.DecodeData(&d); err != nil {
			return bad(err)
		}
		a, ok := s.approval(d.ApprovalID)
		switch {
		case !ok:
			return nil, structure("approval/decided for approval %s that was never requested", d.ApprovalID)
		case !a.Open():
			return nil, structure("approval %s was already decided (%s): one decision per approval", d.ApprovalID, a.Decision)
		case a.TurnID != e.TurnID:
			return nil, structure("approval %s belongs to turn %s", d.ApprovalID, a.TurnID)
		}
		return func() { a.Decision, a.EndSeq = d.Decision, seq }, nil

	case schema.TypeCompactionStarted:
		var d schema.CompactionStarted
		if err := e.DecodeData(&d); err != nil {
			return bad(err)
		}
		for _, c := range s.Compactions {
			if c.Open() {
				return nil, structure("compaction %s is still open", c.ID)
			}
		}
		if _, used := s.Compactions[d.CompactionID]; used {
			return nil, structure("compaction id %s was already used", d.CompactionID)
		}
		if d.ThroughSeq == 0 || d.ThroughSeq >= seq {
			return nil, structure("compaction throughSeq %d must be between 1 and %d", d.ThroughSeq, seq-1)
		}
		return func() {
			if s.Compactions == nil {
				s.Compactions = map[string]*Compaction{}
			}
			s.Compactions[d.CompactionID] = &Compaction{Item: Item{ID: d.CompactionID, TurnID: e.TurnID, StartSeq: seq}, ThroughSeq: d.ThroughSeq}
		}, nil
	case schema.TypeCompactionEnded, schema.TypeCompactionAborted:
		var id string
		var through uint64
		if e.Type == schema.TypeCompactionEnded {
			var d schema.CompactionEnded
			if err := e.DecodeData(&d); err != nil {
				return bad(err)
			}
			id, through = d.CompactionID, d.ThroughSeq
		} else {
			var d schema.CompactionAborted
			if err := e.DecodeData(&d); err != nil {
				return bad(err)
			}
			id = d.CompactionID
		}
		c, ok := s.Compactions[id]
		switch {
		case !ok:
			return nil, structure("%s for compaction %s that was never started", e.Type, id)
		case !c.Open():
			return nil, structure("compaction %s already %s", id, c.Outcome)
		case e.Type == schema.TypeCompactionEnded && through != c.ThroughSeq:
			return nil, structure("compaction %s ends through seq %d but started through %d", id, through, c.ThroughSeq)
		}
		return func() {
			c.EndSeq = seq
			if e.Type == schema.TypeCompactionEnded {
				c.Outcome = "ended"
				s.Compacted = c
			} else {
				c.Outcome = "aborted"
			}
		}, nil

	case schema.TypeGoalUpdated:
		var d schema.GoalUpdated
		if err := e.DecodeData(&d); err != nil {
			return bad(err)
		}
		want := 1
		if s.Goal != nil {
			want = s.Goal.Revision + 1
		}
		if d.Revision != want {
			return nil, structure("goal revision %d, want %d (revisions increase by 1)", d.Revision, want)
		}
		return func() { s.Goal = &Goal{GoalUpdated: d, Seq: seq} }, nil

	case schema.TypeJobStarted:
		var d schema.JobStarted
		if err := e.DecodeData(&d); err != nil {
			return bad(err)
		}
		if _, used := s.Jobs[d.JobID]; used {
			return nil, structure("job id %s was already used", d.JobID)
		}
		return func() {
			if s.Jobs == nil {
				s.Jobs = map[string]*Item{}
			}
			s.Jobs[d.JobID] = &Item{ID: d.JobID, TurnID: e.TurnID, StartSeq: seq}
		}, nil
	case schema.TypeJobEnded:
		var d schema.JobEnded
		if err := e.DecodeData(&d); err != nil {
			return bad(err)
		}
		j, ok := s.Jobs[d.JobID]
		switch {
		case !ok:
			return nil, structure("job/ended for job %s that was never started", d.JobID)
		case !j.Open():
			return nil, structure("job %s already ended", d.JobID)
		}
		return func() { j.EndSeq = seq }, nil

	case schema.TypeRepairApplied:
		return func() { s.Repairs++; s.LastRepairSeq = seq }, nil
	case schema.TypeForkCommitted:
		var d schema.ForkCommitted
		if err := e.DecodeData(&d); err != nil {
			return bad(err)
		}
		if !s.Forking || s.Meta.Parent == nil {
			return nil, structure("fork/committed in a session that is not being forked")
		}
		// A fork of a fork copies its parent's own, older fork/committed
		// (with a shorter seed): only the one with this session's
		// seedLength ends the copy.
		switch own := s.Meta.Parent.SeedLength; {
		case d.SeedLength > own:
			return nil, structure("fork/committed seedLength %d is longer than this fork's seed %d", d.SeedLength, own)
		case d.SeedLength < own:
			return noop, nil
		}
		return func() { s.Forking, s.ForkCommittedSeq = false, seq }, nil
	}
	return nil, schema.Errorf(schema.CodeUnknownType, "no rule for event type %q", e.Type)
}
