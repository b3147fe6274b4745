package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/procstat"
)

// ScaleOptions configures the scale benchmark.
type ScaleOptions struct {
	Out io.Writer
	// Progress, if set, gets a line per step.
	Progress io.Writer
	// Binary is the sessionlog executable: the writer and the repairer of
	// the flat part run as its `writer` and `repairer` verbs, each in its
	// own process, so that each one's peak RSS and CPU are its own.
	Binary string
	// Sessions written in all (each EventsPerSession single-event
	// appends), and the window measured at each end.
	Sessions, Window, EventsPerSession int
	// Concurrency: sessions written at once.
	Concurrency int
	// Partitions of the single-node store the sessions are written to.
	Partitions int
	// LeaseTTL of the writer and the repairer: short enough that the
	// leases of the first sessions lapse while the last are written.
	LeaseTTL time.Duration
	// ClusterSessions are the concurrent sessions of the three-node
	// comparison of P=1 and P=3; each P runs ClusterRounds measured rounds
	// of ClusterRound, taking turns.
	ClusterSessions int
	ClusterRounds   int
	ClusterRound    time.Duration
	// CatchupEvents the projector catches up with, over CatchupSessions
	// sessions, on P=1 and on P=3, CatchupTrials times each.
	CatchupEvents, CatchupSessions, CatchupTrials int
	// Only names the parts to run: flat (with the RSS of the writer and
	// the repairer), partitions, catchup. All when empty.
	Only []string
}

// ScaleParts are the parts of the scale benchmark, in the order they run.
var ScaleParts = []string{"flat", "partitions", "catchup"}

// Scale runs the parts of the scale benchmark and prints their BENCH lines.
func Scale(ctx context.Context, opt ScaleOptions) error {
	for _, p := range opt.Only {
		if !slices.Contains(ScaleParts, p) {
			return fmt.Errorf("bench scale: no part named %q (have %v)", p, ScaleParts)
		}
	}
	parts := map[string]func(context.Context, ScaleOptions) error{
		"flat": scaleFlat, "partitions": scalePartitions, "catchup": scaleCatchup,
	}
	for _, p := range ScaleParts {
		if len(opt.Only) > 0 && !slices.Contains(opt.Only, p) {
			continue
		}
		if err := parts[p](ctx, opt); err != nil {
			return fmt.Errorf("bench scale %s: %w", p, err)
		}
	}
	return nil
}

func (o ScaleOptions) say(format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, time.Now().Format("15:04:05 ")+format+"\n", args...)
	}
}

// scaleFlat writes Sessions sessions through a writer process on one
// embedded node, in order, each naming a holder (so each is claimed and
// leased), and compares the cost of an append in the first Window
// sessions against the last Window: whether an append costs more once
// many sessions exist. Then a repairer process sweeps every session: the
// last ones' holders keep heartbeating (live leases), the others' leases
// have lapsed (repaired). The peak RSS of each process, both with their
// default cache bounds, is read before it stops.
func scaleFlat(ctx context.Context, opt ScaleOptions) error {
	srv, shutdown, err := embeddedServer("sessionlog-bench-scale-")
	if err != nil {
		return err
	}
	defer shutdown()
	url := srv.ClientURL()
	args := []string{"--partitions", strconv.Itoa(opt.Partitions), "--lease-ttl", opt.LeaseTTL.String()}
	w, err := startChild(ctx, opt.Binary, "writer", url, nil, append(args, "--log-level", "warn")...)
	if err != nil {
		return err
	}
	defer w.kill()
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()

	// phase writes sessions [from, to) with Concurrency workers and
	// returns the CPU per event of the writer process and of this one
	// (server and load), and, if timed, every append's latency.
	type cost struct {
		writer, rest time.Duration
		lats         []time.Duration
	}
	phase := func(from, to int, timed bool) (cost, error) {
		var (
			c    cost
			next atomic.Int64
			mu   sync.Mutex
			wg   sync.WaitGroup
			werr error
		)
		next.Store(int64(from))
		wcpu0, err := w.cpu()
		if err != nil {
			return c, err
		}
		cpu0 := procstat.CPU()
		for range opt.Concurrency {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var mine []time.Duration
				for ctx.Err() == nil {
					i := int(next.Add(1) - 1)
					if i >= to {
						break
					}
					if i > from && i%10_000 == 0 {
						opt.say("flat: %d sessions written", i)
					}
					if err := writeScaleSession(ctx, nc, fmt.Sprintf("scale-%07d", i), opt.EventsPerSession, timed, &mine); err != nil {
						mu.Lock()
						werr = err
						mu.Unlock()
						break
					}
				}
				mu.Lock()
				c.lats = append(c.lats, mine...)
				mu.Unlock()
			}()
		}
		wg.Wait()
		if werr == nil {
			werr = ctx.Err()
		}
		if werr != nil {
			return c, werr
		}
		c.rest = procstat.CPU() - cpu0
		wcpu, err := w.cpu()
		if err != nil {
			return c, err
		}
		events := time.Duration((to - from) * opt.EventsPerSession)
		c.writer, c.rest = (wcpu-wcpu0)/events, c.rest/events
		return c, nil
	}
	opt.say("flat: writing %d sessions x %d events through a writer process (%d at once)", opt.Sessions, opt.EventsPerSession, opt.Concurrency)
	first, err := phase(0, opt.Window, true)
	if err != nil {
		return err
	}
	if _, err := phase(opt.Window, opt.Sessions-opt.Window, false); err != nil {
		return err
	}
	last, err := phase(opt.Sessions-opt.Window, opt.Sessions, true)
	if err != nil {
		return err
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	lastUS, firstUS := us(last.writer+last.rest), us(first.writer+first.rest)
	p99First, p99Last := us(Quantile(first.lats, 0.99)), us(Quantile(last.lats, 0.99))
	fmt.Fprintf(opt.Out, "BENCH name=scale-flat value=%.1f unit=us baseline=%.1f ratio=%.2f p99=%.0f p99_baseline=%.0f p99_ratio=%.2f writer_us=%.1f writer_us_baseline=%.1f sessions=%d window=%d events_per_session=%d partitions=%d lease_ttl=%s\n",
		lastUS, firstUS, lastUS/firstUS, p99Last, p99First, p99Last/p99First, us(last.writer), us(first.writer),
		opt.Sessions, opt.Window, opt.EventsPerSession, opt.Partitions, opt.LeaseTTL)

	// The holders of the last sessions stay: they heartbeat through the
	// writer while the repairer sweeps, which finds their leases live.
	live := min(1000, opt.Window)
	hctx, stopHeartbeats := context.WithCancel(ctx)
	heartbeats := make(chan error, 1)
	go func() { heartbeats <- heartbeat(hctx, nc, opt.Sessions-live, opt.Sessions, opt.LeaseTTL/3) }()
	rerr := scaleRepairerRSS(ctx, opt, url, args, live)
	stopHeartbeats()
	if err := <-heartbeats; rerr == nil {
		rerr = err
	}
	wrss, err := w.stop()
	if err != nil {
		return err
	}
	fmt.Fprintf(opt.Out, "BENCH name=scale-rss-writer value=%.0f unit=MiB target=256 sessions=%d note=peak-rss-of-the-writer-process-default-cache-bounds\n",
		float64(wrss)/(1<<20), opt.Sessions)
	return rerr
}

