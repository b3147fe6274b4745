package eraser

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
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
		// (A sealed body that does not open, or whose key is gone, has
		// its headers all the same: its type and when it was stored.)
		last, err := s.st.LastStoredOf(ctx, id)
		if err != nil && !bodyUnopened(err) || last == nil || last.Header.Get(logstore.HeaderType) != "session/closed" || !last.Stored.Before(cut) {
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
	left, err := s.archiveEvents(ctx, id, zw)
	if err != nil {
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
	if len(left) > 0 {
		s.log.Warn("eraser: retention archived the session without the messages that are no event it can read (their bodies are lost; the erase counts them as unhashed)",
			"session", id, "archive", final, "left_out", len(left), "stream_seqs", left)
	}
	return nil
}

// archiveEvents writes the session's stored events to w, one JSON line
// each, in order, up to its last stored message (storedTail: whatever it
// is), and returns the stream seqs of the messages it left out: a sealed
// body that does not open or whose key is gone, or a message that is not
// an event. They are no event any reader reads (the erase counts them in
// its unhashed), and retention archives the rest and erases the session
// rather than keep it for ever.
func (s *Service) archiveEvents(ctx context.Context, id string, w io.Writer) ([]uint64, error) {
	tail, _, err := s.storedTail(ctx, id)
	if err != nil {
		return nil, err
	}
	var left []uint64
	err = s.st.ReadVerdicts(ctx, id, 0, tail, func(m *logstore.Msg, why error) error {
		if why != nil {
			left = append(left, m.StreamSeq)
			return nil
		}
		if _, err := w.Write(m.Data); err != nil {
			return err
		}
		_, err := w.Write([]byte{'\n'})
		return err
	})
	return left, err
}

// bodyUnopened reports whether err is a read's answer about a sealed
// body: its key is gone, or it does not open.
func bodyUnopened(err error) bool {
	return errors.Is(err, logstore.ErrKeyGone) || schema.CodeOf(err) == schema.CodeUnreadable
}
