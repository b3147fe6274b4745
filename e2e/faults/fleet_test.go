package faults

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/oklog/ulid/v2"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

// The fleet: simulated agents that run realistic sessions through
// pkg/client and the writer (DESIGN.md section 4) and write down every
// request, the event ids it carried and what they were told.

// faultOutcome is what the client knows about a request in the end.
type faultOutcome string

const (
	faultCommitted    faultOutcome = "committed"
	faultNotCommitted faultOutcome = "not_committed"
	faultUnknown      faultOutcome = "unknown"
)

// faultAttempt is one call of the client's Append (which itself retries
// unknown outcomes a few times with the same ids), or one fork request.
type faultAttempt struct {
	Start, End time.Time
	// Result is "ok", "duplicate" or the contract code the client
	// returned (outcome_unknown: maybe stored; not_committed: not by this
	// call). Fork requests also record transport failures: "timeout"
	// (unknown), "no_responders" (not sent).
	Result   string
	FirstSeq uint64
	LastSeq  uint64
	// Sends is how many requests the client sent for this call.
	Sends int
}

// faultBatch is one logical append (all its attempts carry the same
// event ids and expectation).
type faultBatch struct {
	Agent    int
	Session  string
	EventIDs []string
	Types    []string
	// Sums are the SHA-256 of each event's data as sent (compacted): the
	// checker finds an acknowledged event stored changed.
	Sums        [][32]byte
	ExpectedSeq uint64
	Attempts    []faultAttempt
	Outcome     faultOutcome
	// Code is the definite refusal that ended the batch, if any.
	Code              string
	FirstSeq, LastSeq uint64
}

// faultFork is one fork request (sessions.api.fork) and its outcome.
type faultFork struct {
	Agent         int
	Parent, Child string
	Attempts      []faultAttempt
	// Result is the last answer: "ok", a contract code or a transport
	// failure.
	Result     string
	SeedLength uint64
}

// faultOK is one committed reply: when it arrived, for how many events.
type faultOK struct {
	T      time.Time
	Events int
	Agent  int
}

// faultSessionRec is what the client knows about one session.
type faultSessionRec struct {
	ID    string
	Agent int
	// Abandoned: the agent "crashed" with work open and never came back;
	// the repairer must close the session exactly once.
	Abandoned bool
	// RepairedLive: the agent found its session repaired under it (its
	// lease expired during a fault) and moved on.
	RepairedLive bool
	Closed       bool
}

// faultFleetConfig tunes the workload.
type faultFleetConfig struct {
	Agents int
	// URLs returns the server list agent i connects with (each agent
	// prefers a different node, as agents on many hosts would).
	URLs func(i int) string
	// Reader reloads a session after a conflict.
	Reader *logstore.Store
	// Think is the mean pause between two requests of one agent.
	Think          time.Duration
	RequestTimeout time.Duration
	// LeaseTTL: an agent that waits on a request longer than a third of
	// it (a fork) heartbeats meanwhile, as a live agent must: one that
	// renews nothing for a TTL is dead by the contract (DESIGN.md 2, 6).
	LeaseTTL time.Duration
	// Abandon: the share of sessions an agent walks away from with a tool
	// call in flight, while AbandonUntil has not passed.
	Abandon      float64
	AbandonUntil time.Time
	Seed         uint64
	// Flagged: an append answered rolled_back or unreadable (the log
	// lost or changed what it had acknowledged, and said so) ends the
	// agent's session, recorded in faultFleet.flagged, instead of being
	// an error. Only faults that damage a single copy of the log expect
	// it.
	Flagged bool
}

// faultFleet runs the agents and holds the history.
type faultFleet struct {
	cfg      faultFleetConfig
	mu       sync.Mutex
	batches  []*faultBatch
	forks    []*faultFork
	sessions map[string]*faultSessionRec
	// oks are the committed replies, fleet wide.
	oks    []faultOK
	errs   []string
	events int // events acknowledged
	// dupFirst: duplicate:true answers to a batch no earlier send of
	// which could have stored it.
	dupFirst []string
	// flagged: the sessions whose agent was answered rolled_back or
	// unreadable, with the answer (faultFleetConfig.Flagged).
	flagged map[string]string
}

func newFaultFleet(cfg faultFleetConfig) *faultFleet {
	if cfg.Think <= 0 {
		cfg.Think = 40 * time.Millisecond
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 4 * time.Second
	}
	return &faultFleet{cfg: cfg, sessions: map[string]*faultSessionRec{}, flagged: map[string]string{}}
}

