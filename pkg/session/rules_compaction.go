package session

import "github.com/sessionlog/sessionlog/pkg/schema"

// The compaction family: one compaction open at a time, through an
// earlier seq; it ends through the seq it started through, or is
// aborted. A compaction id is used once in a session.

func (s *State) compactionRule(e *schema.Envelope, c *change) error {
	if e.Type == schema.TypeCompactionStarted {
		d := new(schema.CompactionStarted)
		if err := e.DecodeData(d); err != nil {
			return invalid(e, err)
		}
		for _, open := range s.Compactions {
			if open.Open() {
				return structure("compaction %s is still open", open.ID)
			}
		}
		if _, used := s.Compactions[d.CompactionID]; used {
			return structure("compaction id %s was already used", d.CompactionID)
		}
		if d.ThroughSeq == 0 || d.ThroughSeq >= c.seq {
			return structure("compaction throughSeq %d must be between 1 and %d", d.ThroughSeq, c.seq-1)
		}
		c.data = d
		return nil
	}
	var id string
	var through uint64
	if e.Type == schema.TypeCompactionEnded {
		d := new(schema.CompactionEnded)
		if err := e.DecodeData(d); err != nil {
			return invalid(e, err)
		}
		id, through = d.CompactionID, d.ThroughSeq
	} else {
		d := new(schema.CompactionAborted)
		if err := e.DecodeData(d); err != nil {
			return invalid(e, err)
		}
		id = d.CompactionID
	}
	k, ok := s.Compactions[id]
	switch {
	case !ok:
		return structure("%s for compaction %s that was never started", e.Type, id)
	case !k.Open():
		return structure("compaction %s already %s", id, k.Outcome)
	case e.Type == schema.TypeCompactionEnded && through != k.ThroughSeq:
		return structure("compaction %s ends through seq %d but started through %d", id, through, k.ThroughSeq)
	}
	c.compaction = k
	return nil
}

func (s *State) commitCompaction(e *schema.Envelope, c *change) {
	if e.Type == schema.TypeCompactionStarted {
		d := c.data.(*schema.CompactionStarted)
		if s.Compactions == nil {
			s.Compactions = map[string]*Compaction{}
		}
		s.Compactions[d.CompactionID] = &Compaction{Item: Item{ID: d.CompactionID, TurnID: e.TurnID, StartSeq: c.seq}, ThroughSeq: d.ThroughSeq}
		s.opened(openKey{kind: openCompaction, id: d.CompactionID}, e.TurnID)
		return
	}
	k := c.compaction
	k.EndSeq = c.seq
	if e.Type == schema.TypeCompactionEnded {
		k.Outcome = "ended"
		s.Compacted = k
	} else {
		k.Outcome = "aborted"
	}
	s.closed(openKey{kind: openCompaction, id: k.ID})
}
