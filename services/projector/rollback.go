package projector

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/services/projector/store"
)

// Rolled back (DESIGN.md section 5): the projector keeps, per stream, the
// last stream sequence it has consumed (its checkpoints, from start on)
// and raises log_rolled_back when a stream's last sequence goes below it.
// JetStream never lowers a stream's last sequence (deleting or purging
// messages keeps it), so that is the log losing messages it had stored
// and delivered: a node restored from an older copy, writes a power loss
// dropped, a truncated block file. The flag stays raised until the
// projector restarts; /readyz answers not ready with the reason, the
// metric sessionlog_projector_log_rolled_back is 1 and the dashboard shows
// a banner (from /v1/overview's rolledBack).

// rollbackEvery is how often the running projector compares the streams'
// last sequences with what it consumed.
const rollbackEvery = 2 * time.Second

// CodeLogRolledBack names the condition in /readyz and /v1/overview.
const CodeLogRolledBack = "log_rolled_back"

type rollbacks struct {
	gauge    prometheus.Gauge
	mu       sync.Mutex
	consumed map[string]uint64 // stream -> highest sequence consumed
	reasons  map[string]string // stream -> why it is rolled back
}

func newRollbacks(r prometheus.Registerer) (*rollbacks, error) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "sessionlog_projector_log_rolled_back",
		Help: "1 when a stream's last sequence went below one the projector had consumed: the log lost stored events."})
	if err := r.Register(g); err != nil {
		return nil, fmt.Errorf("projector: metrics: %w", err)
	}
	return &rollbacks{gauge: g, consumed: map[string]uint64{}, reasons: map[string]string{}}, nil
}

// saw records the positions of a checkpoint as consumed.
func (rb *rollbacks) saw(cp store.Checkpoint) {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	for _, p := range cp.Streams {
		rb.consumed[p.Name] = max(rb.consumed[p.Name], p.Seq)
	}
}

// snapshot is what was consumed of each stream so far.
func (rb *rollbacks) snapshot() map[string]uint64 {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	return maps.Clone(rb.consumed)
}

// check compares a stream's last sequence, read after c was consumed of
// it (a snapshot taken before the read: the projector may consume more
// meanwhile), with c.
func (rb *rollbacks) check(name string, last, c uint64) {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	if last < c && rb.reasons[name] == "" {
		rb.reasons[name] = fmt.Sprintf("stream %s ends at seq %d, but the projector consumed it up to seq %d: the log lost %d stored messages", name, last, c, c-last)
		rb.gauge.Set(1)
	}
}

// reason is empty unless a stream rolled back.
func (rb *rollbacks) reason() string {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	if len(rb.reasons) == 0 {
		return ""
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(rb.reasons)) {
		out = append(out, rb.reasons[name])
	}
	return CodeLogRolledBack + ": " + strings.Join(out, "; ")
}

// CheckStreams compares every stream's last sequence with what was
// consumed, now (the running projector does it every rollbackEvery); a
// stream created again since (another creation time) restarts its
// sequences and is not compared.
func (s *Service) CheckStreams(ctx context.Context) {
	consumed := s.rb.snapshot()
	infos, err := s.streams(ctx)
	if err != nil {
		return // unreachable now: the next round looks again
	}
	for name, info := range infos {
		if c, ok := s.created[name]; ok && c.Equal(info.created) {
			s.rb.check(name, info.last, consumed[name])
		}
	}
}

// every calls f every d until ctx ends.
func every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}