func (f *faultFleet) errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.errs) < 100 {
		f.errs = append(f.errs, fmt.Sprintf(format, args...))
	}
}

// Run runs every agent until stop is closed, then lets each finish its
// session (close it) until ctx ends.
func (f *faultFleet) Run(ctx context.Context, stop <-chan struct{}) {
	var wg sync.WaitGroup
	for i := 0; i < f.cfg.Agents; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := newFaultAgent(f, i)
			if err != nil {
				f.errorf("agent %d: %v", i, err)
				return
			}
			defer a.nc.Close()
			a.run(ctx, stop)
		}()
	}
	wg.Wait()
}

// faultAgent is one simulated agent.
type faultAgent struct {
	f      *faultFleet
	id     int
	holder string
	nc     *nats.Conn
	cl     *client.Client
	rng    *rand.Rand
	stop   <-chan struct{}
	n      int // sessions started

	// The session in progress.
	rec   *faultSessionRec
	state *session.State
	ids   int
}

func newFaultAgent(f *faultFleet, i int) (*faultAgent, error) {
	nc, err := nats.Connect(f.cfg.URLs(i),
		nats.Name(fmt.Sprintf("fault-agent-%d", i)),
		nats.DontRandomize(), nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true),
		nats.ReconnectWait(100*time.Millisecond), nats.Timeout(2*time.Second),
		nats.PingInterval(time.Second), nats.MaxPingsOutstanding(3))
	if err != nil {
		return nil, err
	}
	// The client retries unknown outcomes itself a few times; what is
	// still unknown after that, the agent keeps retrying (same ids).
	cl := client.New(nc, client.WithTimeout(f.cfg.RequestTimeout), client.WithRetries(3), client.WithBackoff(50*time.Millisecond))
	return &faultAgent{f: f, id: i, holder: fmt.Sprintf("agent-%02d", i), nc: nc, cl: cl,
		rng: rand.New(rand.NewPCG(f.cfg.Seed, uint64(i)))}, nil
}

func (a *faultAgent) stopping() bool {
	select {
	case <-a.stop:
		return true
	default:
		return false
	}
}

var (
	// errFaultLost: the session is gone for this agent (repaired under
	// it, or refused); start another.
	errFaultLost = errors.New("session lost")
	// errFaultAbandon: the agent walks away (simulated crash).
	errFaultAbandon = errors.New("abandoned")
)

func (a *faultAgent) run(ctx context.Context, stop <-chan struct{}) {
	a.stop = stop
	for !a.stopping() && ctx.Err() == nil {
		a.n++
		sid := fmt.Sprintf("f%02d-%03d-%s", a.id, a.n, strings.ToLower(ulid.Make().String()[20:]))
		a.rec = &faultSessionRec{ID: sid, Agent: a.id}
		a.state = session.New(sid)
		a.f.mu.Lock()
		a.f.sessions[sid] = a.rec
		a.f.mu.Unlock()
		err := a.session(ctx)
		switch {
		case errors.Is(err, errFaultAbandon):
			a.rec.Abandoned = true
		case err != nil && ctx.Err() == nil && !errors.Is(err, errFaultLost):
			a.f.errorf("agent %d session %s: %v", a.id, sid, err)
		}
	}
}

// ev builds a request event.
func (a *faultAgent) ev(typ string, set func(e *schema.Envelope), data any) schema.Envelope {
	e := schema.Envelope{EventID: ulid.Make().String(), Type: typ}
	if set != nil {
		set(&e)
	}
	if data != nil {
		b, err := json.Marshal(data)
		if err != nil {
			panic(err)
		}
		e.Data = b
	} else {
		e.Data = json.RawMessage(`{}`)
	}
	return e
}

func (a *faultAgent) next(prefix string) string {
	a.ids++
	return fmt.Sprintf("%s%d", prefix, a.ids)
}

func (a *faultAgent) think() {
	d := time.Duration(a.rng.ExpFloat64() * float64(a.f.cfg.Think))
	if d > 10*a.f.cfg.Think {
		d = 10 * a.f.cfg.Think
	}
	time.Sleep(d)
}

func (a *faultAgent) chance(p float64) bool { return a.rng.Float64() < p }

