package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/procstat"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/writer"
)

// AppendOptions configures the append benchmark.
type AppendOptions struct {
	// Quick: a few seconds per scenario (under a minute in all).
	Quick bool
	Out   io.Writer
	// Sessions is the number of concurrent sessions (one goroutine each);
	// default 64.
	Sessions int
	// WriterTCP connects the writer over TCP (a writer in its own
	// process) instead of in-process (as `sessionlog up` runs it).
	WriterTCP bool
	// Only, if set, names the scenarios to run (a baseline a kept
	// scenario needs is kept too).
	Only []string
	// Duration per scenario (overrides Quick).
	Duration time.Duration
	// DurableSessions are the session counts of the durable scenarios
	// (default 64 and 256; none when Only leaves them out).
	DurableSessions []int
	// LazyGroupCommit gives the writer of the lazy server group commit,
	// which `up --sync interval` leaves off (an A/B of the writer path; the
	// durable writers always have it).
	LazyGroupCommit bool
	// R3 adds the durable scenarios on 3-node clusters (streams R3), the
	// fault suite's shape: raw-publish-1-r3-n, raw-publish-sync-r3-n and
	// writer-durable-r3-n.
	R3 bool
	// DurablePartitions is the number of session streams of the durable
	// servers (default 1): each stream commits its own batches.
	DurablePartitions int
}

// AppendResult is one scenario's figures.
type AppendResult struct {
	Name     string
	EventsPS float64
	Baseline float64
	P50, P99 time.Duration
	// BaselineP99 is the baseline scenario's p99 (its own for a baseline).
	BaselineP99 time.Duration
	// AppendsPerCommit is, for a writer with group commit, the appends
	// it sent per batch (or lone publish) over the measured rounds;
	// RefusedCommits the batches refused whole (their appends sent again
	// alone).
	AppendsPerCommit float64
	RefusedCommits   uint64
	// CPU is the process's CPU time per event over the measured rounds
	// (server, writer and load together): unlike the rate, it does not
	// swing with whatever else the machine runs.
	CPU time.Duration
}

