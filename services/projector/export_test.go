package projector

import "github.com/sessionlog/sessionlog/services/projector/store"

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

// MarkErased makes the projector refuse id as erased, as its erasure
// watch does first, without the fold removing the session's views (the
// state between the two).
func MarkErased(s *Service, id string) { s.er.add(id) }

// reader reads the views of one store snapshot (tests).
type reader struct{ snap store.Snapshot }

// summary reads a session's summary (nil: none).
func (r reader) summary(id string) (*store.Summary, error) { return r.snap.Summary(id) }

// iter walks the raw keys of the reader's snapshot under prefix.
func (r reader) iter(prefix []byte) (store.Iterator, error) { return r.snap.Iter(prefix) }

// view runs fn on a snapshot of the views, as the HTTP side reads them.
func (s *Service) view(fn func(rd reader) error) error {
	return s.View(func(snap store.Snapshot) error { return fn(reader{snap: snap}) })
}
