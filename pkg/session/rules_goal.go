package session

import "github.com/sessionlog/sessionlog/pkg/schema"

// The goal family: each goal/updated is the next revision of the goal.

func (s *State) goalRule(e *schema.Envelope, c *change) error {
	d := new(schema.GoalUpdated)
	if err := e.DecodeData(d); err != nil {
		return invalid(e, err)
	}
	want := 1
	if s.Goal != nil {
		want = s.Goal.Revision + 1
	}
	if d.Revision != want {
		return structure("goal revision %d, want %d (revisions increase by 1)", d.Revision, want)
	}
	c.data = d
	return nil
}

func (s *State) commitGoal(e *schema.Envelope, c *change) {
	s.Goal = &Goal{GoalUpdated: *c.data.(*schema.GoalUpdated), Seq: c.seq}
}