// mayAbandon decides whether the agent "crashes" here.
func (a *faultAgent) mayAbandon() bool {
	return !a.stopping() && time.Now().Before(a.f.cfg.AbandonUntil) && a.chance(a.f.cfg.Abandon)
}

func (a *faultAgent) blob(n int) string {
	const chars = "abcdefghijklmnopqrstuvwxyz0123456789 \n{}\"\\é中"
	var b strings.Builder
	r := []rune(chars)
	for b.Len() < n {
		b.WriteRune(r[a.rng.IntN(len(r))])
	}
	return b.String()
}

// session runs one session: created, goal, a few turns with attempts,
// tool calls, approvals, steps, jobs and compactions, then closed.
func (a *faultAgent) session(ctx context.Context) error {
	if err := a.append(ctx, a.ev(schema.TypeSessionCreated, nil, schema.SessionCreated{
		Title: "fault fleet", Agent: a.holder, Labels: map[string]string{"suite": "faults"}, Workspace: schema.WorkspaceShared,
	})); err != nil {
		return err
	}
	// The writer renews the lease on appends, at most every third of the
	// TTL; an agent also heartbeats (DESIGN.md section 2), so one call that
	// waits out timeouts against a killed service (two 4 s timeouts with
	// the suite's 8 s TTL) does not cost it its lease. An abandoned
	// session stops both: the heartbeat ends when this function returns.
	defer a.keepAlive(ctx)()
	rev := 1
	if err := a.append(ctx, a.ev(schema.TypeGoalUpdated, nil, schema.GoalUpdated{Revision: rev, Objective: "finish the task", Status: "active"})); err != nil {
		return err
	}
	turns := 2 + a.rng.IntN(4)
	for t := 0; t < turns; t++ {
		if err := a.turn(ctx); err != nil {
			return err
		}
		if a.chance(0.3) {
			rev++
			if err := a.append(ctx, a.ev(schema.TypeGoalUpdated, nil, schema.GoalUpdated{Revision: rev, Objective: "finish the task", Phase: fmt.Sprintf("p%d", rev), Status: "active"})); err != nil {
				return err
			}
		}
		if a.stopping() {
			break
		}
	}
	if a.chance(0.8) || a.stopping() {
		if err := a.append(ctx, a.ev(schema.TypeSessionClosed, nil, schema.Reason{Reason: "done"})); err != nil {
			return err
		}
		a.rec.Closed = true
	}
	return nil
}

func (a *faultAgent) turn(ctx context.Context) error {
	turn := a.next("t")
	inTurn := func(e *schema.Envelope) { e.TurnID = turn }
	if err := a.append(ctx,
		a.ev(schema.TypeTurnStarted, inTurn, schema.TurnStarted{Input: json.RawMessage(`{"text":"go"}`)}),
		a.ev(schema.TypeMessageUser, inTurn, schema.Message{Content: mustJSON(a.blob(40 + a.rng.IntN(400)))}),
	); err != nil {
		return err
	}
	var step string
	if a.chance(0.4) {
		step = a.next("st")
		if err := a.append(ctx, a.ev(schema.TypeStepStarted, func(e *schema.Envelope) { e.TurnID, e.StepID = turn, step }, nil)); err != nil {
			return err
		}
	}
	var job string
	if a.chance(0.15) {
		job = a.next("j")
		if err := a.append(ctx, a.ev(schema.TypeJobStarted, nil, schema.JobStarted{JobID: job, Command: mustJSON("make test")})); err != nil {
			return err
		}
	}
	rounds := 1 + a.rng.IntN(3)
	for r := 0; r < rounds; r++ {
		attempt := a.next("a")
		inAttempt := func(e *schema.Envelope) { e.TurnID, e.AttemptID = turn, attempt }
		if err := a.append(ctx, a.ev(schema.TypeAttemptStarted, inAttempt, schema.AttemptStarted{Model: "m-1"})); err != nil {
			return err
		}
		if a.mayAbandon() {
			return errFaultAbandon
		}
		a.think()
		if a.chance(0.1) {
			if err := a.append(ctx, a.ev(schema.TypeAttemptInterrupt, inAttempt, schema.Reason{Reason: "rate limited"})); err != nil {
				return err
			}
			attempt = a.next("a")
			if err := a.append(ctx, a.ev(schema.TypeAttemptStarted, inAttempt, schema.AttemptStarted{Model: "m-1"})); err != nil {
				return err
			}
		}
		if err := a.append(ctx, a.ev(schema.TypeMessageAssistant, inAttempt, schema.Message{
			Content: mustJSON(a.blob(100 + a.rng.IntN(2000))), Usage: json.RawMessage(`{"in":100,"out":50}`),
		})); err != nil {
			return err
		}
		if a.chance(0.6) {
			if err := a.tool(ctx, turn); err != nil {
				return err
			}
		}
	}
	if step != "" {
		if err := a.append(ctx, a.ev(schema.TypeStepEnded, func(e *schema.Envelope) { e.TurnID, e.StepID = turn, step }, schema.OptReason{Reason: "done"})); err != nil {
			return err
		}
	}
	if job != "" {
		code := 0
		if err := a.append(ctx, a.ev(schema.TypeJobEnded, nil, schema.JobEnded{JobID: job, Status: schema.JobExited, ExitCode: &code})); err != nil {
			return err
		}
	}
	if a.chance(0.2) {
		c := a.next("c")
		through := a.state.LastSeq
		if err := a.append(ctx, a.ev(schema.TypeCompactionStarted, nil, schema.CompactionStarted{CompactionID: c, ThroughSeq: through})); err != nil {
			return err
		}
		if a.mayAbandon() {
			return errFaultAbandon
		}
		if a.chance(0.2) {
			if err := a.append(ctx, a.ev(schema.TypeCompactionAborted, nil, schema.CompactionAborted{CompactionID: c, Reason: "model error"})); err != nil {
				return err
			}
		} else if err := a.append(ctx, a.ev(schema.TypeCompactionEnded, nil, schema.CompactionEnded{CompactionID: c, Summary: a.blob(300), ThroughSeq: through})); err != nil {
			return err
		}
	}
	if err := a.append(ctx, a.ev(schema.TypeTurnEnded, func(e *schema.Envelope) { e.TurnID = turn }, schema.Reason{Reason: schema.TurnCompleted})); err != nil {
		return err
	}
	if a.chance(0.08) && !a.stopping() {
		a.fork(ctx)
	}
	return nil
}

