package session

import (
	"slices"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// The session family: the session's life (created, paused, resumed,
// closed), its title, the agents it is granted to, and rewinds of the
// model's context.

func (s *State) sessionRule(e *schema.Envelope, c *change) error {
	switch e.Type {
	case schema.TypeSessionCreated:
		d := new(schema.SessionCreated)
		if err := e.DecodeData(d); err != nil {
			return invalid(e, err)
		}
		c.data = d
	case schema.TypeSessionPaused, schema.TypeSessionClosed:
		d := new(schema.Reason)
		if err := e.DecodeData(d); err != nil {
			return invalid(e, err)
		}
		c.data = d
	case schema.TypeSessionResumed:
		if !s.Paused {
			return structure("session/resumed while the session is not paused")
		}
	case schema.TypeSessionTitled:
		d := new(schema.SessionTitled)
		if err := e.DecodeData(d); err != nil {
			return invalid(e, err)
		}
		c.data = d
	case schema.TypeSessionGranted:
		d := new(schema.SessionGranted)
		if err := e.DecodeData(d); err != nil {
			return invalid(e, err)
		}
		c.data = d
	case schema.TypeContextRewound:
		// The model's context goes back to the event at toSeq: it must be
		// an earlier event of this session. Open work stays open (the
		// rewind changes what the model sees next, not what ran).
		d := new(schema.ContextRewound)
		if err := e.DecodeData(d); err != nil {
			return invalid(e, err)
		}
		if d.ToSeq == 0 || d.ToSeq >= c.seq {
			return structure("context/rewound toSeq %d must be between 1 and %d", d.ToSeq, c.seq-1)
		}
		c.data = d
	}
	return nil
}

func (s *State) commitSession(e *schema.Envelope, c *change) {
	switch e.Type {
	case schema.TypeSessionCreated:
		d := c.data.(*schema.SessionCreated)
		s.Meta = *d
		s.CreatedAt = e.Time
		if s.SessionID == "" {
			s.SessionID = e.SessionID
		}
		s.Forking = d.Parent != nil
	case schema.TypeSessionPaused:
		s.Paused, s.PauseReason = true, c.data.(*schema.Reason).Reason
	case schema.TypeSessionResumed:
		s.Paused, s.PauseReason = false, ""
	case schema.TypeSessionClosed:
		s.Closed, s.CloseReason, s.Forking = true, c.data.(*schema.Reason).Reason, false
	case schema.TypeSessionTitled:
		s.Meta.Title = c.data.(*schema.SessionTitled).Title
	case schema.TypeSessionGranted:
		for _, g := range c.data.(*schema.SessionGranted).Grants {
			if !slices.Contains(s.Meta.Grants, g) {
				s.Meta.Grants = append(s.Meta.Grants, g)
			}
		}
	case schema.TypeContextRewound:
		d := c.data.(*schema.ContextRewound)
		s.Rewinds++
		s.LastRewind = &Rewind{Seq: c.seq, ToSeq: d.ToSeq, ToEventID: d.ToEventID}
	}
}
