package forker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Sweep looks at every copy in flight and takes over those whose forker
// is gone (record not renewed for StaleAfter): it finishes the copy, or,
// where that can never succeed, abandons it. Policy and reasons:
// docs/adr/005-fork-protocol.md.
func (s *Service) Sweep(ctx context.Context) error {
	recs := s.bucket()
	if recs == nil {
		return errors.New("forker: not running")
	}
	keys, err := recs.Children(ctx)
	if err != nil {
		return fmt.Errorf("forker: list %s: %w", ForkBucket, err)
	}
	var errs []error
	for _, child := range keys {
		if ctx.Err() != nil {
			return nil
		}
		if err := s.recoverOne(ctx, child); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", child, err))
		}
	}
	return errors.Join(errs...)
}

func (s *Service) recoverOne(ctx context.Context, child string) error {
	recs := s.bucket()
	rec, ok, err := recs.Get(ctx, child)
	if errors.Is(err, logstore.ErrKeyGone) || schema.CodeOf(err) == schema.CodeUnreadable {
		// A sealed record whose key an erase destroyed (the child is
		// erased; the eraser deletes what a copy wrote), or that does
		// not open: no copy can go on from it.
		s.log.Warn("dropping unreadable fork record", "child", child, "err", err)
		return recs.Drop(ctx, child)
	}
	if err != nil || !ok {
		return err
	}
	var p plan
	if err := json.Unmarshal(rec.Value, &p); err != nil || p.OpID == "" {
		s.log.Warn("dropping unreadable fork record", "child", child, "err", err)
		return recs.Drop(ctx, child)
	}
	if s.cfg.Now().Sub(p.HeartbeatAt) < s.cfg.StaleAfter {
		return nil
	}
	if !s.markInflight(child) {
		return nil
	}
	defer s.doneInflight(child)
	// Take the record over with a revision check, so of several forkers
	// sweeping at once one goes on (the others would only write the same
	// events again, which deduplicates, but need not).
	p.HeartbeatAt, p.Owner = s.cfg.Now().UTC(), s.owner
	b, _ := json.Marshal(&p)
	if err := recs.Replace(ctx, child, b, rec.Revision); err != nil {
		return nil
	}
	log := s.log.With("child", child, "parent", p.ParentID, "seedLength", p.SeedLength)
	// The record is ours now; an erase of the parent or the child since
	// the copy stopped ends it here (ADR 009, "Forks in flight"): the
	// eraser deletes whatever the copy wrote.
	if err := s.checkErased(ctx, p.ParentID, child); err != nil {
		if schema.CodeOf(err) != schema.CodeErased {
			return err
		}
		log.Info("dropped a fork record of an erased session", "err", err)
		s.m.recovered.WithLabelValues("dropped").Inc()
		s.eraseRecord(&p)
		return nil
	}
	s.m.inflight.Inc()
	defer s.m.inflight.Dec()
	err = s.finish(ctx, &p, nil)
	var perm *permanentError
	switch {
	case err == nil:
		log.Info("finished a fork copy left behind")
		s.m.recovered.WithLabelValues("finished").Inc()
		s.dropRecord(&p)
		return nil
	case errors.Is(err, errNotOurs):
		log.Info("dropped a fork record with nothing of its own to finish", "err", err)
		s.m.recovered.WithLabelValues("dropped").Inc()
		s.dropRecord(&p)
		return nil
	case errors.As(err, &perm):
		s.m.recovered.WithLabelValues("abandoned").Inc()
		s.abandon(ctx, &p, err)
		return nil
	}
	return err
}
