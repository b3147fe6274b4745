package writer_test

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// A retry of a stored event while the leader answers reads of it as
// absent (a former leader cut off by a partition answers so for what was
// stored after it lost touch) is answered not_committed: not conflict,
// which sends the agent away from a session holding its event, and not a
// second copy. Once reads are whole again the retry is the duplicate.
func TestRetryWhileStoredEventReadsAbsent(t *testing.T) {
	var stale atomic.Bool
	e := newEnv(t, envOpts{store: logstore.Config{FaultHook: func(s logstore.FaultStage) error {
		if s == logstore.FaultMsgAt && stale.Load() {
			return errors.New("injected: stale read")
		}
		return nil
	}}})
	const sid = "stale-read"
	mustOK(t, e.nc, map[string]any{"sessionId": sid, "expectedSeq": 0, "events": events(created())})
	mustOK(t, e.nc, map[string]any{"sessionId": sid, "expectedSeq": 1, "events": events(userEv("a", "A"))})

	stale.Store(true)
	for _, tc := range []struct {
		name string
		req  map[string]any
	}{
		{"Expected", map[string]any{"sessionId": sid, "expectedSeq": 1, "events": events(userEv("a", "A"))}},
		{"NoExpectation", map[string]any{"sessionId": sid, "events": events(userEv("a", "A"))}},
	} {
		r := appendReq(t, e.nc, tc.req)
		if r.err == nil || r.err.Code != schema.CodeNotCommitted {
			t.Errorf("%s: got %+v %+v, want not_committed", tc.name, r.ok, r.err)
		}
	}
	stale.Store(false)
	r := appendReq(t, e.nc, map[string]any{"sessionId": sid, "expectedSeq": 1, "events": events(userEv("a", "A"))})
	if r.err != nil || !r.ok.Duplicate || r.ok.FirstSeq != 2 {
		t.Fatalf("retry after the reads healed: got %+v %+v, want duplicate of seq 2", r.ok, r.err)
	}
	if n := storedOnce(t, e.st, sid); n != 2 {
		t.Fatalf("%d events stored, want 2", n)
	}
}