// heartbeat renews the leases of sessions [from, to) every period until
// ctx ends (nil then).
func heartbeat(ctx context.Context, nc *nats.Conn, from, to int, period time.Duration) error {
	for {
		for i := from; i < to; i++ {
			b := fmt.Appendf(nil, `{"sessionId":"scale-%07d","holder":"bench-agent"}`, i)
			m, err := nc.RequestWithContext(ctx, logstore.SubjectHeartbeat, b)
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				return fmt.Errorf("heartbeat: %w", err)
			}
			if code := m.Header.Get("Nats-Service-Error-Code"); code != "" {
				return fmt.Errorf("heartbeat: %s: %s", code, m.Data)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(period):
		}
	}
}

// writeScaleSession writes one session, one event per append, naming a
// holder; with timed it adds each append's latency to lats.
func writeScaleSession(ctx context.Context, nc *nats.Conn, sid string, events int, timed bool, lats *[]time.Duration) error {
	b := make([]byte, 0, 256)
	for seq := 1; seq <= events; seq++ {
		b = append(b[:0], `{"sessionId":"`...)
		b = append(b, sid...)
		b = append(b, `","expectedSeq":`...)
		b = strconv.AppendInt(b, int64(seq-1), 10)
		b = append(b, `,"holder":"bench-agent","events":[{"eventId":"e`...)
		b = strconv.AppendInt(b, int64(seq), 10)
		b = append(b, `",`...)
		b = append(b, scaleEvent(seq, events)...)
		b = append(b, "}]}"...)
		t0 := time.Now()
		m, err := nc.RequestWithContext(ctx, logstore.SubjectAppend, b)
		if err != nil {
			return fmt.Errorf("%s seq %d: %w", sid, seq, err)
		}
		if code := m.Header.Get("Nats-Service-Error-Code"); code != "" {
			return fmt.Errorf("%s seq %d: writer: %s: %s", sid, seq, code, m.Data)
		}
		if timed {
			*lats = append(*lats, time.Since(t0))
		}
	}
	return nil
}

// scaleEvent is the type and fields of event seq of an n-event session:
// created, messages, and (from 5 events) a tool call started last, which
// a lapsed lease leaves for the repairer to close.
func scaleEvent(seq, n int) string {
	switch {
	case seq == 1:
		return `"type":"session/created"`
	case n >= 5 && seq == n-2:
		return `"type":"turn/started","turnId":"t1"`
	case n >= 5 && seq == n-1:
		return `"type":"tool/requested","turnId":"t1","toolCallId":"c1","data":{"name":"sh","input":{"cmd":"make"}}`
	case n >= 5 && seq == n:
		return `"type":"tool/started","turnId":"t1","toolCallId":"c1"`
	}
	return `"type":"message/user","data":{"content":"benchmark message of a typical small size"}`
}

