package session

import "github.com/sessionlog/sessionlog/pkg/schema"

// The approval family: an approval is requested (for a tool call of its
// turn, if it names one) and decided once; an approval id is used once in
// a session.

func (s *State) approvalRule(e *schema.Envelope, c *change) error {
	if e.Type == schema.TypeApprovalRequested {
		d := new(schema.ApprovalRequested)
		if err := e.DecodeData(d); err != nil {
			return invalid(e, err)
		}
		c.data = d
		return s.approvalRequestRule(e, d)
	}
	d := new(schema.ApprovalDecided)
	if err := e.DecodeData(d); err != nil {
		return invalid(e, err)
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
	c.data, c.approval = d, a
	return nil
}

// approvalRequestRule checks an approval/requested: a new approval id,
// and a tool call of this turn if it names one.
func (s *State) approvalRequestRule(e *schema.Envelope, d *schema.ApprovalRequested) error {
	if a, used := s.Approvals[d.ApprovalID]; used {
		return structure("approval %s was already requested at seq %d", d.ApprovalID, a.StartSeq)
	}
	if at, spent := spentAt(s.spentApprovals, d.ApprovalID); spent {
		return structure("approval %s was already requested at seq %d", d.ApprovalID, at)
	}
	if d.ToolCallID == "" {
		return nil
	}
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
	return nil
}

func (s *State) commitApproval(e *schema.Envelope, c *change) {
	switch e.Type {
	case schema.TypeApprovalRequested:
		d := c.data.(*schema.ApprovalRequested)
		if s.Approvals == nil {
			s.Approvals = map[string]*Approval{}
		}
		s.Approvals[d.ApprovalID] = &Approval{Item: Item{ID: d.ApprovalID, TurnID: e.TurnID, StartSeq: c.seq}, ToolCallID: d.ToolCallID, Prompt: d.Prompt}
		s.opened(openKey{kind: openApproval, id: d.ApprovalID}, e.TurnID)
	case schema.TypeApprovalDecided:
		d, a := c.data.(*schema.ApprovalDecided), c.approval
		a.Decision, a.EndSeq = d.Decision, c.seq
		s.closed(openKey{kind: openApproval, id: d.ApprovalID})
	}
}
