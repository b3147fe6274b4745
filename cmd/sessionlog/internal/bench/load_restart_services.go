package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/forker"
	"github.com/sessionlog/sessionlog/services/repairer"
)

// FirstWork is the first work of a service started on the session after
// a restart (nothing of it cached): Snap with the snapshot the writers
// stored, one per restart; Cold with snapshots off (the session read from
// its start).
type FirstWork struct {
	Snap, Cold []time.Duration
}

// servicesAfterRestart times, on the session the writers left (the last
// one ended a turn: nothing open, seq n a safe point), the first work of
// a repairer and of a forker started on it, with its snapshot and
// without:
//
//   - Repair: an on-demand repair (the session's state folded, nothing to
//     close, nothing appended);
//   - Resolve: a fork request at the session's last seq, inside a turn
//     opened for it, refused unsafe_cut with the nearest safe seq: the
//     answer of the parent's scan alone;
//   - Fork (copy): the whole fork at the last safe point, the copy of
//     every event included, twice with the snapshot and twice without,
//     in turns (the machine's noise is larger than the difference).
func servicesAfterRestart(ctx context.Context, e *embedded, id string, restarts int, copyFork bool, res *RestartResult, logger *slog.Logger) error {
	for k := 0; k <= restarts; k++ {
		d, err := firstRepair(ctx, e, id, k == restarts, logger)
		if err != nil {
			return fmt.Errorf("repairer: %w", err)
		}
		res.Repair.add(d, k == restarts)
	}
	tail, err := e.st.Tail(ctx, id)
	if err != nil {
		return err
	}
	safe := tail.Seq
	if copyFork {
		for _, cold := range []bool{true, false, true, false} {
			req := forker.Request{ParentID: id, ChildID: fmt.Sprintf("%s-child-%d", id, len(res.Fork.Snap)+len(res.Fork.Cold))}
			d, err := firstFork(ctx, e, req, cold, logger, func(rep forker.Reply, err error) error {
				if err != nil || rep.SeedLength != safe {
					return fmt.Errorf("fork answered %+v, %v; want seed length %d", rep, err, safe)
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("forker: %w", err)
			}
			res.Fork.add(d, cold)
		}
	}
	open := schema.Envelope{SchemaVersion: schema.Version, SessionID: id, Seq: tail.Seq + 1, EventID: "bench-restart-open",
		Time: time.Now().UTC(), Type: schema.TypeTurnStarted, TurnID: "bench-restart-open"}
	if _, err := e.st.Append(ctx, logstore.AppendRequest{SessionID: id, ExpectedStreamSeq: tail.StreamSeq, Events: []schema.Envelope{open}}); err != nil {
		return err
	}
	at := open.Seq
	for k := 0; k <= restarts; k++ {
		req := forker.Request{ParentID: id, ChildID: id + "-refused", At: &forker.At{Seq: &at}}
		d, err := firstFork(ctx, e, req, k == restarts, logger, func(_ forker.Reply, err error) error {
			var se *schema.Error
			if !errors.As(err, &se) || se.Code != schema.CodeUnsafeCut || se.NearestSafeBefore == nil || *se.NearestSafeBefore != safe {
				return fmt.Errorf("fork at seq %d answered %v; want unsafe_cut, nearest safe %d", at, err, safe)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("forker: %w", err)
		}
		res.Resolve.add(d, k == restarts)
	}
	return nil
}

func (w *FirstWork) add(d time.Duration, cold bool) {
	if cold {
		w.Cold = append(w.Cold, d)
	} else {
		w.Snap = append(w.Snap, d)
	}
}

// firstRepair starts a repairer (cold: snapshots off) and times its
// on-demand repair of the session, which has nothing open.
func firstRepair(ctx context.Context, e *embedded, id string, cold bool, logger *slog.Logger) (time.Duration, error) {
	reg := prometheus.NewRegistry()
	r, err := repairer.New(repairer.Config{Store: e.st, Conn: e.nc, Logger: logger, Registerer: reg, NoSnapshots: cold})
	if err != nil {
		return 0, err
	}
	t := time.Now()
	out, err := r.Repair(ctx, id, false)
	took := time.Since(t)
	if err != nil || out.Repaired {
		return 0, fmt.Errorf("repair answered %+v, %v; want nothing to repair", out, err)
	}
	return took, snapshotUsed(reg, !cold)
}

// snapshotUsed checks that a service's metrics count one snapshot used
// (want), or none.
func snapshotUsed(reg prometheus.Gatherer, want bool) error {
	if used := strings.Contains(metricSummary(reg), "snapshot_loads_total{used}=1"); used != want {
		return fmt.Errorf("the snapshot used: %v, want %v (%s)", used, want, metricSummary(reg))
	}
	return nil
}

// firstFork runs a forker (cold: snapshots off) and times req, whose
// answer check judges.
func firstFork(ctx context.Context, e *embedded, req forker.Request, cold bool, logger *slog.Logger, check func(forker.Reply, error) error) (time.Duration, error) {
	reg := prometheus.NewRegistry()
	f, err := forker.New(forker.Config{Store: e.st, Conn: e.nc, Logger: logger, Registerer: reg, NoSnapshots: cold})
	if err != nil {
		return 0, err
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- f.Run(runCtx) }()
	defer func() { stop(); <-done }()
	for deadline := time.Now().Add(30 * time.Second); f.Ready() != nil; {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("forker not ready: %v", f.Ready())
		}
		time.Sleep(10 * time.Millisecond)
	}
	t := time.Now()
	rep, err := f.Fork(ctx, req)
	took := time.Since(t)
	if err := check(rep, err); err != nil {
		return 0, err
	}
	return took, snapshotUsed(reg, !cold)
}
