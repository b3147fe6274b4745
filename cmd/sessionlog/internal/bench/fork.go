// Package bench holds the measurements behind `sessionlog bench <name>`:
// each runs the real services against an embedded JetStream server and
// prints BENCH lines with a floor measured in the same run.
package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/google/pprof/profile"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/procstat"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// ForkSizes are the prefix lengths `sessionlog bench fork` measures.
var ForkSizes = []int{100, 1_000, 10_000, 100_000}

// ForkConfig configures the fork benchmark.
type ForkConfig struct {
	// Sizes of the parents' prefixes (default ForkSizes).
	Sizes []int
	// Dir holds the embedded server's store (default: a temporary
	// directory, removed afterwards).
	Dir    string
	Logger *slog.Logger
	// Progress, if set, gets one line per measurement.
	Progress io.Writer
	// CPUProfile and FloorCPUProfile, if set, get a CPU profile of every
	// fork request (from its call to its reply) and of every floor's
	// publishing, each merged into one.
	CPUProfile, FloorCPUProfile io.Writer
}

// ForkResult is one size's measurement: the best of a few runs each.
type ForkResult struct {
	N int
	// Fork: the fork request on sessions.api.fork until its reply
	// (scanning the parent, copying n events, committing the child).
	Fork time.Duration
	// Raw: publishing the child's same n+1 messages, already encoded, as
	// atomic batches of 1000 with the per-subject check: the floor of any
	// copy on this stream.
	Raw time.Duration
	// ForkCPU and RawCPU are the process's CPU time per copied event (of
	// the run kept: the fastest) of the fork (forker, store and server)
	// and of the floor (client and server).
	ForkCPU, RawCPU time.Duration
}

// Ratio is Fork / Raw.
func (r ForkResult) Ratio() float64 { return float64(r.Fork) / float64(r.Raw) }

// Line is the BENCH line of r.
func (r ForkResult) Line() string {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	return fmt.Sprintf("BENCH name=fork-%d value=%.1f unit=ms baseline=%.1f ratio=%.2f cpu_us_per_event=%.2f baseline_cpu_us_per_event=%.2f",
		r.N, ms(r.Fork), ms(r.Raw), r.Ratio(), us(r.ForkCPU), us(r.RawCPU))
}

func forkReps(n int) int {
	switch {
	case n <= 1_000:
		return 5
	case n <= 10_000:
		return 3
	}
	return 1
}

