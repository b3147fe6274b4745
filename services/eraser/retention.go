package eraser

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/sessionlog/sessionlog/internal/logstore"
)

// Retention (DESIGN.md section 14): sessions closed for longer than
// Config.RetainClosed are written to Config.ArchiveDir (when set) as
// zstd-compressed JSON lines, the format of `sessionlog export`, then
// erased with by = RetentionBy.

// RetentionBy is the "by" of an erase made by retention.
const RetentionBy = "retention"

// ArchiveExt ends the name of an archived session's file.
const ArchiveExt = ".jsonl.zst"

func (s *Service) retentionLoop(ctx context.Context) {
	every := s.cfg.SweepInterval
	if every <= 0 || every > s.cfg.RetainClosed {
		every = s.cfg.RetainClosed
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if n, err := s.Retain(ctx); err != nil {
			s.log.Warn("eraser: retention", "err", err, "erased", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Retain archives and erases every session closed for longer than
// RetainClosed, and returns how many it erased.
func (s *Service) Retain(ctx context.Context) (int, error) {
	if s.cfg.RetainClosed <= 0 {
		return 0, nil
	}
	cut := s.now().Add(-s.cfg.RetainClosed)
	n := 0
	var errs []error
	// A page of sessions' last messages at a time (headers only), never
	// the list of the fleet; only a session closed before the cut is read
	// again and erased.
	err := s.st.EachLastStored(ctx, func(id string, m *logstore.Msg) error {
		if m.Header.Get(logstore.HeaderType) != "session/closed" || !m.Stored.Before(cut) {
			return nil
		}
		last, err := s.st.LastStoredOf(ctx, id)
		if err != nil || last.Header.Get(logstore.HeaderType) != "session/closed" || !last.Stored.Before(cut) {
			return nil // erased meanwhile, appended to since, or unreadable: not closed
		}
		if s.cfg.ArchiveDir != "" {
			if err := s.archive(ctx, id); err != nil {
				errs = append(errs, err)
				return nil
			}
		}
		if _, err := s.Erase(ctx, EraseRequest{SessionID: id, By: RetentionBy,
			Reason: fmt.Sprintf("closed for longer than %s", s.cfg.RetainClosed)}); err != nil {
			errs = append(errs, fmt.Errorf("erase %s: %w", id, err))
			return nil
		}
		n++
		return nil
	})
	if err != nil {
		errs = append(errs, err)
	}
	return n, errors.Join(errs...)
}

// archive writes the session's stored events to ArchiveDir/<id>.jsonl.zst,
// whole or not at all (a temporary file renamed once synced).
func (s *Service) archive(ctx context.Context, id string) (err error) {
	if err := os.MkdirAll(s.cfg.ArchiveDir, 0o755); err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	final := filepath.Join(s.cfg.ArchiveDir, id+ArchiveExt)
	f, err := os.CreateTemp(s.cfg.ArchiveDir, "."+id+".*.tmp")
	if err != nil {
		return fmt.Errorf("archive %s: %w", id, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	zw, err := zstd.NewWriter(f)
	if err != nil {
		return fmt.Errorf("archive %s: %w", id, err)
	}
	if _, err := s.st.ReadSession(ctx, id, 0, func(m *logstore.Msg) error {
		if _, err := zw.Write(m.Data); err != nil {
			return err
		}
		_, err := zw.Write([]byte{'\n'})
		return err
	}); err != nil {
		zw.Close()
		return fmt.Errorf("archive %s: %w", id, err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("archive %s: %w", id, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("archive %s: %w", id, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("archive %s: %w", id, err)
	}
	if err := os.Rename(f.Name(), final); err != nil {
		return fmt.Errorf("archive %s: %w", id, err)
	}
	return nil
}