// scaleRepairerRSS runs a repairer process until its first sweep has
// listed the claimed sessions and every session was evaluated (the live
// leases found live; the lapsed ones, past the grace period, repaired),
// then reports its peak RSS and stops it.
func scaleRepairerRSS(ctx context.Context, opt ScaleOptions, url string, args []string, live int) error {
	var listed atomic.Int64 // sessions the first sweep listed, once it has
	listed.Store(-1)
	lines := func(l string) {
		if !strings.Contains(l, "sweep queued") {
			return
		}
		var rec struct {
			Msg      string `json:"msg"`
			Sessions int64  `json:"sessions"`
		}
		if json.Unmarshal([]byte(l), &rec) == nil && rec.Msg == "repairer: sweep queued" {
			listed.CompareAndSwap(-1, rec.Sessions)
		}
	}
	opt.say("flat: a repairer process sweeps the %d claimed sessions (the last %d leases kept live)", opt.Sessions, live)
	start := time.Now()
	r, err := startChild(ctx, opt.Binary, "repairer", url, lines, append(args, "--log-level", "debug")...)
	if err != nil {
		return err
	}
	defer r.kill()
	const checksPrefix = `sessionlog_repairer_checks_total{outcome="`
	var m map[string]float64
	var checks float64
	polls := 0
	for deadline := time.Now().Add(10*time.Minute + time.Duration(opt.Sessions)*time.Millisecond); ; {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.exited:
			return fmt.Errorf("repairer exited: %v: %s", r.err, r.lastLines())
		case <-time.After(500 * time.Millisecond):
		}
		if m, err = r.metrics(); err != nil {
			return err
		}
		// Every evaluation ends in one outcome; "grace" only sets a
		// wake-up for another.
		checks = 0
		for k, v := range m {
			if strings.HasPrefix(k, checksPrefix) && k != checksPrefix+`grace"}` {
				checks += v
			}
		}
		if polls++; polls%10 == 0 {
			opt.say("flat: repairer: %.0f evaluations, queue %.0f, heap in use %.0f MiB, RSS %.0f MiB", checks,
				m["sessionlog_repairer_queue_length"], m["go_memstats_heap_inuse_bytes"]/(1<<20), m["process_resident_memory_bytes"]/(1<<20))
		}
		// Done when the sweep has listed the claims and every session was
		// evaluated: a session whose lease lapses while the sweep runs may
		// be repaired through the lease watch first, and its claim dropped
		// before the listing reaches it.
		if listed.Load() >= 0 && checks >= float64(opt.Sessions) && m["sessionlog_repairer_queue_length"] == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("repairer: sweep listed %d of %d sessions, %v evaluations done", listed.Load(), opt.Sessions, checks)
		}
	}
	took := time.Since(start)
	cpu, err := r.cpu()
	if err != nil {
		return err
	}
	rrss, err := r.stop()
	if err != nil {
		return err
	}
	const repaired = `sessionlog_repairer_sessions_repaired_total{trigger="`
	fmt.Fprintf(opt.Out, "BENCH name=scale-rss-repairer value=%.0f unit=MiB target=256 sessions=%d kept_live=%d swept=%d evaluations=%.0f live=%.0f repaired_by_sweep=%.0f repaired_by_expiry=%.0f errors=%.0f took_s=%.1f cpu_s=%.1f note=peak-rss-of-the-repairer-process-default-cache-bounds\n",
		float64(rrss)/(1<<20), opt.Sessions, live, listed.Load(), checks, m[checksPrefix+`live"}`], m[repaired+`sweep"}`], m[repaired+`lease_expiry"}`],
		m["sessionlog_repairer_errors_total"], took.Seconds(), cpu.Seconds())
	return nil
}

// embeddedServer starts a JetStream server in a temporary directory;
// shutdown stops it and removes the directory.
func embeddedServer(prefix string) (*server.Server, func(), error) {
	return embeddedServerSync(prefix, false)
}

// embeddedServerSync is embeddedServer, fsyncing before every
// acknowledgement if syncAlways (else every 2 minutes, the server's
// default).
func embeddedServerSync(prefix string, syncAlways bool) (*server.Server, func(), error) {
	dir, cleanup, err := natstest.TempDir(prefix)
	if err != nil {
		return nil, nil, err
	}
	o := natstest.Options(dir)
	o.SyncAlways = syncAlways
	srv, err := natstest.Start(o)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	return srv, func() { srv.Shutdown(); srv.WaitForShutdown(); cleanup() }, nil
}

// waitReady polls ready until it returns nil; the service's Run
// returning (a value on done, left there for the caller) or the timeout
// ends the wait with an error.
func waitReady(ctx context.Context, name string, ready func() error, done chan error, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := ready()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s: %w", name, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-done:
			done <- err
			return fmt.Errorf("%s stopped before it was ready: %v", name, err)
		case <-time.After(5 * time.Millisecond):
		}
	}
}