// Line renders the BENCH line.
func (r AppendResult) Line() string {
	ratio := 1.0
	if r.Baseline > 0 {
		ratio = r.EventsPS / r.Baseline
	}
	line := fmt.Sprintf("BENCH name=%s value=%.0f unit=ev/s baseline=%.0f ratio=%.2f p50=%.3f p99=%.3f baseline_p99=%.3f cpu_us_per_event=%.1f",
		r.Name, r.EventsPS, r.Baseline, ratio, ms(r.P50), ms(r.P99), ms(r.BaselineP99), float64(r.CPU)/float64(time.Microsecond))
	if r.AppendsPerCommit > 0 {
		line += fmt.Sprintf(" appends_per_commit=%.1f refused_commits=%d", r.AppendsPerCommit, r.RefusedCommits)
	}
	return line
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Append runs, in one process on an embedded JetStream server (file
// storage in a temporary directory), with Sessions concurrent sessions:
//
//	raw-publish-1   synchronous JetStream publish with the per-subject
//	                expected-sequence header, one event each (the floor)
//	writer-1        the same events through sessions.api.append
//	client-1        through pkg/client (Append with expectedSeq)
//	raw-batch-10    atomic batches of 10 straight to JetStream (the batch floor)
//	writer-batch-10 10-event requests through the writer
//
// and, for each n of DurableSessions, with n sessions:
//
//	raw-publish-1-n     raw-publish-1 (the lazy server: fsync every 2 minutes)
//	raw-publish-sync-n  raw-publish-1 on a second server that fsyncs
//	                    before every acknowledgement (sync_interval: always)
//	writer-durable-n    writer-1 on that server: the writer's group commit
//	                    against the lazy raw floor
//
// and prints one BENCH line per scenario; ratios are against the raw
// floor of the same batch size, measured in the same run.
func Append(ctx context.Context, opt AppendOptions) error {
	if opt.Out == nil {
		opt.Out = io.Discard
	}
	if opt.Sessions <= 0 {
		opt.Sessions = 64
	}
	if opt.DurableSessions == nil {
		opt.DurableSessions = []int{64, 256}
	}
	dur := opt.Duration
	if dur <= 0 {
		dur = 40 * time.Second
		if opt.Quick {
			dur = 6 * time.Second
		}
	}

	lazy, err := startAppendTarget(ctx, "sessionlog-bench-append-", false, opt.WriterTCP, logstore.Config{MaxInflightBatches: opt.Sessions, NoGroupCommit: !opt.LazyGroupCommit})
	if err != nil {
		return err
	}
	defer lazy.close()
	var durable, lazyR3, durableR3 *appendTarget
	if len(opt.DurableSessions) > 0 {
		cfg := logstore.Config{MaxInflightBatches: slices.Max(opt.DurableSessions), Partitions: opt.DurablePartitions}
		if durable, err = startAppendTarget(ctx, "sessionlog-bench-append-sync-", true, opt.WriterTCP, cfg); err != nil {
			return err
		}
		defer durable.close()
		if opt.R3 {
			cfg.Replicas = 3
			if lazyR3, err = startClusterTarget(ctx, false, cfg); err != nil {
				return err
			}
			defer lazyR3.close()
			if durableR3, err = startClusterTarget(ctx, true, cfg); err != nil {
				return err
			}
			defer durableR3.close()
		}
	}

	type scenario struct {
		name     string
		batch    int
		sessions int
		baseline string
		run      func(ctx context.Context, sid string, seq uint64, n int) error
		setup    func(ctx context.Context, sid string) error
		// commits counts the writer's group commits, if it has them.
		commits func() (batches, appends, refused uint64)
	}
	rawSeq := newStreamSeqs()
	rawPublishOn := func(t *appendTarget) func(ctx context.Context, sid string, seq uint64, n int) error {
		return func(ctx context.Context, sid string, seq uint64, n int) error {
			return rawPublish(ctx, t, rawSeq, sid, seq)
		}
	}
	writerOn := func(t *appendTarget) func(ctx context.Context, sid string, seq uint64, n int) error {
		return func(ctx context.Context, sid string, seq uint64, n int) error {
			return writerRequest(ctx, t.nc, sid, seq, n)
		}
	}
	cl := lazy.cl
	scenarios := []scenario{
		{name: "raw-publish-1", batch: 1, run: rawPublishOn(lazy)},
		{name: "writer-1", batch: 1, baseline: "raw-publish-1", setup: lazy.writerSetup, run: writerOn(lazy)},
		{name: "client-1", batch: 1, baseline: "raw-publish-1", setup: lazy.writerSetup, run: func(ctx context.Context, sid string, seq uint64, n int) error {
			_, err := cl.Append(ctx, client.AppendRequest{SessionID: sid, ExpectedSeq: client.Seq(seq - 1), Events: benchEvents(n)})
			return err
		}},
		{name: "raw-batch-10", batch: 10, run: func(ctx context.Context, sid string, seq uint64, n int) error {
			return rawBatch(ctx, lazy, rawSeq, sid, seq, n)
		}},
		{name: "writer-batch-10", batch: 10, baseline: "raw-batch-10", setup: lazy.writerSetup, run: writerOn(lazy)},
	}
	durableScenarios := func(suffix string, lazy, durable *appendTarget) {
		for _, n := range opt.DurableSessions {
			raw := fmt.Sprintf("raw-publish-1%s-%d", suffix, n)
			scenarios = append(scenarios,
				scenario{name: raw, batch: 1, sessions: n, run: rawPublishOn(lazy)},
				scenario{name: fmt.Sprintf("raw-publish-sync%s-%d", suffix, n), batch: 1, sessions: n, baseline: raw, run: rawPublishOn(durable)},
				scenario{name: fmt.Sprintf("writer-durable%s-%d", suffix, n), batch: 1, sessions: n, baseline: raw, setup: durable.writerSetup, run: writerOn(durable),
					commits: durable.st.GroupCommitStats},
			)
		}
	}
	durableScenarios("", lazy, durable)
	if opt.R3 {
		durableScenarios("-r3", lazyR3, durableR3)
	}
	if len(opt.Only) > 0 {
		keep := map[string]bool{}
		for _, n := range opt.Only {
			keep[n] = true
		}
		for _, sc := range scenarios {
			if keep[sc.name] && sc.baseline != "" {
				keep[sc.baseline] = true
			}
		}
		var kept []scenario
		for _, sc := range scenarios {
			if keep[sc.name] {
				kept = append(kept, sc)
			}
		}
		if len(kept) == 0 {
			return fmt.Errorf("bench append: no scenario named %q", opt.Only)
		}
		scenarios = kept
	}
	// Scenarios run in interleaved rounds (each a slice of the duration)
	// so that a change in the machine's load over the run hits every
	// scenario alike; the first round of each is a warm-up.
	rounds := 5
	if !opt.Quick && opt.Duration <= 0 {
		rounds = 10
	}
	slice := dur / time.Duration(rounds)
	runs := make([]*appendRun, len(scenarios))
	for i, sc := range scenarios {
		runs[i] = &appendRun{name: sc.name, batch: sc.batch, run: sc.run, commits: sc.commits}
		sessions := sc.sessions
		if sessions == 0 {
			sessions = opt.Sessions
		}
		if err := runs[i].init(ctx, sessions, sc.setup); err != nil {
			return fmt.Errorf("bench append %s: %w", sc.name, err)
		}
	}
	for r := 0; r <= rounds; r++ {
		for _, ar := range runs {
			if err := ar.round(ctx, slice, r > 0); err != nil {
				return fmt.Errorf("bench append %s: %w", ar.name, err)
			}
		}
	}
	results := map[string]AppendResult{}
	for i, sc := range scenarios {
		r, err := runs[i].result()
		if err != nil {
			return fmt.Errorf("bench append %s: %w", sc.name, err)
		}
		if sc.baseline != "" {
			r.Baseline, r.BaselineP99 = results[sc.baseline].EventsPS, results[sc.baseline].P99
		} else {
			r.Baseline, r.BaselineP99 = r.EventsPS, r.P99
		}
		results[sc.name] = r
		fmt.Fprintln(opt.Out, r.Line())
	}
	return nil
}

// appendRun is one scenario's sessions and figures across rounds.
type appendRun struct {
	name    string
	batch   int
	run     func(context.Context, string, uint64, int) error
	sids    []string
	seqs    []uint64
	lats    []time.Duration
	elapsed time.Duration
	cpu     time.Duration
	commits func() (batches, appends, refused uint64)
	// batches, appends and refusals of the writer's group commit in
	// measured rounds.
	batches, appends, refused uint64
}

func (a *appendRun) init(ctx context.Context, sessions int, setup func(context.Context, string) error) error {
	stamp := time.Now().UnixNano()
	a.sids = make([]string, sessions)
	a.seqs = make([]uint64, sessions)
	for g := range a.sids {
		a.sids[g] = fmt.Sprintf("%s-%d-%d", a.name, stamp, g)
		a.seqs[g] = 1
		if setup != nil {
			if err := setup(ctx, a.sids[g]); err != nil {
				return err
			}
			a.seqs[g] = 2
		}
	}
	return nil
}

// round runs one goroutine per session for d, each appending a.batch
// events per operation synchronously; a measured round keeps the latency
// of every operation and adds its wall time.
func (a *appendRun) round(ctx context.Context, d time.Duration, measure bool) error {
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		lats []time.Duration
		errs = make(chan error, len(a.sids))
	)
	var b0, a0, r0 uint64
	if a.commits != nil {
		b0, a0, r0 = a.commits()
	}
	cpu0 := procstat.CPU()
	start := time.Now()
	end := start.Add(d)
	for g := range a.sids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sid := a.sids[g]
			var local []time.Duration
			for {
				t0 := time.Now()
				if t0.After(end) || ctx.Err() != nil {
					break
				}
				if err := a.run(ctx, sid, a.seqs[g], a.batch); err != nil {
					errs <- fmt.Errorf("session %s seq %d: %w", sid, a.seqs[g], err)
					return
				}
				a.seqs[g] += uint64(a.batch)
				local = append(local, time.Since(t0))
			}
			mu.Lock()
			lats = append(lats, local...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	took := time.Since(start)
	cpu := procstat.CPU() - cpu0
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	if measure {
		a.lats = append(a.lats, lats...)
		a.elapsed += took
		a.cpu += cpu
		if a.commits != nil {
			b1, a1, r1 := a.commits()
			a.batches, a.appends, a.refused = a.batches+b1-b0, a.appends+a1-a0, a.refused+r1-r0
		}
	}
	return nil
}

func (a *appendRun) result() (AppendResult, error) {
	if len(a.lats) == 0 || a.elapsed <= 0 {
		return AppendResult{}, errors.New("no operation completed")
	}
	sort.Slice(a.lats, func(i, j int) bool { return a.lats[i] < a.lats[j] })
	return AppendResult{
		Name:     a.name,
		EventsPS: float64(len(a.lats)*a.batch) / a.elapsed.Seconds(),
		P50:      a.lats[len(a.lats)/2],
		P99:      a.lats[len(a.lats)*99/100],
		CPU:      a.cpu / time.Duration(len(a.lats)*a.batch),

		AppendsPerCommit: perCommit(a.appends, a.batches),
		RefusedCommits:   a.refused,
	}, nil
}

func perCommit(appends, batches uint64) float64 {
	if batches == 0 {
		return 0
	}
	return float64(appends) / float64(batches)
}

// streamSeqs keeps each raw session's last stream seq, as the raw floor
// needs it for the per-subject expectation (a writer keeps it in its
// cache).
type streamSeqs struct {
	mu sync.Mutex
	m  map[string]uint64
}

func newStreamSeqs() *streamSeqs { return &streamSeqs{m: map[string]uint64{}} }

func (s *streamSeqs) get(sid string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[sid]
}

func (s *streamSeqs) set(sid string, v uint64) {
	s.mu.Lock()
	s.m[sid] = v
	s.mu.Unlock()
}

// benchEnvelope is the stored form of a benchmark event: what the writer
// stores for a request event.
func benchEnvelope(sid string, seq uint64, id string) schema.Envelope {
	return schema.Envelope{SchemaVersion: schema.Version, SessionID: sid, Seq: seq, EventID: id, Time: time.Now().UTC(),
		Type: schema.TypeMessageUser, Data: json.RawMessage(`{"content":"benchmark message of a typical small size"}`)}
}

// appendMsg is a message with the headers logstore sends, on the
// session's subject in t's store (its partition's, when it has several).
func appendMsg(t *appendTarget, sid string, seq uint64, expected uint64, first bool) (*nats.Msg, error) {
	loc, err := t.st.Locate(sid)
	if err != nil {
		return nil, err
	}
	id := sid + "-" + strconv.FormatUint(seq, 10)
	e := benchEnvelope(sid, seq, id)
	body, err := schema.Encode(&e)
	if err != nil {
		return nil, err
	}
	m := nats.NewMsg(loc.Subject)
	m.Data = body
	m.Header.Set(logstore.HeaderMsgID, logstore.MsgID(sid, id))
	m.Header.Set(logstore.HeaderType, e.Type)
	m.Header.Set(logstore.HeaderSeq, strconv.FormatUint(seq, 10))
	m.Header.Set(logstore.HeaderSchema, "1")
	if first {
		m.Header.Set(logstore.HeaderExpectedSeq, strconv.FormatUint(expected, 10))
	}
	return m, nil
}

func rawPublish(ctx context.Context, t *appendTarget, seqs *streamSeqs, sid string, seq uint64) error {
	m, err := appendMsg(t, sid, seq, seqs.get(sid), true)
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		ack, err := t.js.PublishMsg(ctx, m, jetstream.WithRetryAttempts(0))
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant && attempt < 100 {
			// A replicated stream refuses an expectation on a subject
			// whose previous message it has acknowledged but not yet
			// cleared from its in-process set: a moment later it passes.
			time.Sleep(time.Millisecond)
			continue
		}
		if err != nil {
			return err
		}
		seqs.set(sid, ack.Sequence)
		return nil
	}
}

func rawBatch(ctx context.Context, t *appendTarget, seqs *streamSeqs, sid string, seq uint64, n int) error {
	b, err := jetstreamext.NewBatchPublisher(t.js, jetstreamext.BatchFlowControl{AckFirst: false})
	if err != nil {
		return err
	}
	expected := seqs.get(sid)
	for i := 0; i < n; i++ {
		m, err := appendMsg(t, sid, seq+uint64(i), expected, i == 0)
		if err != nil {
			return err
		}
		if i < n-1 {
			if err := b.AddMsg(m); err != nil {
				_ = b.Discard()
				return err
			}
			continue
		}
		ack, err := b.CommitMsg(ctx, m)
		if err != nil {
			return err
		}
		seqs.set(sid, ack.Sequence)
	}
	return nil
}

var benchData = json.RawMessage(`{"content":"benchmark message of a typical small size"}`)

func benchEvents(n int) []schema.Envelope {
	evs := make([]schema.Envelope, n)
	for i := range evs {
		evs[i] = schema.Envelope{Type: schema.TypeMessageUser, Data: benchData}
	}
	return evs
}

// writerRequest sends what pkg/client sends: the wire request with the
// expected seq and each event complete (event id, time, seq, schema
// version, session id) as schema.Encode writes it, which the writer stores
// as it came. Events without a time (or seq) would make the writer encode
// every event again, a cost no pkg/client request has.
func writerRequest(ctx context.Context, nc *nats.Conn, sid string, seq uint64, n int) error {
	b, err := writerRequestBody(sid, seq, n)
	if err != nil {
		return err
	}
	return sendWriterRequest(ctx, nc, b)
}

// sendWriterRequest sends an append request to the writer.
func sendWriterRequest(ctx context.Context, nc *nats.Conn, b []byte) error {
	m, err := nc.RequestWithContext(ctx, logstore.SubjectAppend, b)
	if err != nil {
		return err
	}
	if code := m.Header.Get("Nats-Service-Error-Code"); code != "" {
		return fmt.Errorf("writer: %s: %s", code, m.Data)
	}
	return nil
}

// writerRequestBody is writerRequest's request: n events from seq.
func writerRequestBody(sid string, seq uint64, n int) ([]byte, error) {
	b := make([]byte, 0, 128+n*(256+len(sid)))
	b = append(b, `{"sessionId":"`...)
	b = append(b, sid...)
	b = append(b, `","expectedSeq":`...)
	b = strconv.AppendUint(b, seq-1, 10)
	b = append(b, `,"events":[`...)
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		s := seq + uint64(i)
		e := benchEnvelope(sid, s, sid+"-"+strconv.FormatUint(s, 10))
		var err error
		if b, err = schema.AppendEncode(b, &e); err != nil {
			return nil, err
		}
	}
	return append(b, "]}"...), nil
}

