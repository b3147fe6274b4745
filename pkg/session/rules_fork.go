package session

import "github.com/sessionlog/sessionlog/pkg/schema"

// The fork/repair family: what the repairer and the forker write of their
// own: repair/applied before a repair's closers, fork/committed at the
// end of a fork's copy.

func (s *State) forkRepairRule(e *schema.Envelope, c *change) error {
	if e.Type == schema.TypeRepairApplied {
		return nil
	}
	d := new(schema.ForkCommitted)
	if err := e.DecodeData(d); err != nil {
		return invalid(e, err)
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
		c.family = noChange
	}
	return nil
}

func (s *State) commitForkRepair(e *schema.Envelope, c *change) {
	if e.Type == schema.TypeRepairApplied {
		s.Repairs++
		s.LastRepairSeq = c.seq
		return
	}
	s.Forking, s.ForkCommittedSeq = false, c.seq
}
