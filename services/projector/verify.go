package projector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// Rebuild folds the stream from its start into a new store in dir (which
// must be empty or absent) up to the stream positions of until, and
// returns the checksum of the views it built.
func Rebuild(ctx context.Context, ls *logstore.Store, dir string, until store.Checkpoint, logger *slog.Logger) (uint64, error) {
	if entries, _ := os.ReadDir(dir); len(entries) > 0 {
		return 0, fmt.Errorf("projector: rebuild: %s is not empty", dir)
	}
	s, err := New(Config{Store: ls, DataDir: dir, Logger: logger})
	if err != nil {
		return 0, err
	}
	defer s.db.Close()
	want := map[string]uint64{}
	for _, p := range until.Streams {
		if p.Seq > 0 {
			want[p.Name] = p.Seq
		}
	}
	done := func(pos map[string]*store.StreamPos) bool {
		for name, seq := range want {
			if p := pos[name]; p == nil || p.Seq < seq {
				return false
			}
		}
		return true
	}
	if len(want) > 0 {
		if err := s.consume(ctx, done); err != nil {
			return 0, err
		}
	}
	if !done(s.f.pos) {
		return 0, errors.New("projector: rebuild stopped before the position")
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
func Verify(ctx context.Context, ls *logstore.Store, dataDir, tmpDir string, logger *slog.Logger) (VerifyResult, error) {
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
