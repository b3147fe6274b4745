package projectortest

import (
	"path/filepath"
	"testing"

	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// CheckRebuild compares the live store's incremental checksum with a full
// scan and with a clean rebuild of the same stream prefix.
func CheckRebuild(t *testing.T, e *Env, r *Running) {
	t.Helper()
	cp, ok, err := r.DB().Checkpoint()
	if err != nil || !ok {
		t.Fatalf("checkpoint: %v %v", ok, err)
	}
	scan, _, err := r.DB().Scan()
	if err != nil {
		t.Fatal(err)
	}
	rebuilt, err := projector.Rebuild(e.Ctx, e.LS, filepath.Join(t.TempDir(), "rebuild"), cp, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Checksum != scan || scan != rebuilt {
		t.Fatalf("checksums differ: checkpoint %016x scan %016x rebuild %016x", cp.Checksum, scan, rebuilt)
	}
}

// ListExamined reads the first page of limit sessions the list shows a
// token of tenant ("": the operator's) as /v1/sessions reads it, and
// says how many index entries it read.
func ListExamined(r *Running, tenant string, limit int) (ids []string, examined int, err error) {
	err = r.View(func(snap store.Snapshot) error {
		var keep func(string) bool // a tenant's token's, as visible has it
		if tenant != "" {
			keep = func(id string) bool { return api.TenantOf(id) == tenant }
		}
		sums, _, n, err := snap.List(tenant, "", nil, limit, keep)
		for _, sum := range sums {
			ids = append(ids, sum.SessionID)
		}
		examined = n.Entries
		return err
	})
	return ids, examined, err
}

// AgentIndexed lists the sessions (stored ids, newest first) in the
// indexes of agent of tenant: its activity index, and its status index
// of each status (by status, those holding any).
func AgentIndexed(r *Running, tenant, agent string) (activity []string, byStatus map[string][]string, err error) {
	byStatus = map[string][]string{}
	err = r.View(func(snap store.Snapshot) error {
		walk := func(p []byte) ([]string, error) {
			it, err := snap.Iter(p)
			if err != nil {
				return nil, err
			}
			var ids []string
			for ok := it.Last(); ok; ok = it.Prev() {
				ids = append(ids, store.IndexSession(p, it.Key()))
			}
			return ids, it.Close()
		}
		if activity, err = walk(store.AgentActivityPrefix(tenant, agent)); err != nil {
			return err
		}
		for _, st := range store.Statuses {
			ids, err := walk(store.AgentStatusPrefix(tenant, agent, st))
			if err != nil {
				return err
			}
			if len(ids) > 0 {
				byStatus[st] = ids
			}
		}
		return nil
	})
	return activity, byStatus, err
}
