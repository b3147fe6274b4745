package session

import (
	"fmt"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// The tool family: a tool call is requested, started and given exactly
// one result, all in the turn that requested it; a call id is used once
// in a session.

func (s *State) toolRule(e *schema.Envelope, c *change) error {
	if e.Type == schema.TypeToolRequested {
		if t, used := s.Tools[e.ToolCallID]; used {
			return structure("tool call %s was already requested at seq %d", e.ToolCallID, t.StartSeq)
		}
		if at, spent := spentAt(s.spentTools, e.ToolCallID); spent {
			return structure("tool call %s was already requested at seq %d", e.ToolCallID, at)
		}
		d := new(schema.ToolRequested)
		if err := e.DecodeData(d); err != nil {
			return invalid(e, err)
		}
		c.data = d
		return nil
	}
	t, ok := s.Tools[e.ToolCallID]
	switch {
	case !ok:
		if at, spent := spentAt(s.spentTools, e.ToolCallID); spent {
			return structure("tool call %s belongs to a turn that has ended (requested at seq %d)", e.ToolCallID, at)
		}
		return structure("%s for call %s that was never requested", e.Type, e.ToolCallID)
	case t.TurnID != e.TurnID:
		return structure("tool call %s belongs to turn %s", e.ToolCallID, t.TurnID)
	}
	c.tool = t
	if e.Type == schema.TypeToolStarted {
		if t.Phase != PhaseRequested {
			return structure("tool call %s is already %s", e.ToolCallID, t.Phase)
		}
		return nil
	}
	return toolResultRule(e, c)
}

// toolResultRule checks a tool/result against its call, c.tool: the
// status says how far the call got.
func toolResultRule(e *schema.Envelope, c *change) error {
	t := c.tool
	if t.Phase == PhaseDone {
		return structure("tool call %s already has a result (%s): exactly one per call", e.ToolCallID, t.Status)
	}
	d := new(schema.ToolResult)
	if err := e.DecodeData(d); err != nil {
		return invalid(e, err)
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
		return invalid(e, fmt.Errorf("unknown status %q", d.Status))
	}
	c.data = d
	return nil
}

func (s *State) commitTool(e *schema.Envelope, c *change) {
	k := openKey{kind: openTool, id: e.ToolCallID}
	switch e.Type {
	case schema.TypeToolRequested:
		d := c.data.(*schema.ToolRequested)
		if s.Tools == nil {
			s.Tools = map[string]*ToolCall{}
		}
		s.Tools[e.ToolCallID] = &ToolCall{Item: Item{ID: e.ToolCallID, TurnID: e.TurnID, StartSeq: c.seq}, Name: d.Name, Idempotent: d.Idempotent, Phase: PhaseRequested}
		s.opened(k, e.TurnID)
	case schema.TypeToolStarted:
		t := c.tool
		t.Phase, t.StartedSeq = PhaseStarted, c.seq
		s.opened(k, t.TurnID)
	case schema.TypeToolResult:
		t := c.tool
		t.Phase, t.Status, t.EndSeq = PhaseDone, c.data.(*schema.ToolResult).Status, c.seq
		s.closed(k)
	}
}
