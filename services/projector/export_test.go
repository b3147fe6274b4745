package projector

import "time"

// SetFleetEvery samples the fleet overview every d in the projectors
// started from now on; restore puts the interval back (cleanup, once they
// stopped).
func SetFleetEvery(d time.Duration) (restore func()) {
	old := fleetEvery
	fleetEvery = d
	return func() { fleetEvery = old }
}

// HoldCommits makes each batch the projector hands to its store land only
// when the fold loop waits for it, as if the disk were slow: whatever the
// fold loop reads from the store before waiting misses the batch in
// flight. release lets every batch land from then on (cleanup).
func HoldCommits(s *Service) (release func()) {
	tokens, stop := make(chan struct{}, 1), make(chan struct{})
	s.db.SetCommitGate(func() {
		select {
		case <-tokens:
		case <-stop:
		}
	})
	s.f.waiting = func() {
		select {
		case tokens <- struct{}{}:
		case <-stop:
		}
	}
	return func() { close(stop) }
}
