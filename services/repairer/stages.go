package repairer

import "time"

// Stage is a point an automatic repair passes on its way from its lease's
// due time to its commit. Benchmarks observe them (ObserveStages) to tell
// where a repair's latency goes.
type Stage string

const (
	// StageQueued: the session's evaluation was queued (its wake-up fired).
	StageQueued Stage = "queued"
	// StageStarted: an evaluation of the session started.
	StageStarted Stage = "started"
	// StageRead: the evaluation read the lease, the claim and the state
	// (none had been read ahead, or what was is stale).
	StageRead Stage = "read"
	// StageDecided: the evaluation decided to repair (the lease, claim and
	// state are read, the plan is made).
	StageDecided Stage = "decided"
	// StageEnded: the lease was ended.
	StageEnded Stage = "ended"
	// StageSent: the batch holding the repair was sent.
	StageSent Stage = "sent"
	// StageCommitted: the batch holding the repair was answered.
	StageCommitted Stage = "committed"
)

// ObserveStages has f called at every Stage each session passes (nil:
// none). f runs on the repairer's goroutines and must not block.
func (s *Service) ObserveStages(f func(id string, st Stage, at time.Time)) {
	if f == nil {
		s.stages.Store(nil)
		return
	}
	s.stages.Store(&f)
}

func (s *Service) stage(id string, st Stage) {
	if f := s.stages.Load(); f != nil {
		(*f)(id, st, time.Now())
	}
}
