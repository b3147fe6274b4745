package session

import (
	"fmt"
	"slices"
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
	return s.plan(e, false)
}

// Apply checks e and folds it into s. On error s is unchanged.
func (s *State) Apply(e *schema.Envelope) error {
	if err := s.plan(e, true); err != nil {
		return err
	}
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

// plan validates e against s and, if apply is set, folds it. Every check
// comes before the change it guards, so a refused event leaves s as it
// was; the change is made in place rather than returned as a closure,
// which would be allocated for every event.
func (s *State) plan(e *schema.Envelope, apply bool) error {
	if e.Seq != 0 && e.Seq != s.LastSeq+1 {
		return structure("seq %d does not follow last seq %d", e.Seq, s.LastSeq)
	}
	if e.SessionID != "" && s.SessionID != "" && e.SessionID != s.SessionID {
		return structure("event of session %q folded into %q", e.SessionID, s.SessionID)
	}
	if s.LastSeq == 0 {
		if e.Type != schema.TypeSessionCreated {
			return structure("the first event of a session must be session/created, got %s", e.Type)
		}
	} else if e.Type == schema.TypeSessionCreated {
		return structure("session/created is only valid as seq 1")
	}
	if s.Closed {
		return schema.Errorf(schema.CodeClosed, "session is closed (%s): nothing may follow", s.CloseReason)
	}
	if s.Forking && !e.Synthetic {
		return schema.Errorf(schema.CodeForking, "session is a fork still being copied; wait for fork/committed")
	}
	if s.Paused && !acceptedWhilePaused(e) {
		return schema.Errorf(schema.CodePaused, "session is paused (%s): only session/resumed, goal/updated and session/closed are accepted", s.PauseReason)
	}
	spec, known := schema.Lookup(e.Type)
	if !known || spec.Ignorable {
		// An ignorable type (tool/late-result) changes nothing of the
		// state: display data only.
		if e.Ignorable {
			return nil
		}
		if known {
			return schema.Errorf(schema.CodeInvalidEvent, "%s must be marked ignorable", e.Type)
		}
		return schema.Errorf(schema.CodeUnknownType, "unknown event type %q", e.Type)
	}
	// Validate checks ids too; the fold must not trust that it ran.
	if err := spec.CheckIDs(e); err != nil {
		return err
	}
	// Events that name a turn must name the open one.
	if e.TurnID != "" && e.Type != schema.TypeTurnStarted {
		if s.Turn == nil {
			return structure("%s names turn %s but no turn is open", e.Type, e.TurnID)
		}
		if s.Turn.ID != e.TurnID {
			return structure("%s names turn %s but the open turn is %s", e.Type, e.TurnID, s.Turn.ID)
		}
	}
	seq := e.Seq
	if seq == 0 {
		seq = s.LastSeq + 1
	}
	bad := func(err error) error {
		return schema.Errorf(schema.CodeInvalidEvent, "%s: %v", e.Type, err)
	}

	switch e.Type {
	case schema.TypeSessionCreated:
		var d schema.SessionCreated
		if err := e.DecodeData(&d); err != nil {
			return bad(err)
		}
		if apply {
			s.Meta = d
			s.CreatedAt = e.Time
			if s.SessionID == "" {
				s.SessionID = e.SessionID
			}
			s.Forking = d.Parent != nil
		}
		return nil
	case schema.TypeSessionPaused:
		var d schema.Reason
		if err := e.DecodeData(&d); err != nil {
			return bad(err)
		}
		if apply {
			s.Paused, s.PauseReason = true, d.Reason
		}
		return nil
	case schema.TypeSessionResumed:
		if !s.Paused {
			return structure("session/resumed while the session is not paused")
		}
		if apply {
			s.Paused, s.PauseReason = false, ""
		}
		return nil
	case schema.TypeSessionClosed:
		var d schema.Reason
		if err := e.DecodeData(&d); err != nil {
			return bad(err)
		}
		if apply {
			s.Closed, s.CloseReason, s.Forking = true, d.Reason, false
		}
		return nil

	case schema.TypeSessionTitled:
		var d schema.SessionTitled
		if err := e.DecodeData(&d); err != nil {
			return bad(err)
		}
		if apply {
			s.Meta.Title = d.Title
		}
		return nil
	case schema.TypeSessionGranted:
		var d schema.SessionGranted
		if err := e.DecodeData(&d); err != nil {
			return bad(err)
		}
		if apply {
			for _, g := range d.Grants {
				if !slices.Contains(s.Meta.Grants, g) {
					s.Meta.Grants = append(s.Meta.Grants, g)
				}
			}
		}
		return nil
	case schema.TypeContextRewound:
		// The model's context goes back to the event at toSeq: it must be
		// an earlier event of this session. Open work stays open (the
		// rewind changes what the model sees next, not what ran).
		var d schema.ContextRewound
		if err := e.DecodeData(&d); err != nil {
			return bad(err)
		}
		if d.ToSeq == 0 || d.ToSeq >= seq {
			return structure("context/rewound toSeq %d must be between 1 and %d", d.ToSeq, seq-1)
		}
		if apply {
			s.Rewinds++
			s.LastRewind = &Rewind{Seq: seq, ToSeq: d.ToSeq, ToEventID: d.ToEventID}
		}
		return nil

	case schema.TypeTurnStarted:
		if s.Turn != nil {
			return structure("turn %s is still open: at most one open turn", s.Turn.ID)
		}
		h := idHash(e.TurnID)
		if _, used := s.usedTurns[h]; used {
			return structure("turn id %s was already used in this session", e.TurnID)
		}
		if apply {
			s.Turn = &Turn{Item: Item{ID: e.TurnID, StartSeq: seq}}
			if s.usedTurns == nil {
				s.usedTurns = map[uint64]struct{}{}
			}
			s.usedTurns[h] = struct{}{}
			s.Turns++
		}
		return nil
	case schema.TypeTurnEnded:
		if open := s.openInTurn(e.TurnID); len(open) > 0 {
			return structure("turn %s cannot end: still open: %s", e.TurnID, describe(open))
		}
		var d schema.Reason
		if err := e.DecodeData(&d); err != nil {
			return bad(err)
		}
		if apply {
			t := s.Turn
			t.EndSeq, t.Reason = seq, d.Reason
			s.endTurn(t)
			s.LastTurn, s.Turn = t, nil
		}
		return nil

	case schema.TypeStepStarted:
		k := key(e.TurnID, e.StepID)
		if _, open := s.Steps[k]; open {
			return structure("step %s is already open", e.StepID)
		}
		if apply {
			if s.Steps == nil {
				s.Steps = map[string]*Item{}
			}
			s.Steps[k] = &Item{ID: e.StepID, TurnID: e.TurnID, StartSeq: seq}
		}
		return nil
	case schema.TypeStepEnded:
		k := key(e.TurnID, e.StepID)
		if _, open := s.Steps[k]; !open {
			return structure("step/ended for step %s that is not open", e.StepID)
		}
		if apply {
			delete(s.Steps, k)
		}
		return nil

	case schema.TypeAttemptStarted:
		k := key(e.TurnID, e.AttemptID)
		if _, used := s.Attempts[k]; used {
			return structure("attempt id %s was already used in turn %s: a new attempt needs a new attemptId", e.AttemptID, e.TurnID)
		}
		if apply {
			if s.Attempts == nil {
				s.Attempts = map[string]*Item{}
			}
			s.Attempts[k] = &Item{ID: e.AttemptID, TurnID: e.TurnID, StartSeq: seq}
		}
		return nil
	case schema.TypeMessageAssistant, schema.TypeAttemptInterrupt:
		a, ok := s.Attempts[key(e.TurnID, e.AttemptID)]
		if !ok {
			return structure("%s for attempt %s that was never started", e.Type, e.AttemptID)
		}
		if !a.Open() {
			return structure("%s for attempt %s that already ended at seq %d", e.Type, e.AttemptID, a.EndSeq)
		}
		if apply {
			a.EndSeq = seq
		}
		return nil
	case schema.TypeMessageUser:
		return nil

	case schema.TypeToolRequested:
		if t, used := s.Tools[e.ToolCallID]; used {
			return structure("tool call %s was already requested at seq %d", e.ToolCallID, t.StartSeq)
		}
		if at, spent := spentAt(s.spentTools, e.ToolCallID); spent {
			return structure("tool call %s was already requested at seq %d", e.ToolCallID, at)
		}
		var d schema.ToolRequested
		if err := e.DecodeData(&d); err != nil {
			return bad(err)
		}
		if apply {
			if s.Tools == nil {
				s.Tools = map[string]*ToolCall{}
			}
			s.Tools[e.ToolCallID] = &ToolCall{Item: Item{ID: e.ToolCallID, TurnID: e.TurnID, StartSeq: seq}, Name: d.Name, Idempotent: d.Idempotent, Phase: PhaseRequested}
		}
		return nil
	case schema.TypeToolStarted:
		t, ok := s.Tools[e.ToolCallID]
		switch {
		case !ok:
			if at, spent := spentAt(s.spentTools, e.ToolCallID); spent {
				return structure("tool call %s belongs to a turn that has ended (requested at seq %d)", e.ToolCallID, at)
			}
			return structure("tool/started for call %s that was never requested", e.ToolCallID)
		case t.TurnID != e.TurnID:
			return structure("tool call %s belongs to turn %s", e.ToolCallID, t.TurnID)
		case t.Phase != PhaseRequested:
			return structure("tool call %s is already %s", e.ToolCallID, t.Phase)
		}
		if apply {
			t.Phase, t.StartedSeq = PhaseStarted, seq
		}
		return nil
	case schema.TypeToolResult:
		t, ok := s.Tools[e.ToolCallID]
		if !ok {
			if at, spent := spentAt(s.spentTools, e.ToolCallID); spent {
				return structure("tool call %s belongs to a turn that has ended (requested at seq %d)", e.ToolCallID, at)
			}
			return structure("tool/result for call %s that was never requested", e.ToolCallID)
		}
		if t.TurnID != e.TurnID {
			return structure("tool call %s belongs to turn %s", e.ToolCallID, t.TurnID)
		}
		if t.Phase == PhaseDone {
			return structure("tool call %s already has a result (%s): exactly one per call", e.ToolCallID, t.Status)
		}
		var d schema.ToolResult
		if err := e.DecodeData(&d); err != nil {
			return bad(err)
		}
		switch d.Status {
		case schema.ToolOK, schema.ToolError, schema.ToolOutcomeUnknown:
			if t.Phase != PhaseStarted {
				return structure("tool/result %s for call %s needs tool/started first", d.Status, e.ToolCallID)
			}
		case schema.ToolNotStarted:
			if t.Phase != PhaseRequested {
				return structure("tool/result not_started for call %s that was started: its outcome is unknown", e.ToolCallID)
			}
		default:
			return bad(fmt.Errorf("unknown status %q", d.Status))
		}
		if apply {
			t.Phase, t.Status, t.EndSeq = PhaseDone, d.Status, seq
		}
		return nil

	case schema.TypeApprovalRequested:
		var d schema.ApprovalRequested
		if err := e.DecodeData(&d); err != nil {
			return bad(err)
		}
		if a, used := s.Approvals[d.ApprovalID]; used {
			return structure("approval %s was already requested at seq %d", d.ApprovalID, a.StartSeq)
		}
		if at, spent := spentAt(s.spentApprovals, d.ApprovalID); spent {
			return structure("approval %s was already requested at seq %d", d.ApprovalID, at)
		}
		if d.ToolCallID != "" {
			t, ok := s.Tools[d.ToolCallID]
			switch {
			case !ok:
				if at, spent := spentAt(s.spentTools, d.ToolCallID); spent {
					return structure("approval %s names tool call %s of a turn that has ended (requested at seq %d)", d.ApprovalID, d.ToolCallID, at)
				}
				return structure("approval %s names tool call %s that was never requested", d.ApprovalID, d.ToolCallID)
			case t.TurnID != e.TurnID:
				return structure("approval %s names tool call %s of turn %s", d.ApprovalID, d.ToolCallID, t.TurnID)
			}
		}
		if apply {
			if s.Approvals == nil {
				s.Approvals = map[string]*Approval{}
			}
			s.Approvals[d.ApprovalID] = &Approval{Item: Item{ID: d.ApprovalID, TurnID: e.TurnID, StartSeq: seq}, ToolCallID: d.ToolCallID, Prompt: d.Prompt}
		}
		return nil
	case schema.TypeApprovalDecided:
		var d schema.ApprovalDecided
		if err := e.DecodeData(&d); err != nil {
			return bad(err)
		}
		a, ok := s.Approvals[d.ApprovalID]
		switch {
		case !ok:
			if _, spent := spentAt(s.spentApprovals, d.ApprovalID); spent {
				return structure("approval %s was already decided, in a turn that has ended: one decision per approval", d.ApprovalID)
			}
			return structure("approval/decided for approval %s that was never requested", d.ApprovalID)
		case !a.Open():
			return structure("approval %s was already decided (%s): one decision per approval", d.ApprovalID, a.Decision)
		case a.TurnID != e.TurnID:
			return structure("approval %s belongs to turn %s", d.ApprovalID, a.TurnID)
		}
		if apply {
			a.Decision, a.EndSeq = d.Decision, seq
		}
		return nil

	case schema.TypeCompactionStarted:
		var d schema.CompactionStarted
		if err := e.DecodeData(&d); err != nil {
			return bad(err)
		}
		for _, c := range s.Compactions {
			if c.Open() {
				return structure("compaction %s is still open", c.ID)
			}
		}
		if _, used := s.Compactions[d.CompactionID]; used {
			return structure("compaction id %s was already used", d.CompactionID)
		}
		if d.ThroughSeq == 0 || d.ThroughSeq >= seq {
			return structure("compaction throughSeq %d must be between 1 and %d", d.ThroughSeq, seq-1)
		}
		if apply {
			if s.Compactions == nil {
				s.Compactions = map[string]*Compaction{}
			}
			s.Compactions[d.CompactionID] = &Compaction{Item: Item{ID: d.CompactionID, TurnID: e.TurnID, StartSeq: seq}, ThroughSeq: d.ThroughSeq}
		}
		return nil
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
			return structure("%s for compaction %s that was never started", e.Type, id)
		case !c.Open():
			return structure("compaction %s already %s", id, c.Outcome)
		case e.Type == schema.TypeCompactionEnded && through != c.ThroughSeq:
			return structure("compaction %s ends through seq %d but started through %d", id, through, c.ThroughSeq)
		}
		if apply {
			c.EndSeq = seq
			if e.Type == schema.TypeCompactionEnded {
				c.Outcome = "ended"
				s.Compacted = c
			} else {
				c.Outcome = "aborted"
			}
		}
		return nil

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
			return structure("goal revision %d, want %d (revisions increase by 1)", d.Revision, want)
		}
		if apply {
			s.Goal = &Goal{GoalUpdated: d, Seq: seq}
		}
		return nil

	case schema.TypeJobStarted:
		var d schema.JobStarted
		if err := e.DecodeData(&d); err != nil {
			return bad(err)
		}
		if _, used := s.Jobs[d.JobID]; used {
			return structure("job id %s was already used", d.JobID)
		}
		if apply {
			if s.Jobs == nil {
				s.Jobs = map[string]*Item{}
			}
			s.Jobs[d.JobID] = &Item{ID: d.JobID, TurnID: e.TurnID, StartSeq: seq}
		}
		return nil
	case schema.TypeJobEnded:
		var d schema.JobEnded
		if err := e.DecodeData(&d); err != nil {
			return bad(err)
		}
		j, ok := s.Jobs[d.JobID]
		switch {
		case !ok:
			return structure("job/ended for job %s that was never started", d.JobID)
		case !j.Open():
			return structure("job %s already ended", d.JobID)
		}
		if apply {
			j.EndSeq = seq
		}
		return nil

	case schema.TypeRepairApplied:
		if apply {
			s.Repairs++
			s.LastRepairSeq = seq
		}
		return nil
	case schema.TypeForkCommitted:
		var d schema.ForkCommitted
		if err := e.DecodeData(&d); err != nil {
			return bad(err)
		}
		if !s.Forking || s.Meta.Parent == nil {
			return structure("fork/committed in a session that is not being forked")
		}
		// A fork of a fork copies its parent's own, older fork/committed
		// (with a shorter seed): only the one with this session's
		// seedLength ends the copy.
		switch own := s.Meta.Parent.SeedLength; {
		case d.SeedLength > own:
			return structure("fork/committed seedLength %d is longer than this fork's seed %d", d.SeedLength, own)
		case d.SeedLength < own:
			return nil
		}
		if apply {
			s.Forking, s.ForkCommittedSeq = false, seq
		}
		return nil
	}
	return schema.Errorf(schema.CodeUnknownType, "no rule for event type %q", e.Type)
}