// keepAlive heartbeats the agent's session every third of the lease TTL
// until the returned stop is called: an agent blocked on a request it
// cannot shorten (a fork copies a whole prefix, an append waits out
// timeouts) still holds its lease.
func (a *faultAgent) keepAlive(ctx context.Context) (stop func()) {
	if a.f.cfg.LeaseTTL <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(a.f.cfg.LeaseTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				// A failed heartbeat is what an outage does: nothing to
				// do but try again at the next tick.
				_, _ = a.cl.Heartbeat(ctx, a.rec.ID, a.holder)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// fork asks the forker for a child at the parent's last safe point, with
// a child id of its own so that a retry names the same child.
func (a *faultAgent) fork(ctx context.Context) {
	f := &faultFork{Agent: a.id, Parent: a.rec.ID, Child: a.rec.ID + "-k" + a.next("")}
	a.f.mu.Lock()
	a.f.forks = append(a.f.forks, f)
	a.f.mu.Unlock()
	body, _ := json.Marshal(map[string]string{"parentId": f.Parent, "childId": f.Child, "workspace": schema.WorkspaceIsolated})
	backoff := 100 * time.Millisecond
	for try := 0; try < 20 && ctx.Err() == nil; try++ {
		at := faultAttempt{Start: time.Now()}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		msg, err := a.nc.RequestWithContext(rctx, logstore.SubjectFork, body)
		cancel()
		at.End = time.Now()
		var r struct {
			ChildID    string `json:"childId"`
			SeedLength uint64 `json:"seedLength"`
			Error      *struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		switch {
		case errors.Is(err, nats.ErrNoResponders):
			at.Result = "no_responders"
		case err != nil:
			at.Result = "timeout"
		case json.Unmarshal(msg.Data, &r) != nil:
			at.Result = "bad_reply"
		case r.Error != nil:
			at.Result = r.Error.Code
		default:
			at.Result = "ok"
		}
		a.f.mu.Lock()
		f.Attempts = append(f.Attempts, at)
		f.Result = at.Result
		if at.Result == "ok" {
			f.SeedLength = r.SeedLength
		}
		a.f.mu.Unlock()
		switch at.Result {
		case "ok":
			return
		case "no_responders", "timeout", "bad_reply", string(schema.CodeNotCommitted), string(schema.CodeOutcomeUnknown), string(schema.CodeInternal):
		default:
			// A definite refusal (conflict: the child id is taken, by an
			// earlier send of this request that did land).
			return
		}
		time.Sleep(backoff)
		if backoff < time.Second {
			backoff *= 2
		}
	}
}

func (a *faultAgent) tool(ctx context.Context, turn string) error {
	call := a.next("call")
	inCall := func(e *schema.Envelope) { e.TurnID, e.ToolCallID = turn, call }
	req := a.ev(schema.TypeToolRequested, inCall, schema.ToolRequested{Name: "shell", Input: mustJSON(map[string]string{"cmd": "ls -la"})})
	if a.chance(0.3) {
		ap := a.next("ap")
		if err := a.append(ctx, req, a.ev(schema.TypeApprovalRequested, func(e *schema.Envelope) { e.TurnID = turn }, schema.ApprovalRequested{ApprovalID: ap, ToolCallID: call, Prompt: "run ls?"})); err != nil {
			return err
		}
		a.think()
		if err := a.append(ctx, a.ev(schema.TypeApprovalDecided, func(e *schema.Envelope) { e.TurnID = turn }, schema.ApprovalDecided{ApprovalID: ap, Decision: schema.DecisionApproved, By: "user"})); err != nil {
			return err
		}
	} else if err := a.append(ctx, req); err != nil {
		return err
	}
	// Checkpoint policy: tool/started is durable before the side effect.
	if err := a.append(ctx, a.ev(schema.TypeToolStarted, inCall, nil)); err != nil {
		return err
	}
	if a.mayAbandon() {
		return errFaultAbandon
	}
	a.think()
	size := 50 + a.rng.IntN(4000)
	if a.chance(0.02) {
		size = 64 << 10
	}
	return a.append(ctx, a.ev(schema.TypeToolResult, inCall, schema.ToolResult{Status: schema.ToolOK, Output: mustJSON(a.blob(size))}))
}

// faultDataSum is the SHA-256 of an event's data, compacted.
func faultDataSum(data json.RawMessage) [32]byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		return sha256.Sum256(data)
	}
	return sha256.Sum256(buf.Bytes())
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// append sends events as one request and retries unknown outcomes with
// the same event ids until the writer gives a definite answer. It returns
// nil when committed, errFaultLost when the session was taken from the
// agent, or ctx's error when the run ended first.
func (a *faultAgent) append(ctx context.Context, events ...schema.Envelope) error {
	exp := a.state.LastSeq
	b := &faultBatch{Agent: a.id, Session: a.rec.ID, ExpectedSeq: exp}
	for _, e := range events {
		b.EventIDs = append(b.EventIDs, e.EventID)
		b.Types = append(b.Types, e.Type)
		b.Sums = append(b.Sums, faultDataSum(e.Data))
	}
	a.f.mu.Lock()
	a.f.batches = append(a.f.batches, b)
	a.f.mu.Unlock()
	req := client.AppendRequest{SessionID: a.rec.ID, ExpectedSeq: client.Seq(exp), Holder: a.holder, Events: events}
	sawUnknown := false
	backoff := 50 * time.Millisecond
	defer a.think()
	for {
		if ctx.Err() != nil {
			a.f.mu.Lock()
			b.Outcome = faultNotCommitted
			if sawUnknown {
				b.Outcome = faultUnknown
			}
			a.f.mu.Unlock()
			return ctx.Err()
		}
		at := faultAttempt{Start: time.Now()}
		r, err := a.cl.Append(ctx, req)
		res := "ok"
		switch {
		case err != nil:
			res = string(client.CodeOf(err))
		case r.Duplicate:
			res = "duplicate"
		}
		at.End, at.Result, at.FirstSeq, at.LastSeq, at.Sends = time.Now(), res, r.FirstSeq, r.LastSeq, r.Attempts
		a.f.mu.Lock()
		b.Attempts = append(b.Attempts, at)
		a.f.mu.Unlock()
		switch res {
		case "ok", "duplicate":
			if r.FirstSeq != exp+1 || r.LastSeq != exp+uint64(len(events)) {
				a.f.errorf("%s: %v: reply seqs %d..%d, want %d..%d (attempts %s)", a.rec.ID, b.Types, r.FirstSeq, r.LastSeq, exp+1, exp+uint64(len(events)), faultAttempts(b))
			}
			if res == "duplicate" && !sawUnknown && r.Attempts == 1 {
				// Only an earlier send of the same ids can have stored them,
				// and every earlier answer said it did not: the flag is
				// wrong, though the event is committed (the checker holds
				// it to its seq). Counted and reported, not a loss.
				a.f.mu.Lock()
				a.f.dupFirst = append(a.f.dupFirst, fmt.Sprintf("%s %v (attempts %s)", a.rec.ID, b.Types, faultAttempts(b)))
				a.f.mu.Unlock()
			}
			for i := range events {
				e := events[i]
				e.Seq = exp + 1 + uint64(i)
				e.SessionID = a.rec.ID
				if err := a.state.Apply(&e); err != nil {
					a.f.errorf("%s: local fold of a committed %s: %v", a.rec.ID, e.Type, err)
				}
			}
			a.f.mu.Lock()
			b.Outcome, b.FirstSeq, b.LastSeq = faultCommitted, r.FirstSeq, r.LastSeq
			a.f.oks = append(a.f.oks, faultOK{T: at.End, Events: len(events), Agent: a.id})
			a.f.events += len(events)
			a.f.mu.Unlock()
			return nil
		case string(schema.CodeOutcomeUnknown):
			sawUnknown = true
		case string(schema.CodeNotCommitted), string(schema.CodeInternal):
			// Nothing stored by this send; an earlier one may still land,
			// and the retry (same ids) settles it.
		case string(schema.CodeConflict), string(schema.CodePaused), string(schema.CodeClosed):
			var ce *client.Error
			if res == string(schema.CodeConflict) && errors.As(err, &ce) && ce.CurrentSeq < exp {
				// The writer read fewer events than this agent has had
				// acknowledged: acknowledged events are never lost, so the
				// read was stale (a former leader cut off by a partition
				// answers from what it has). Nothing was stored: retry.
				break
			}
			// Someone else wrote the session: only the repairer does, when
			// this agent's lease expired during a fault.
			a.f.mu.Lock()
			b.Outcome, b.Code = faultNotCommitted, res
			a.f.mu.Unlock()
			return a.lost(ctx, res)
		case string(schema.CodeRolledBack), string(schema.CodeUnreadable):
			a.f.mu.Lock()
			b.Outcome, b.Code = faultNotCommitted, res
			if a.f.cfg.Flagged {
				a.f.flagged[a.rec.ID] = fmt.Sprintf("%s: %v", res, err)
			}
			a.f.mu.Unlock()
			if !a.f.cfg.Flagged {
				a.f.errorf("%s: %v refused with %s: %v", a.rec.ID, b.Types, res, err)
			}
			return errFaultLost
		default:
			a.f.mu.Lock()
			b.Outcome, b.Code = faultNotCommitted, res
			a.f.mu.Unlock()
			a.f.errorf("%s: %v refused with %s", a.rec.ID, b.Types, res)
			return errFaultLost
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		if backoff < time.Second {
			backoff *= 2
		}
	}
}

// lost reloads the session after a refusal that says someone else wrote
// it, and records a repair. During a fault a read can be stale (a
// partitioned node that still takes itself for the stream's leader answers
// from what it has) and a repair can still be in flight, so the session is
// read again until it shows the repair, for as long as a fault and the
// cluster's healing take; only a session that never shows one is an error.
func (a *faultAgent) lost(ctx context.Context, code string) error {
	deadline := time.Now().Add(lostCheckFor)
	for {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		evs, _, err := a.f.cfg.Reader.ReadEvents(rctx, a.rec.ID, 0)
		cancel()
		if err == nil {
			st := session.New(a.rec.ID)
			for i := range evs {
				if err := st.Apply(&evs[i].Envelope); err != nil {
					a.f.errorf("%s: fold after %s: %v", a.rec.ID, code, err)
					return errFaultLost
				}
			}
			if st.Repairs > 0 {
				a.rec.RepairedLive = true
				return errFaultLost
			}
			if time.Now().After(deadline) {
				a.f.errorf("%s: refused with %s but the session holds no repair (last seq %d, local %d)", a.rec.ID, code, st.LastSeq, a.state.LastSeq)
				return errFaultLost
			}
		} else if time.Now().After(deadline) {
			a.f.errorf("%s: refused with %s; the session cannot be read: %v", a.rec.ID, code, err)
			return errFaultLost
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// lostCheckFor is how long lost waits for the repair behind a refusal to
// show: longer than the longest fault and the cluster's catching up after.
const lostCheckFor = 90 * time.Second
