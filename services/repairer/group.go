package repairer

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
)

// Grouped commits.
//
// On a file stream each atomic batch is staged on disk before it commits,
// and the stream stages one batch at a time: a repair per batch caps the
// repairer at a few hundred sessions a second, whatever its concurrency.
// Repairs that are ready at the same time are therefore committed as one
// atomic batch of several sessions. Every session's first message carries
// its own per-subject expected sequence (the tail its plan was made from)
// and every message its own Nats-Msg-Id, exactly as a single-session
// append sends them, so a grouped batch stores what the single appends
// would have stored, all or nothing.
//
// A grouped batch that fails one session's check (its holder appended) or
// finds one session's plan stored already (another replica) fails whole;
// its sessions are then appended one by one through the store, which sorts
// out each: the conflicting one is evaluated again, a duplicate resolves
// by its ids, the rest commit. A grouped batch that went unanswered is
// handled the same way: the single appends re-send the same ids and
// expectations, so at most one of the two is stored.

const groupRetries = 3

// pendingAppend is one session's repair waiting for a grouped batch.
type pendingAppend struct {
	req    logstore.AppendRequest
	stream string // an atomic batch stays in one stream
	msgs   []*nats.Msg
	done   chan appendOutcome
}

type appendOutcome struct {
	res logstore.AppendResult
	err error
	// unsure: a grouped batch with these events went unanswered before
	// they were appended alone, so a Duplicate may be that batch: ours.
	unsure bool
}

// grouper collects ready repairs and commits them in grouped batches.
type grouper struct {
	s           *Service
	ctx         context.Context
	maxEvents   int
	maxInflight int
	// yield: an evaluation gives its slot up while its repair waits for
	// its group (pipeline.go).
	yield bool

	mu      sync.Mutex
	pending []*pendingAppend
	running int
}

func newGrouper(s *Service, ctx context.Context) *grouper {
	return &grouper{s: s, ctx: ctx, maxEvents: s.cfg.GroupEvents, maxInflight: s.cfg.GroupInflight,
		yield: s.st.Config().Replicas <= 1}
}

// appendPlan appends req: through a grouped batch while the service runs
// with grouping, else alone. unsure is set when a Duplicate result may be
// this process's own earlier grouped batch.
func (s *Service) appendPlan(ctx context.Context, req logstore.AppendRequest) (res logstore.AppendResult, unsure bool, err error) {
	g := s.grouper.Load()
	if g == nil || len(req.Events) > g.maxEvents/2 {
		s.stage(req.SessionID, StageSent)
		res, err = s.st.Append(ctx, req)
		return res, false, err
	}
	loc, err := s.st.Locate(req.SessionID)
	var msgs []*nats.Msg
	if err == nil {
		msgs, err = s.st.Messages(&req)
	}
	if err == nil {
		// A single append of the same request sends these very bodies.
		req.Bodies = make([][]byte, len(msgs))
		for i, m := range msgs {
			req.Bodies[i] = m.Data
		}
	}
	if err != nil {
		// The store reports the error with its contract code.
		res, err = s.st.Append(ctx, req)
		return res, false, err
	}
	p := &pendingAppend{req: req, stream: loc.Stream, msgs: msgs, done: make(chan appendOutcome, 1)}
	if !g.submit(p) {
		res, err = s.st.Append(ctx, req)
		return res, false, err
	}
	// The group's batch runs on the service's context with the store's
	// timeout: it always answers. On R1 the slot goes to the next
	// session due meanwhile (pipeline.go).
	if g.yield {
		waiting(ctx)
	}
	o := <-p.done
	return o.res, o.unsure, o.err
}

// submit queues p and starts a committer if fewer than maxInflight run.
// It returns false once the service stops.
func (g *grouper) submit(p *pendingAppend) bool {
	if g.ctx.Err() != nil {
		return false
	}
	g.mu.Lock()
	g.pending = append(g.pending, p)
	start := g.running < g.maxInflight
	if start {
		g.running++
	}
	g.mu.Unlock()
	if start {
		g.s.wg.Add(1)
		go g.loop()
	}
	return true
}

// loop commits what is pending, group after group, until nothing is.
func (g *grouper) loop() {
	defer g.s.wg.Done()
	for {
		group := g.take()
		if group == nil {
			return
		}
		g.commit(group)
	}
}

// take removes the next group from the queue: requests in arrival order
// up to maxEvents events, one per session, all in the first one's stream.
func (g *grouper) take() []*pendingAppend {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.pending) == 0 {
		g.running--
		return nil
	}
	var (
		group []*pendingAppend
		rest  []*pendingAppend
		n     int
		seen  = map[string]struct{}{}
	)
	for _, p := range g.pending {
		_, dup := seen[p.req.SessionID]
		if dup || (len(group) > 0 && (n+len(p.msgs) > g.maxEvents || p.stream != group[0].stream)) {
			rest = append(rest, p)
			continue
		}
		seen[p.req.SessionID] = struct{}{}
		group = append(group, p)
		n += len(p.msgs)
	}
	g.pending = rest
	return group
}

// commit stores one group and answers each of its requests.
func (g *grouper) commit(group []*pendingAppend) {
	for _, p := range group {
		g.s.stage(p.req.SessionID, StageSent)
	}
	if len(group) == 1 {
		p := group[0]
		res, err := g.s.st.Append(g.ctx, p.req)
		p.done <- appendOutcome{res: res, err: err}
		return
	}
	parts := make([]logstore.GroupPart, len(group))
	for i, p := range group {
		parts[i] = logstore.GroupPart{Req: &p.req, Msgs: p.msgs}
	}
	for attempt := 0; ; attempt++ {
		res, err := g.s.st.AppendGroup(g.ctx, parts)
		if hook := g.s.groupFault.Load(); hook != nil && err == nil {
			err = (*hook)()
		}
		if err == nil {
			g.s.m.groups.Observe(float64(len(group)))
			for i, p := range group {
				p.done <- appendOutcome{res: res[i]}
			}
			return
		}
		switch logstore.ClassifySend(err) {
		case logstore.SendRetry:
			if attempt+1 < groupRetries && g.ctx.Err() == nil {
				select {
				case <-g.ctx.Done():
				case <-time.After(time.Duration(10<<attempt) * time.Millisecond):
				}
				continue
			}
			g.alone(group, false)
		case logstore.SendRefused:
			// A session's check or a duplicate id failed the batch:
			// nothing is stored.
			g.s.m.groupFallbacks.WithLabelValues("refused").Inc()
			g.s.log.Debug("repairer: grouped batch refused; appending its sessions alone", "sessions", len(group), "err", err)
			g.alone(group, false)
		default:
			g.s.m.groupFallbacks.WithLabelValues("unknown").Inc()
			g.s.log.Info("repairer: grouped batch unanswered; appending its sessions alone", "sessions", len(group), "err", err)
			g.alone(group, true)
		}
		return
	}
}

// alone appends every request of a failed group through the store, at
// once (the store bounds its batches in flight).
func (g *grouper) alone(group []*pendingAppend, unsure bool) {
	var wg sync.WaitGroup
	for _, p := range group {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := g.s.st.Append(g.ctx, p.req)
			p.done <- appendOutcome{res: res, err: err, unsure: unsure}
		}()
	}
	wg.Wait()
}
