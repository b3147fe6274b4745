package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/repairer"
)

// RepairConfig configures the repair-latency benchmark.
type RepairConfig struct {
	Sessions int
	LeaseTTL time.Duration
	Grace    time.Duration
	// Replicas: 1 runs one embedded node; 3 a three-node cluster on
	// loopback with R3 stream and buckets.
	Replicas int
	// Concurrency of the one repairer (0: its default).
	Concurrency int
	Logger      *slog.Logger
	// Progress, if set, gets one line per phase.
	Progress io.Writer
	// Profile, if set, is started once the leases are claimed and its
	// result called when every repair is in.
	Profile func() func()
}

// RepairResult is what RunRepair measured. Latencies run from each
// lease's expiry (its last renewal's server time + TTL) to the server time
// its repair/applied was stored, minus the grace period.
type RepairResult struct {
	Count         int
	P50, P99, Max time.Duration
	// MarkerP50, MarkerP99: how late the server's expiry markers came
	// after each lease's expiry (the phase a repairer that waits for
	// them cannot beat; a lease the repairer ended before its marker
	// came has none); AfterDueP50, AfterDueP99: from the later of the
	// marker (where one came) and the expiry + grace to the commit (the
	// repairer's own phase, negative when it did not wait for the
	// marker).
	MarkerP50, MarkerP99     time.Duration
	AfterDueP50, AfterDueP99 time.Duration
	// Floor: wall time the store needed to commit one atomic batch per
	// session at the same concurrency (the seeding), measured in this run:
	// no repairer can close them all faster.
	Floor time.Duration
}

