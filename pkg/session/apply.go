package session

import (
	"fmt"
	"strings"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

func structure(format string, args ...any) error {
	return schema.Errorf(schema.CodeStructure, format, args...)
}

// invalid is the refusal of an event whose data does not decode as its
// type's.
func invalid(e *schema.Envelope, err error) error {
	return schema.Errorf(schema.CodeInvalidEvent, "%s: %v", e.Type, err)
}

func describe(items []OpenItem) string {
	parts := make([]string, len(items))
	for i, it := range items {
		parts[i] = fmt.Sprintf("%s %s", it.Kind, it.ID)
	}
	return strings.Join(parts, ", ")
}

// change is what folding one event changes in a State. The rules of the
// event's family (rules_*.go) fill it in as they check the event against
// the state; every check comes before the change is complete, so a
// refused event changes nothing, and the commit checks nothing again.
type change struct {
	// seq is the event's seq (e.Seq may be 0: the next).
	seq    uint64
	family family // whose commit makes the change; noChange: none
	// What the rule decoded or found, for the commit: the event's data (a
	// pointer to its schema type), a map key or id hash it computed, the
	// item the event moves on or ends.
	data       any
	key        string
	hash       uint64
	item       *Item
	tool       *ToolCall
	approval   *Approval
	compaction *Compaction
}

// family names the rules an event falls under, each in a file of its own.
type family uint8

const (
	noChange         family = iota // ignorable, or nothing to change (message/user)
	familySession                  // rules_session.go
	familyTurn                     // rules_turn.go: turns, steps, attempts, messages
	familyTool                     // rules_tool.go
	familyApproval                 // rules_approval.go
	familyCompaction               // rules_compaction.go
	familyGoal                     // rules_goal.go
	familyJob                      // rules_job.go
	familyForkRepair               // rules_fork.go: fork/committed, repair/applied
)

// Check reports whether e may be appended next, without changing s. The
// error is a *schema.Error with code structure, paused, closed or forking.
// e.Seq, when set, must be LastSeq+1.
func (s *State) Check(e *schema.Envelope) error {
	var c change
	return s.check(e, &c)
}

// Apply checks e and folds it into s. On error s is unchanged.
func (s *State) Apply(e *schema.Envelope) error {
	var c change
	if err := s.check(e, &c); err != nil {
		return err
	}
	s.commit(e, &c)
	return nil
}

// Plan is an event checked against a State with what folding it changes,
// so that it is checked once when the fold comes later (the writer checks
// an event before it is stored and folds it once it is).
type Plan struct {
	s  *State
	at uint64 // s.LastSeq when planned
	e  *schema.Envelope
	c  change
}

// Plan checks e as Check does and returns what folding it changes, for
// Commit. Neither s nor e may change in between.
func (s *State) Plan(e *schema.Envelope) (Plan, error) {
	p := Plan{s: s, at: s.LastSeq, e: e}
	if err := s.check(e, &p.c); err != nil {
		return Plan{}, err
	}
	return p, nil
}

// Commit folds a plan s made, as Apply would have, without checking the
// event again. A plan of another state, or of s before it changed, is
// refused and s left unchanged.
func (s *State) Commit(p Plan) error {
	if p.s != s || p.at != s.LastSeq || p.e == nil {
		return structure("a plan made at seq %d is committed to a state at seq %d", p.at, s.LastSeq)
	}
	s.commit(p.e, &p.c)
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

// check checks e against s: first the rules every event is held to (its
// place in the session, the session's condition, its ids), then those of
// its family, which fill in c. It changes nothing.
func (s *State) check(e *schema.Envelope, c *change) error {
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
	c.seq = s.LastSeq + 1
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
	return s.rule(e, c)
}

// rule hands e to the rules of its family: the table of which event
// types each family holds.
func (s *State) rule(e *schema.Envelope, c *change) error {
	switch e.Type {
	case schema.TypeSessionCreated, schema.TypeSessionPaused, schema.TypeSessionResumed,
		schema.TypeSessionClosed, schema.TypeSessionTitled, schema.TypeSessionGranted, schema.TypeContextRewound:
		c.family = familySession
		return s.sessionRule(e, c)
	case schema.TypeTurnStarted, schema.TypeTurnEnded, schema.TypeStepStarted, schema.TypeStepEnded,
		schema.TypeAttemptStarted, schema.TypeMessageAssistant, schema.TypeAttemptInterrupt, schema.TypeMessageUser:
		c.family = familyTurn
		return s.turnRule(e, c)
	case schema.TypeToolRequested, schema.TypeToolStarted, schema.TypeToolResult:
		c.family = familyTool
		return s.toolRule(e, c)
	case schema.TypeApprovalRequested, schema.TypeApprovalDecided:
		c.family = familyApproval
		return s.approvalRule(e, c)
	case schema.TypeCompactionStarted, schema.TypeCompactionEnded, schema.TypeCompactionAborted:
		c.family = familyCompaction
		return s.compactionRule(e, c)
	case schema.TypeGoalUpdated:
		c.family = familyGoal
		return s.goalRule(e, c)
	case schema.TypeJobStarted, schema.TypeJobEnded:
		c.family = familyJob
		return s.jobRule(e, c)
	case schema.TypeRepairApplied, schema.TypeForkCommitted:
		c.family = familyForkRepair
		return s.forkRepairRule(e, c)
	}
	return schema.Errorf(schema.CodeUnknownType, "no rule for event type %q", e.Type)
}

// commit folds e, checked: its family's change c, then the position.
func (s *State) commit(e *schema.Envelope, c *change) {
	switch c.family {
	case familySession:
		s.commitSession(e, c)
	case familyTurn:
		s.commitTurn(e, c)
	case familyTool:
		s.commitTool(e, c)
	case familyApproval:
		s.commitApproval(e, c)
	case familyCompaction:
		s.commitCompaction(e, c)
	case familyGoal:
		s.commitGoal(e, c)
	case familyJob:
		s.commitJob(e, c)
	case familyForkRepair:
		s.commitForkRepair(e, c)
	}
	s.LastSeq = c.seq
	s.LastEventID = e.EventID
	if !e.Time.IsZero() {
		s.LastTime = e.Time
	}
}
