package session

import "github.com/sessionlog/sessionlog/pkg/schema"

// The job family: background jobs, which may outlive the turn that
// started them; a job id is used once in a session and ends once.

func (s *State) jobRule(e *schema.Envelope, c *change) error {
	if e.Type == schema.TypeJobStarted {
		d := new(schema.JobStarted)
		if err := e.DecodeData(d); err != nil {
			return invalid(e, err)
		}
		if _, used := s.Jobs[d.JobID]; used {
			return structure("job id %s was already used", d.JobID)
		}
		c.data = d
		return nil
	}
	d := new(schema.JobEnded)
	if err := e.DecodeData(d); err != nil {
		return invalid(e, err)
	}
	j, ok := s.Jobs[d.JobID]
	switch {
	case !ok:
		return structure("job/ended for job %s that was never started", d.JobID)
	case !j.Open():
		return structure("job %s already ended", d.JobID)
	}
	c.item = j
	return nil
}

func (s *State) commitJob(e *schema.Envelope, c *change) {
	if e.Type == schema.TypeJobStarted {
		id := c.data.(*schema.JobStarted).JobID
		if s.Jobs == nil {
			s.Jobs = map[string]*Item{}
		}
		s.Jobs[id] = &Item{ID: id, TurnID: e.TurnID, StartSeq: c.seq}
		s.opened(openKey{kind: openJob, id: id}, e.TurnID)
		return
	}
	c.item.EndSeq = c.seq
	s.closed(openKey{kind: openJob, id: c.item.ID})
}