// RunRepair orphans cfg.Sessions sessions at once (each with a tool call
// started and not finished; every holder claims its lease and stops
// renewing together) and measures how long one repairer takes to commit
// each repair after its lease expired.
func RunRepair(ctx context.Context, cfg RepairConfig) (RepairResult, error) {
	if cfg.Sessions <= 0 {
		cfg.Sessions = 1000
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 2 * time.Second
	}
	if cfg.Grace < 0 {
		cfg.Grace = 0
	}
	if cfg.Replicas != 3 {
		cfg.Replicas = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	say := sayer(cfg.Progress)
	var res RepairResult

	tb := &benchTB{}
	defer tb.cleanup()
	url, err := startServers(tb, cfg.Replicas)
	if err != nil {
		return res, err
	}
	nc, err := nats.Connect(url)
	if err != nil {
		return res, err
	}
	defer nc.Close()
	st, err := logstore.Open(ctx, nc, logstore.Config{Replicas: cfg.Replicas, LeaseTTL: cfg.LeaseTTL, Logger: cfg.Logger})
	if err != nil {
		return res, err
	}

	ids := make([]string, cfg.Sessions)
	for i := range ids {
		ids[i] = fmt.Sprintf("bench-repair-%05d", i)
	}
	// Seed: one atomic batch per session, as many at once as the repairer
	// will run, which is also the floor measurement.
	conc := cfg.Concurrency
	if conc <= 0 {
		conc = repairer.DefaultConfig().Concurrency
	}
	say("seeding %d sessions (R%d)", cfg.Sessions, cfg.Replicas)
	t0 := time.Now()
	if err := forEach(ctx, ids, conc, func(id string) error {
		return seedOpen(ctx, st, id)
	}); err != nil {
		return res, err
	}
	res.Floor = time.Since(t0)

	// Watch repair/applied events land: the stored timestamp is the commit.
	commits := newCommitLog()
	js, err := jetstream.New(nc)
	if err != nil {
		return res, err
	}
	cons, err := js.OrderedConsumer(ctx, logstore.Streams()[0], jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverNewPolicy,
	})
	if err != nil {
		return res, err
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		if m.Headers().Get(logstore.HeaderType) != schema.TypeRepairApplied {
			return
		}
		md, err := m.Metadata()
		if err != nil {
			return
		}
		if id, ok := logstore.SessionFromSubject(m.Subject()); ok {
			commits.add(id, md.Timestamp)
		}
	})
	if err != nil {
		return res, err
	}
	defer cc.Stop()
	// And the expiry markers: the stored timestamp is when the server
	// wrote each.
	markers := newCommitLog()
	mcons, err := js.OrderedConsumer(ctx, "KV_"+logstore.LeaseBucket, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverNewPolicy,
	})
	if err != nil {
		return res, err
	}
	mc, err := mcons.Consume(func(m jetstream.Msg) {
		if m.Headers().Get("Nats-Marker-Reason") == "" {
			return
		}
		md, err := m.Metadata()
		if err != nil {
			return
		}
		if id, ok := strings.CutPrefix(m.Subject(), "$KV."+logstore.LeaseBucket+"."); ok {
			markers.add(id, md.Timestamp)
		}
	})
	if err != nil {
		return res, err
	}
	defer mc.Stop()

	reg := prometheus.NewRegistry()
	rcfg := assemble.DefaultRepairer()
	rcfg.LeaseTTL, rcfg.Grace, rcfg.Concurrency = cfg.LeaseTTL, cfg.Grace, cfg.Concurrency
	rcfg.SweepInterval = time.Hour // the benchmark measures the lease watch, not sweeps
	svc, err := assemble.NewRepairer(rcfg, st, assemble.Deps{Conn: nc, Logger: cfg.Logger, Registerer: reg})
	if err != nil {
		return res, err
	}
	stages := newStageLog()
	if cfg.Progress != nil {
		svc.ObserveStages(stages.add)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- svc.Run(rctx) }()
	defer func() { stop(); <-done }()
	for svc.Ready() != nil {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case err := <-done:
			return res, fmt.Errorf("repairer: %w", err)
		case <-time.After(10 * time.Millisecond):
		}
	}

	// Every holder claims its session once and then stops renewing.
	say("claiming %d leases (TTL %s, grace %s)", cfg.Sessions, cfg.LeaseTTL, cfg.Grace)
	if err := forEach(ctx, ids, 64, func(id string) error {
		return st.RenewLease(ctx, id, "bench-holder", time.Now())
	}); err != nil {
		return res, err
	}
	expiry := make(map[string]time.Time, len(ids))
	var emu sync.Mutex
	if err := forEach(ctx, ids, 64, func(id string) error {
		rec, err := st.LeaseRecord(ctx, id)
		if err != nil {
			return err
		}
		if !rec.Live() {
			return fmt.Errorf("%s: lease gone before it was read (TTL too short for %d sessions)", id, len(ids))
		}
		emu.Lock()
		expiry[id] = rec.Stored.Add(cfg.LeaseTTL)
		emu.Unlock()
		return nil
	}); err != nil {
		return res, err
	}

	var first, last time.Time
	for _, at := range expiry {
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	say("waiting for %d repairs (their leases expire within %s)", cfg.Sessions, last.Sub(first).Round(time.Millisecond))
	if cfg.Profile != nil {
		stopProfile := cfg.Profile()
		defer stopProfile()
	}
	deadline := time.Now().Add(cfg.LeaseTTL + cfg.Grace + 2*time.Minute)
	for commits.len() < len(ids) {
		if time.Now().After(deadline) {
			return res, fmt.Errorf("only %d of %d sessions repaired", commits.len(), len(ids))
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	if cfg.Progress != nil {
		say("repairer metrics: %s", metricSummary(reg))
	}
	// The markers of the last expiries may still be on their way; a lease
	// the repairer ended (deleted) before its marker came gets none.
	ended := map[string]bool{}
	for time.Now().Before(deadline) {
		waiting := 0
		for _, id := range ids {
			if _, n := markers.get(id); n > 0 || ended[id] {
				continue
			}
			rec, err := st.LeaseRecord(ctx, id)
			if err != nil {
				return res, err
			}
			if !rec.Live() && !rec.Expired {
				ended[id] = true
				continue
			}
			waiting++
		}
		if waiting == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	lat := make([]time.Duration, 0, len(ids))
	var lag, after []time.Duration
	for _, id := range ids {
		at, n := commits.get(id)
		if n != 1 {
			return res, fmt.Errorf("%s: %d repairs", id, n)
		}
		lat = append(lat, at.Sub(expiry[id])-cfg.Grace)
		due := expiry[id].Add(cfg.Grace)
		if m, n := markers.get(id); n > 0 {
			lag = append(lag, m.Sub(expiry[id]))
			if m.After(due) {
				due = m
			}
		}
		after = append(after, at.Sub(due))
	}
	if cfg.Progress != nil {
		due := make(map[string]time.Time, len(ids))
		for _, id := range ids {
			due[id] = expiry[id].Add(cfg.Grace)
		}
		// The repairer marks a repair committed when its append is
		// answered, which may come after the commit reached the stream
		// (where commits saw it).
		for !stages.passed(ids, repairer.StageCommitted) && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return res, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
		say("stages after due (p50/p99/max ms): %s", stages.summary(due))
	}
	res.Count = len(lat)
	res.P50, res.P99, res.Max = quantiles(lat)
	res.MarkerP50, res.MarkerP99, _ = quantiles(lag)
	res.AfterDueP50, res.AfterDueP99, _ = quantiles(after)
	return res, nil
}

// quantiles sorts d and returns its p50, p99 and max (zeros if empty).
func quantiles(d []time.Duration) (p50, p99, max time.Duration) {
	if len(d) == 0 {
		return 0, 0, 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)/2], d[min(len(d)-1, len(d)*99/100)], d[len(d)-1]
}

// metricSummary prints the repairer's counters and histogram counts, one
// name=value a metric (labels folded into the name).
func metricSummary(g prometheus.Gatherer) string {
	mfs, err := g.Gather()
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, mf := range mfs {
		name := strings.TrimPrefix(mf.GetName(), "sessionlog_repairer_")
		for _, m := range mf.GetMetric() {
			n := name
			for _, l := range m.GetLabel() {
				n += "{" + l.GetValue() + "}"
			}
			switch {
			case m.GetCounter() != nil:
				fmt.Fprintf(&b, " %s=%g", n, m.GetCounter().GetValue())
			case m.GetHistogram() != nil:
				h := m.GetHistogram()
				fmt.Fprintf(&b, " %s=%d(sum %g)", n, h.GetSampleCount(), h.GetSampleSum())
			}
		}
	}
	return strings.TrimSpace(b.String())
}

// seedOpen stores a session whose tool call started and never finished.
func seedOpen(ctx context.Context, st *logstore.Store, id string) error {
	now := time.Now().UTC()
	mk := func(seq uint64, typ string, data string) schema.Envelope {
		e := schema.Envelope{SchemaVersion: schema.Version, SessionID: id, Seq: seq, EventID: fmt.Sprintf("ev%d", seq),
			Time: now, Type: typ}
		if typ != schema.TypeSessionCreated {
			e.TurnID = "t1"
		}
		if typ == schema.TypeToolRequested || typ == schema.TypeToolStarted {
			e.ToolCallID = "c1"
		}
		if data != "" {
			e.Data = json.RawMessage(data)
		}
		return e
	}
	_, err := st.Append(ctx, logstore.AppendRequest{SessionID: id, Events: []schema.Envelope{
		mk(1, schema.TypeSessionCreated, `{"agent":"bench"}`),
		mk(2, schema.TypeTurnStarted, ""),
		mk(3, schema.TypeToolRequested, `{"name":"sh","input":{"cmd":"make"}}`),
		mk(4, schema.TypeToolStarted, ""),
	}})
	return err
}

// stageLog keeps the last time each session passed each repairer stage.
type stageLog struct {
	mu sync.Mutex
	at map[string]map[repairer.Stage]time.Time
}

func newStageLog() *stageLog {
	return &stageLog{at: map[string]map[repairer.Stage]time.Time{}}
}

func (l *stageLog) add(id string, st repairer.Stage, t time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.at[id]
	if m == nil {
		m = map[repairer.Stage]time.Time{}
		l.at[id] = m
	}
	m[st] = t
}

// passed reports whether every session of ids passed stage st.
func (l *stageLog) passed(ids []string, st repairer.Stage) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range ids {
		if _, ok := l.at[id][st]; !ok {
			return false
		}
	}
	return true
}

// summary gives each stage's p50/p99/max after each session's due time.
func (l *stageLog) summary(due map[string]time.Time) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, st := range []repairer.Stage{repairer.StageQueued, repairer.StageStarted, repairer.StageRead, repairer.StageDecided,
		repairer.StageEnded, repairer.StageSent, repairer.StageCommitted} {
		var d []time.Duration
		for id, at := range due {
			if t, ok := l.at[id][st]; ok {
				d = append(d, t.Sub(at))
			}
		}
		p50, p99, mx := quantiles(d)
		ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
		fmt.Fprintf(&b, " %s=%.0f/%.0f/%.0f(n=%d)", st, ms(p50), ms(p99), ms(mx), len(d))
	}
	return strings.TrimSpace(b.String())
}

