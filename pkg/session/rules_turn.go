package session

import "github.com/sessionlog/sessionlog/pkg/schema"

// The turn family: turns, their steps and attempts, and the messages that
// end an attempt or start the work of a turn.

func (s *State) turnRule(e *schema.Envelope, c *change) error {
	switch e.Type {
	case schema.TypeTurnStarted:
		if s.Turn != nil {
			return structure("turn %s is still open: at most one open turn", s.Turn.ID)
		}
		c.hash = idHash(e.TurnID)
		if _, used := s.usedTurns[c.hash]; used {
			return structure("turn id %s was already used in this session", e.TurnID)
		}
	case schema.TypeTurnEnded:
		if open := s.openInTurn(e.TurnID); len(open) > 0 {
			return structure("turn %s cannot end: still open: %s", e.TurnID, describe(open))
		}
		d := new(schema.Reason)
		if err := e.DecodeData(d); err != nil {
			return invalid(e, err)
		}
		c.data = d
	case schema.TypeStepStarted:
		c.key = key(e.TurnID, e.StepID)
		if _, open := s.Steps[c.key]; open {
			return structure("step %s is already open", e.StepID)
		}
	case schema.TypeStepEnded:
		c.key = key(e.TurnID, e.StepID)
		if _, open := s.Steps[c.key]; !open {
			return structure("step/ended for step %s that is not open", e.StepID)
		}
	case schema.TypeAttemptStarted:
		c.key = key(e.TurnID, e.AttemptID)
		if _, used := s.Attempts[c.key]; used {
			return structure("attempt id %s was already used in turn %s: a new attempt needs a new attemptId", e.AttemptID, e.TurnID)
		}
	case schema.TypeMessageAssistant, schema.TypeAttemptInterrupt:
		a, ok := s.Attempts[key(e.TurnID, e.AttemptID)]
		if !ok {
			return structure("%s for attempt %s that was never started", e.Type, e.AttemptID)
		}
		if !a.Open() {
			return structure("%s for attempt %s that already ended at seq %d", e.Type, e.AttemptID, a.EndSeq)
		}
		c.item = a
	case schema.TypeMessageUser:
		c.family = noChange
	}
	return nil
}

func (s *State) commitTurn(e *schema.Envelope, c *change) {
	switch e.Type {
	case schema.TypeTurnStarted:
		s.Turn = &Turn{Item: Item{ID: e.TurnID, StartSeq: c.seq}}
		if !s.forgetSpent {
			if s.usedTurns == nil {
				s.usedTurns = map[uint64]struct{}{}
			}
			s.usedTurns[c.hash] = struct{}{}
		}
		s.Turns++
	case schema.TypeTurnEnded:
		t := s.Turn
		t.EndSeq, t.Reason = c.seq, c.data.(*schema.Reason).Reason
		s.endTurn(t)
		s.LastTurn, s.Turn = t, nil
	case schema.TypeStepStarted:
		if s.Steps == nil {
			s.Steps = map[string]*Item{}
		}
		s.Steps[c.key] = &Item{ID: e.StepID, TurnID: e.TurnID, StartSeq: c.seq}
	case schema.TypeStepEnded:
		delete(s.Steps, c.key)
	case schema.TypeAttemptStarted:
		if s.Attempts == nil {
			s.Attempts = map[string]*Item{}
		}
		s.Attempts[c.key] = &Item{ID: e.AttemptID, TurnID: e.TurnID, StartSeq: c.seq}
		s.opened(openKey{openAttempt, e.TurnID, e.AttemptID}, e.TurnID)
	case schema.TypeMessageAssistant, schema.TypeAttemptInterrupt:
		c.item.EndSeq = c.seq
		s.closed(openKey{openAttempt, e.TurnID, e.AttemptID})
	}
}