// appendTarget is one embedded server of the append benchmark, with a
// writer on it and a connection for the load.
type appendTarget struct {
	st    *logstore.Store
	nc    *nats.Conn
	js    jetstream.JetStream
	cl    *client.Client
	close func()
}

// startClusterTarget is startAppendTarget on a 3-node cluster, shaped as
// the fault suite's (each node its own store; the writer and the load on
// the first node).
func startClusterTarget(ctx context.Context, syncAlways bool, cfg logstore.Config) (*appendTarget, error) {
	var ports []int
	var routes []*url.URL
	for range 3 {
		p, err := natstest.FreePort()
		if err != nil {
			return nil, err
		}
		ports = append(ports, p)
		u, _ := url.Parse(fmt.Sprintf("nats-route://127.0.0.1:%d", p))
		routes = append(routes, u)
	}
	name := fmt.Sprintf("bench-%d", time.Now().UnixNano()%100000)
	var stops []func()
	stopAll := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	var first *server.Server
	for i := range 3 {
		dir, cleanup, err := natstest.TempDir("sessionlog-bench-append-r3-")
		if err != nil {
			stopAll()
			return nil, err
		}
		o := natstest.Options(dir)
		o.SyncAlways = syncAlways
		o.ServerName = fmt.Sprintf("%s-%d", name, i)
		o.Cluster.Name = name
		o.Cluster.Host = "127.0.0.1"
		o.Cluster.Port = ports[i]
		o.Routes = routes
		srv, err := natstest.Start(o)
		if err != nil {
			cleanup()
			stopAll()
			return nil, err
		}
		stops = append(stops, func() { srv.Shutdown(); srv.WaitForShutdown(); cleanup() })
		if first == nil {
			first = srv
		}
	}
	// The store is provisioned once a meta leader is elected.
	var t *appendTarget
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; {
		if t, err = startTargetOn(ctx, first, false, cfg); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if err != nil {
		stopAll()
		return nil, err
	}
	closeTarget := t.close
	t.close = func() { closeTarget(); stopAll() }
	return t, nil
}

// startAppendTarget starts a server (fsyncing before every
// acknowledgement if syncAlways), a writer on it with the store opened
// with cfg, and the load's connection.
func startAppendTarget(ctx context.Context, prefix string, syncAlways, writerTCP bool, cfg logstore.Config) (*appendTarget, error) {
	srv, shutdown, err := embeddedServerSync(prefix, syncAlways)
	if err != nil {
		return nil, err
	}
	t, err := startTargetOn(ctx, srv, writerTCP, cfg)
	if err != nil {
		shutdown()
		return nil, err
	}
	closeTarget := t.close
	t.close = func() { closeTarget(); shutdown() }
	return t, nil
}

// startTargetOn starts the writer and the load's connection on srv.
func startTargetOn(ctx context.Context, srv *server.Server, writerTCP bool, cfg logstore.Config) (*appendTarget, error) {
	// The writer has its own connection: in-process, as in `sessionlog
	// up`, or over TCP, as a writer in its own process; the raw and client
	// scenarios share another (TCP: agents are other processes).
	st, stopWriter, err := startWriter(ctx, srv, writerTCP, cfg)
	if err != nil {
		return nil, err
	}
	t := &appendTarget{st: st}
	if t.nc, err = nats.Connect(srv.ClientURL()); err == nil {
		t.js, err = jetstream.New(t.nc)
	}
	t.close = func() {
		if t.nc != nil {
			t.nc.Close()
		}
		stopWriter()
	}
	if err != nil {
		t.close()
		return nil, err
	}
	t.cl = client.New(t.nc)
	return t, nil
}

// writerSetup creates the session through the writer.
func (t *appendTarget) writerSetup(ctx context.Context, sid string) error {
	_, err := t.cl.Append(ctx, client.AppendRequest{SessionID: sid, ExpectedSeq: client.Seq(0), Events: []schema.Envelope{{Type: schema.TypeSessionCreated, Data: json.RawMessage(`{}`)}}})
	return err
}

// startWriter runs a writer on its own connection to srv (in-process, as
// in `sessionlog up`, or over TCP) on a store opened with cfg, until stop
// is called.
func startWriter(ctx context.Context, srv *server.Server, tcp bool, cfg logstore.Config) (*logstore.Store, func(), error) {
	var wopts []nats.Option
	if !tcp {
		wopts = append(wopts, nats.InProcessServer(srv))
	}
	wnc, err := nats.Connect(srv.ClientURL(), wopts...)
	if err != nil {
		return nil, nil, err
	}
	st, err := logstore.Open(ctx, wnc, cfg)
	if err == nil {
		var w *writer.Service
		if w, err = assemble.NewWriter(assemble.DefaultWriter(), st, assemble.Deps{Conn: wnc}); err == nil {
			wctx, cancel := context.WithCancel(ctx)
			werr := make(chan error, 1)
			go func() { werr <- w.Run(wctx) }()
			stop := func() { cancel(); <-werr; wnc.Close() }
			for w.Ready() != nil {
				select {
				case err := <-werr:
					wnc.Close()
					return nil, nil, fmt.Errorf("writer: %v", err)
				case <-time.After(10 * time.Millisecond):
				}
			}
			return st, stop, nil
		}
	}
	wnc.Close()
	return nil, nil, err
}
