package projector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/sessionlog/sessionlog/services/projector/store"
)

// Rebuild folds the stream from its start into a new store in dir (which
// must be empty or absent) up to the stream positions of to, and
// returns the checksum of the views it built. It serves nothing (no HTTP
// side).
func Rebuild[F follower](ctx context.Context, ls Followed[F], dir string, to store.Checkpoint, logger *slog.Logger) (uint64, error) {
	if ls == nil {
		return 0, errors.New("projector: rebuild: no log")
	}
	if entries, _ := os.ReadDir(dir); len(entries) > 0 {
		return 0, fmt.Errorf("projector: rebuild: %s is not empty", dir)
	}
	s, err := open(Config{DataDir: dir, Logger: logger}.withDefaults(), followsOf(ls), nil)
	if err != nil {
		return 0, err
	}
	defer s.db.Close()
	// The message at a position may have been erased since the store was
	// built, and every message after it with it: the rebuild is then done
	// at the last message the stream holds, and folds nothing past the
	// position when messages were appended after it.
	until := map[string]bound{}
	for _, p := range to.Streams {
		if p.Seq == 0 {
			continue
		}
		held, err := ls.LastHeldSeq(ctx, p.Name)
		if err != nil {
			return 0, fmt.Errorf("projector: rebuild: %w", err)
		}
		if b := (bound{last: p.Seq, enough: min(p.Seq, held)}); b.enough > 0 {
			until[p.Name] = b
		}
	}
	if len(until) > 0 {
		if err := s.consume(ctx, until); err != nil {
			return 0, err
		}
	}
	if err := ctx.Err(); err != nil {
		// consume ends without an error when ctx does.
		return 0, fmt.Errorf("projector: rebuild stopped before the position: %w", err)
	}
	return s.db.Checksum(), nil
}

// VerifyResult compares a store with a clean rebuild.
type VerifyResult struct {
	Checkpoint store.Checkpoint
	// Stored is the checksum in the checkpoint, Scanned the one computed
	// from the store's views, Rebuilt the one of the clean rebuild.
	Stored, Scanned, Rebuilt uint64
	Keys                     int
}

// OK reports whether all three checksums agree.
func (r VerifyResult) OK() bool { return r.Stored == r.Scanned && r.Scanned == r.Rebuilt }

// Verify opens the store in dataDir (the projector using it must be
// stopped: Pebble allows one process per store), rebuilds the same stream
// prefix into tmpDir and compares the checksums.
func Verify[F follower](ctx context.Context, ls Followed[F], dataDir, tmpDir string, logger *slog.Logger) (VerifyResult, error) {
	var res VerifyResult
	if _, err := os.Stat(dataDir); err != nil {
		return res, fmt.Errorf("projector: verify: %w", err)
	}
	db, err := store.Open(dataDir, store.Options{})
	if err != nil {
		return res, err
	}
	cp, ok, err := db.Checkpoint()
	if err == nil && !ok {
		err = errors.New("projector: verify: the store has no checkpoint")
	}
	if err == nil {
		res.Checkpoint, res.Stored = cp, cp.Checksum
		res.Scanned, res.Keys, err = db.Scan()
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return res, err
	}
	if cp.Version != Version() {
		return res, fmt.Errorf("projector: verify: the store was built by %s, this binary is %s", cp.Version, Version())
	}
	res.Rebuilt, err = Rebuild(ctx, ls, tmpDir, cp, logger)
	return res, err
}
