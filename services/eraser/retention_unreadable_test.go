package eraser

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest/tamper"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// TestRetentionErasesSessionWithUnreadableMessages: a retained session
// holding messages no reader opens (here sealed bodies garbled in place:
// one in the middle and its session/closed tail) is archived with the
// events that read, in order, and erased; what the archive leaves out is
// counted in the audit's unhashed. Before, the archive's read failed on
// the first of them (and the check of the tail skipped the session), so
// retention never erased it.
func TestRetentionErasesSessionWithUnreadableMessages(t *testing.T) {
	e := newEnvWith(t, logstore.Config{SealBodies: true})
	// s-mid: its third event garbled; s-tail: its session/closed tail.
	broken := map[string]int{"s-mid": 2, "s-tail": 7}
	for id, i := range broken {
		e.eraseSession(id, strings.Repeat("Z", 64), "")
		tamper.BreakChainAt(t, e.nc, "SESSIONS", logstore.SubjectPrefix+id, tamper.BreakGarble, i)
	}
	dir := t.TempDir()
	later := time.Now().Add(2 * time.Hour)
	r := e.start(Config{SweepInterval: -1, ArchiveDir: dir, Now: func() time.Time { return later }})
	r.svc.cfg.RetainClosed = time.Hour
	if n, err := r.svc.Retain(context.Background()); err != nil || n != 2 {
		t.Fatalf("retention erased %d sessions (%v), want 2", n, err)
	}
	for id, i := range broken {
		e.gone(id)
		want := []uint64{1, 2, 3, 4, 5, 6, 7, 8}
		want = slices.Delete(want, i, i+1)
		if got := archived(t, dir, id); !slices.Equal(got, want) {
			t.Fatalf("%s: archive holds seqs %v, want %v", id, got, want)
		}
	}
	recs := e.audits()
	if len(recs) != 2 {
		t.Fatalf("audits %+v, want 2", recs)
	}
	for _, a := range recs {
		if a.By != RetentionBy || a.Unhashed != 1 || a.Events != 7 {
			t.Fatalf("audit %+v, want retention's with 7 events and 1 unhashed", a)
		}
	}
}

// archived is the seqs of the events in the session's archive, in order.
func archived(t *testing.T, dir, id string) []uint64 {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, id+ArchiveExt))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := zstd.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	var seqs []uint64
	for sc := bufio.NewScanner(zr); sc.Scan(); {
		ev, err := schema.Decode(sc.Bytes())
		if err != nil || ev.SessionID != id {
			t.Fatalf("%s: archive line %d: %+v %v", id, len(seqs)+1, ev, err)
		}
		seqs = append(seqs, ev.Seq)
	}
	return seqs
}