type commitLog struct {
	mu sync.Mutex
	at map[string]time.Time
	n  map[string]int
}

func newCommitLog() *commitLog {
	return &commitLog{at: map[string]time.Time{}, n: map[string]int{}}
}

func (c *commitLog) add(id string, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[id] == 0 {
		c.at[id] = t
	}
	c.n[id]++
}

func (c *commitLog) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.at)
}

func (c *commitLog) get(id string) (time.Time, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at[id], c.n[id]
}

// forEach runs f on every id with at most conc at once; the first error wins.
func forEach(ctx context.Context, ids []string, conc int, f func(string) error) error {
	var (
		wg    sync.WaitGroup
		next  atomic.Int64
		first error
		once  sync.Once
	)
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(ids) || ctx.Err() != nil {
					return
				}
				if err := f(ids[i]); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// startServers starts one node or a three-node cluster and returns the
// client URL(s).
func startServers(tb *benchTB, replicas int) (string, error) {
	if replicas == 1 {
		dir := tb.TempDir()
		s, err := natstest.Start(natstest.Options(dir))
		if err != nil {
			return "", err
		}
		tb.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
		return s.ClientURL(), nil
	}
	var c *natstest.Cluster
	if err := tb.run(func() { c = natstest.RunCluster(tb, 3) }); err != nil {
		return "", err
	}
	return c.URLs(), nil
}

// benchTB lets the natstest helpers run outside `go test`.
type benchTB struct {
	mu       sync.Mutex
	cleanups []func()
	dirs     []string
}

type benchFatal struct{ msg string }

func (b *benchTB) Helper() {}
func (b *benchTB) Fatalf(format string, args ...any) {
	panic(benchFatal{fmt.Sprintf(format, args...)})
}
func (b *benchTB) TempDir() string {
	d, err := os.MkdirTemp("", "sessionlog-bench-")
	if err != nil {
		panic(benchFatal{err.Error()})
	}
	b.mu.Lock()
	b.dirs = append(b.dirs, d)
	b.mu.Unlock()
	return d
}
func (b *benchTB) Cleanup(f func()) {
	b.mu.Lock()
	b.cleanups = append(b.cleanups, f)
	b.mu.Unlock()
}

func (b *benchTB) cleanup() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := len(b.cleanups) - 1; i >= 0; i-- {
		b.cleanups[i]()
	}
	for _, d := range b.dirs {
		os.RemoveAll(d)
	}
}

// run calls f, turning a helper's Fatalf into an error.
func (b *benchTB) run(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if bf, ok := r.(benchFatal); ok {
				err = errors.New(bf.msg)
				return
			}
			panic(r)
		}
	}()
	f()
	return nil
}

var _ natstest.TB = (*benchTB)(nil)
