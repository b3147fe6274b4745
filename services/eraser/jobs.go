package eraser

import (
	"context"
	"sync"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
)

// An erase is a job its record describes (logstore.Erasure): whichever
// eraser took the request runs it, and every eraser follows the
// SESSION_ERASED bucket and starts the unfinished ones on start and on
// every sweep, so an erase cut short by a kill, a restart or an error
// finishes by itself. No timeout cuts a job; two erasers running the
// same one are kept apart by the record's revision (the one that loses
// an update stops, and is started again on the next sweep).

// eraseJobs is the unfinished erasures this process knows of, and the
// ones it runs.
type eraseJobs struct {
	mu      sync.Mutex
	ctx     context.Context // Run's; nil before it
	pending map[string]struct{}
	running map[string]chan struct{}
	slots   chan struct{}
}

// startErase starts the session's job unless it runs here already, and
// returns a channel closed when that run ends (at once before Run).
func (s *Service) startErase(id string) <-chan struct{} {
	j := &s.jobs
	j.mu.Lock()
	defer j.mu.Unlock()
	if ch, ok := j.running[id]; ok {
		return ch
	}
	ch := make(chan struct{})
	if j.ctx == nil || j.ctx.Err() != nil {
		close(ch)
		return ch
	}
	if j.running == nil {
		j.running = map[string]chan struct{}{}
	}
	j.running[id] = ch
	ctx := j.ctx
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() {
			j.mu.Lock()
			delete(j.running, id)
			j.mu.Unlock()
			close(ch)
		}()
		select {
		case j.slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		defer func() { <-j.slots }()
		if err := s.runErase(ctx, id); err != nil && ctx.Err() == nil {
			s.log.Warn("eraser: erase (resumed on the next sweep)", "session", id, "err", err)
		}
	}()
	return ch
}

// eraseLoop follows the erasure records and keeps the unfinished jobs
// running until ctx ends.
func (s *Service) eraseLoop(ctx context.Context) {
	j := &s.jobs
	j.mu.Lock()
	j.ctx, j.pending, j.slots = ctx, map[string]struct{}{}, make(chan struct{}, eraseJobsAtOnce)
	j.mu.Unlock()
	resumeAll := func() {
		j.mu.Lock()
		ids := make([]string, 0, len(j.pending))
		for id := range j.pending {
			ids = append(ids, id)
		}
		j.mu.Unlock()
		for _, id := range ids {
			s.startErase(id)
		}
	}
	ready := make(chan struct{})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		// ready is closed, or never to be: the sweeps resume.
		s.st.FollowErasureRecords(ctx, ready, func(e logstore.Erasure) {
			j.mu.Lock()
			if e.Done {
				delete(j.pending, e.SessionID)
			} else {
				j.pending[e.SessionID] = struct{}{}
			}
			j.mu.Unlock()
		})
	}()
	every := s.cfg.SweepInterval
	if every <= 0 {
		every = eraseResumeEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ready:
			ready = nil
			resumeAll()
		case <-t.C:
			resumeAll()
		}
	}
}
