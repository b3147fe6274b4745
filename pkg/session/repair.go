package session

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Closer kinds as listed in repair/applied's data.closed: the OpenKind of
// each item a repair closed ("turn" for the open turn).
const (
	ClosedTurn = string(OpenTurn)
)

// DefaultRepairReason is repair/applied's reason when none is given.
const DefaultRepairReason = "lease expired"

// RepairedBy is the `by` of the approval/decided expired events a repair writes.
const RepairedBy = "sessionlog-repairer"

// RepairOptions tunes PlanRepair.
type RepairOptions struct {
	// KeepApprovalsPending leaves pending approvals open instead of writing
	// approval/decided expired. A turn holding a kept approval cannot end,
	// so it stays open too (the session is still paused).
	KeepApprovalsPending bool
	// Reason goes into repair/applied (default DefaultRepairReason) and,
	// prefixed with "repaired: ", into session/paused.
	Reason string
	// LeaseExpiredAt is when the holder's lease expired, if known.
	LeaseExpiredAt *time.Time
	// Now stamps the events' time (display only; order is seq). Zero means
	// time.Now().
	Now time.Time
}

// RepairEventID is the event id of the event at position i of a plan made
// against lastSeq. The session id is not part of it because the stored
// idempotency key (Nats-Msg-Id) is "<sessionId>:<eventId>" already, and a
// session id can be as long as an id may be. Plans that keep approvals
// pending use another prefix: two repairers configured differently that
// race on the same state then lose the sequence check against each other
// instead of deduplicating into a batch whose content differs from what
// the loser planned.
func RepairEventID(lastSeq uint64, i int, keepApprovals bool) string {
	p := "repair"
	if keepApprovals {
		p = "repairk"
	}
	return fmt.Sprintf("%s-%d-%d", p, lastSeq, i)
}

// PlanRepair returns the events that close what s left open (DESIGN.md
// section 6), in order: repair/applied listing what is closed; a closer per
// open item in OpenWork order; turn/ended interrupted if a turn is open
// (and not held open by a kept approval); session/paused. Seqs follow
// s.LastSeq, every event is synthetic, and event ids are RepairEventID(
// s.LastSeq, position), so the same plan made twice (by a retry or another
// repairer replica) deduplicates, and a plan made against an older state
// loses the per-subject sequence check.
//
// It returns nil when there is nothing to do: a closed session, a fork
// child still being copied (the forker owns it until its fork/committed,
// and finishes or abandons it), a session with no open work, or a session that is already paused and whose only
// open work is kept approvals (and their turn). A session that is already
// paused with other work open gets the closers but no second
// session/paused: it is paused already, and repair/applied says why the
// closers were written.
func PlanRepair(s *State, opt RepairOptions) []schema.Envelope {
	if s == nil || !s.Exists() || s.Closed || s.Forking {
		return nil
	}
	reason := opt.Reason
	if reason == "" {
		reason = DefaultRepairReason
	}
	now := opt.Now
	if now.IsZero() {
		now = time.Now()
	}
	now = now.UTC()

	type closer struct {
		typ             string
		turn, step, att string
		call            string
		data            any
		closed          schema.Closed
	}
	var closers []closer
	turnKept := false
	for _, it := range s.OpenWork() {
		c := closer{turn: it.TurnID, closed: schema.Closed{Kind: string(it.Kind), ID: it.ID, TurnID: it.TurnID}}
		switch it.Kind {
		case OpenAttempt:
			c.typ, c.att, c.data = schema.TypeAttemptInterrupt, it.ID, schema.Reason{Reason: reason}
		case OpenToolNotStarted:
			c.typ, c.call, c.data = schema.TypeToolResult, it.ID, schema.ToolResult{Status: schema.ToolNotStarted}
		case OpenToolStarted:
			c.typ, c.call, c.data = schema.TypeToolResult, it.ID, schema.ToolResult{Status: schema.ToolOutcomeUnknown}
		case OpenApproval:
			if opt.KeepApprovalsPending {
				if s.Turn != nil && it.TurnID == s.Turn.ID {
					turnKept = true
				}
				continue
			}
			c.typ, c.data = schema.TypeApprovalDecided, schema.ApprovalDecided{ApprovalID: it.ID, Decision: schema.DecisionExpired, By: RepairedBy}
		case OpenJob:
			c.typ, c.data = schema.TypeJobEnded, schema.JobEnded{JobID: it.ID, Status: schema.JobOrphaned}
		case OpenCompaction:
			c.typ, c.data = schema.TypeCompactionAborted, schema.CompactionAborted{CompactionID: it.ID, Reason: reason}
		case OpenStep:
			c.typ, c.step, c.data = schema.TypeStepEnded, it.ID, schema.OptReason{Reason: schema.TurnInterrupted}
		default:
			// A kind this planner does not know cannot be closed safely;
			// State and planner live in one package, so this is a bug.
			panic(fmt.Sprintf("session: PlanRepair: no closer for open %s %s", it.Kind, it.ID))
		}
		closers = append(closers, c)
	}
	if s.Turn != nil && !turnKept {
		closers = append(closers, closer{
			typ: schema.TypeTurnEnded, turn: s.Turn.ID, data: schema.Reason{Reason: schema.TurnInterrupted},
			closed: schema.Closed{Kind: ClosedTurn, ID: s.Turn.ID},
		})
	}
	pause := !s.Paused
	if len(closers) == 0 && !pause {
		return nil
	}
	if len(closers) == 0 && !s.HasOpenWork() {
		return nil
	}

	closed := make([]schema.Closed, 0, len(closers))
	for _, c := range closers {
		closed = append(closed, c.closed)
	}
	n := 1 + len(closers)
	if pause {
		n++
	}
	out := make([]schema.Envelope, 0, n)
	add := func(typ, turn, step, att, call string, data any) {
		b, err := json.Marshal(data)
		if err != nil {
			panic(fmt.Sprintf("session: PlanRepair: %v", err))
		}
		i := len(out)
		out = append(out, schema.Envelope{
			SchemaVersion: schema.Version,
			SessionID:     s.SessionID,
			Seq:           s.LastSeq + 1 + uint64(i),
			EventID:       RepairEventID(s.LastSeq, i, opt.KeepApprovalsPending),
			Time:          now,
			Type:          typ,
			TurnID:        turn,
			StepID:        step,
			AttemptID:     att,
			ToolCallID:    call,
			Synthetic:     true,
			Data:          b,
		})
	}
	var expired *time.Time
	if opt.LeaseExpiredAt != nil {
		t := opt.LeaseExpiredAt.UTC()
		expired = &t
	}
	add(schema.TypeRepairApplied, "", "", "", "", schema.RepairApplied{
		Reason: reason, Closed: closed, LeaseExpiredAt: expired, PlannedAtSeq: s.LastSeq,
	})
	for _, c := range closers {
		add(c.typ, c.turn, c.step, c.att, c.call, c.data)
	}
	if pause {
		add(schema.TypeSessionPaused, "", "", "", "", schema.Reason{Reason: "repaired: " + reason})
	}
	return out
}