// RunFork starts an embedded single-node JetStream server (file storage,
// as `sessionlog up` runs it) and a forker, seeds a parent per size, and
// measures each fork against the raw floor in the same run.
func RunFork(ctx context.Context, cfg ForkConfig) ([]ForkResult, error) {
	if len(cfg.Sizes) == 0 {
		cfg.Sizes = ForkSizes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	say := func(format string, args ...any) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, format+"\n", args...)
		}
	}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "sessionlog-bench-fork-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	srv, err := natstest.Start(natstest.Options(dir))
	if err != nil {
		return nil, err
	}
	defer func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	}()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	st, err := logstore.Open(ctx, nc, logstore.Config{Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	fk, err := assemble.NewForker(assemble.DefaultForker(), st, assemble.Deps{Conn: nc, Logger: cfg.Logger, Registerer: prometheus.NewRegistry()})
	if err != nil {
		return nil, err
	}
	runCtx, stop := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	go func() { runDone <- fk.Run(runCtx) }()
	defer func() { stop(); <-runDone }()
	for deadline := time.Now().Add(10 * time.Second); fk.Ready() != nil; {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("forker not ready: %w", fk.Ready())
		}
		time.Sleep(10 * time.Millisecond)
	}
	var forkProf, floorProf phaseProfile
	defer func() {
		forkProf.write(cfg.CPUProfile)
		floorProf.write(cfg.FloorCPUProfile)
	}()
	cl := client.New(nc)
	var out []ForkResult
	for _, n := range cfg.Sizes {
		parent := "bench-parent-" + strconv.Itoa(n)
		say("seeding %s with %d events", parent, n)
		if _, err := gen.Seed(ctx, st, parent, n, schema.MaxBatchEvents); err != nil {
			return out, err
		}
		r := ForkResult{N: n}
		for rep := range forkReps(n) {
			raw, rawCPU, err := rawFloor(ctx, js, fmt.Sprintf("bench-raw-%d-%d", n, rep), n, &floorProf, cfg.FloorCPUProfile)
			if err != nil {
				return out, err
			}
			child := fmt.Sprintf("bench-child-%d-%d", n, rep)
			forkProf.start(cfg.CPUProfile)
			markPhase("fork-start")
			cpu0 := procstat.CPU()
			t0 := time.Now()
			reply, err := cl.Fork(ctx, api.ForkRequest{ParentID: parent, ChildID: child})
			took := time.Since(t0)
			forkCPU := procstat.CPU() - cpu0
			forkProf.stop()
			markPhase(fmt.Sprintf("fork-%d-%d", n, rep))
			if err != nil {
				return out, fmt.Errorf("fork %d: %w", n, err)
			}
			if reply.SeedLength != uint64(n) {
				return out, fmt.Errorf("fork %d: seedLength %d", n, reply.SeedLength)
			}
			if tail, err := st.Tail(ctx, child); err != nil || tail.Seq != uint64(n)+1 {
				return out, fmt.Errorf("fork %d: child tail %+v %v", n, tail, err)
			}
			say("n=%d rep=%d fork=%v raw=%v", n, rep, took, raw)
			if r.Fork == 0 || took < r.Fork {
				r.Fork, r.ForkCPU = took, forkCPU/time.Duration(n+1)
			}
			if r.Raw == 0 || raw < r.Raw {
				r.Raw, r.RawCPU = raw, rawCPU/time.Duration(n+1)
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// rawFloor publishes what a fork of n events writes (session/created, n-1
// copies, fork/committed: the same sizes and headers), encoded beforehand,
// as atomic batches of 1000 chained by the per-subject check, and returns
// the publishing time and the process's CPU time over it (only the
// publishing is profiled into prof, when w is set).
func rawFloor(ctx context.Context, js jetstream.JetStream, sid string, n int, prof *phaseProfile, w io.Writer) (took, cpu time.Duration, err error) {
	loc, err := logstore.Locate(sid)
	if err != nil {
		return 0, 0, err
	}
	msgs := make([]*nats.Msg, 0, n+1)
	err = gen.Exact("bench-parent-"+strconv.Itoa(n), n, func(e schema.Envelope) error {
		e.SessionID, e.EventID, e.Synthetic = sid, fmt.Sprintf("fork:0123456789abcdef:%d", e.Seq), true
		msgs = append(msgs, rawMsg(loc.Subject, &e))
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	commit := schema.Envelope{SchemaVersion: schema.Version, SessionID: sid, Seq: uint64(n) + 1,
		EventID: fmt.Sprintf("fork:0123456789abcdef:%d", n+1), Time: time.Now().UTC(),
		Type: schema.TypeForkCommitted, Synthetic: true, Data: []byte(`{"seedLength":` + strconv.Itoa(n) + `}`)}
	msgs = append(msgs, rawMsg(loc.Subject, &commit))

	prof.start(w)
	markPhase("raw-start")
	cpu0 := procstat.CPU()
	t0 := time.Now()
	defer func() {
		took, cpu = time.Since(t0), procstat.CPU()-cpu0
		markPhase(fmt.Sprintf("raw-%s", sid))
		prof.stop()
	}()
	var expected uint64
	for i := 0; i < len(msgs); i += schema.MaxBatchEvents {
		batch := msgs[i:min(i+schema.MaxBatchEvents, len(msgs))]
		batch[0].Header.Set(logstore.HeaderExpectedSeq, strconv.FormatUint(expected, 10))
		if len(batch) == 1 {
			ack, err := js.PublishMsg(ctx, batch[0])
			if err != nil {
				return 0, 0, err
			}
			expected = ack.Sequence
			continue
		}
		b, err := jetstreamext.NewBatchPublisher(js, jetstreamext.BatchFlowControl{AckFirst: false})
		if err != nil {
			return 0, 0, err
		}
		for _, m := range batch[:len(batch)-1] {
			if err := b.AddMsg(m); err != nil {
				return 0, 0, err
			}
		}
		ack, err := b.CommitMsg(ctx, batch[len(batch)-1])
		if err != nil {
			return 0, 0, err
		}
		expected = ack.Sequence
	}
	return 0, 0, nil
}

func rawMsg(subject string, e *schema.Envelope) *nats.Msg {
	body, _ := schema.Encode(e)
	m := nats.NewMsg(subject)
	m.Data = body
	m.Header.Set(logstore.HeaderMsgID, logstore.MsgID(e.SessionID, e.EventID))
	m.Header.Set(logstore.HeaderType, e.Type)
	m.Header.Set(logstore.HeaderSeq, strconv.FormatUint(e.Seq, 10))
	m.Header.Set(logstore.HeaderSchema, strconv.Itoa(e.SchemaVersion))
	return m
}

// phaseProfile collects CPU profiles of the phases of one kind (started
// only for a non-nil writer) and writes them merged.
type phaseProfile struct {
	on    bool
	buf   bytes.Buffer
	parts []*profile.Profile
}

func (p *phaseProfile) start(w io.Writer) {
	p.buf.Reset()
	p.on = w != nil && pprof.StartCPUProfile(&p.buf) == nil
}

func (p *phaseProfile) stop() {
	if !p.on {
		return
	}
	pprof.StopCPUProfile()
	p.on = false
	if pr, err := profile.Parse(&p.buf); err == nil {
		p.parts = append(p.parts, pr)
	}
}

func (p *phaseProfile) write(w io.Writer) {
	if w == nil || len(p.parts) == 0 {
		return
	}
	if m, err := profile.Merge(p.parts); err == nil {
		_ = m.Write(w)
	}
}
