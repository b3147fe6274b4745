package faults

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

// faultStored is one message of the final stream.
type faultStored struct {
	StreamSeq uint64
	Env       schema.Envelope
}

// faultDumpAll is faultDump of every session stream (a session lives in
// one), merged.
func faultDumpAll(ctx context.Context, js jetstream.JetStream, streams []string) (map[string][]faultStored, int, []string, error) {
	out := map[string][]faultStored{}
	var (
		total    int
		problems []string
	)
	for _, stream := range streams {
		stored, n, probs, err := faultDump(ctx, js, stream)
		if err != nil {
			return nil, total, problems, fmt.Errorf("%s: %w", stream, err)
		}
		maps.Copy(out, stored)
		total += n
		problems = append(problems, probs...)
	}
	return out, total, problems, nil
}

// faultDump reads every message of the stream, in stream order, checking
// that each is one well-formed event on the subject of its session with
// headers that agree with its body.
func faultDump(ctx context.Context, js jetstream.JetStream, stream string) (map[string][]faultStored, int, []string, error) {
	var problems []string
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, 0, nil, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, 0, nil, err
	}
	out := map[string][]faultStored{}
	last := info.State.LastSeq
	if last == 0 {
		return out, 0, nil, nil
	}
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return nil, 0, nil, err
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(2000))
	if err != nil {
		return nil, 0, nil, err
	}
	defer it.Stop()
	n := 0
	for {
		m, err := it.Next()
		if err != nil {
			return nil, n, problems, fmt.Errorf("dump at %d of %d: %w", n, last, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return nil, n, problems, err
		}
		n++
		sid, ok := logstore.SessionFromSubject(m.Subject())
		e, derr := schema.Decode(m.Data())
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("stream seq %d: subject %q names no session", md.Sequence.Stream, m.Subject()))
		case derr != nil:
			problems = append(problems, fmt.Sprintf("stream seq %d: %v", md.Sequence.Stream, derr))
		case e.SessionID != sid:
			problems = append(problems, fmt.Sprintf("stream seq %d: event of %s on the subject of %s", md.Sequence.Stream, e.SessionID, sid))
		case m.Headers().Get(logstore.HeaderMsgID) != logstore.MsgID(sid, e.EventID):
			problems = append(problems, fmt.Sprintf("stream seq %d: Nats-Msg-Id %q for event %s", md.Sequence.Stream, m.Headers().Get(logstore.HeaderMsgID), e.EventID))
		case m.Headers().Get(logstore.HeaderSeq) != strconv.FormatUint(e.Seq, 10) || m.Headers().Get(logstore.HeaderType) != e.Type:
			problems = append(problems, fmt.Sprintf("stream seq %d: SL headers %q/%q disagree with seq %d type %s", md.Sequence.Stream, m.Headers().Get(logstore.HeaderSeq), m.Headers().Get(logstore.HeaderType), e.Seq, e.Type))
		default:
			if err := schema.Validate(&e, schema.ValidateOptions{Origin: schema.OriginService, Stored: true}); err != nil {
				problems = append(problems, fmt.Sprintf("stream seq %d: stored event invalid: %v", md.Sequence.Stream, err))
			}
			out[sid] = append(out[sid], faultStored{StreamSeq: md.Sequence.Stream, Env: e})
		}
		if md.Sequence.Stream >= last {
			return out, n, problems, nil
		}
	}
}

// faultReport is the checker's verdict.
type faultReport struct {
	Events, Sessions int
	// Acked: events the fleet was told are committed.
	Acked int
	// Lost: acknowledged events missing from the stream (or not where
	// the reply said). Dups: an event id stored twice, or a seq twice.
	// Gaps: a session whose seqs are not 1..n. Changed: acknowledged
	// events stored where the reply said, with other data than was sent.
	Lost, Dups, Gaps, Changed int
	// Batches still unknown at the end, found committed / not committed
	// in the stream; Partial ones are a broken atomic batch.
	UnknownCommitted, UnknownNot, Partial int
	// Batches with an unknown outcome on the way that a retry resolved:
	// to committed (ok or duplicate) or not committed (a definite refusal,
	// checked absent from the stream).
	ResolvedCommitted, ResolvedNot int
	// Phantom: stored events of a request the fleet was definitely told
	// was not committed.
	Phantom int
	// Foreign: stored non-synthetic events no agent sent.
	Foreign int
	// Repairs.
	Abandoned, AbandonedRepaired, RepairedLive, RepairedTwice int
	Unfoldable                                                int
	// Forks answered ok, and those whose child is not the copy promised.
	Forks, BadForks int
	// Linearizable: fleet sessions whose history of appends porcupine
	// linearized; NotLinearizable: those it proved cannot be; LinUnknown:
	// those it gave up on (time out).
	Linearizable, NotLinearizable, LinUnknown int
	Problems                                  []string
}

func (r *faultReport) problem(format string, args ...any) {
	if len(r.Problems) < 50 {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	}
}

// OK reports whether every guarantee held.
func (r *faultReport) OK() bool {
	return r.Lost == 0 && r.Dups == 0 && r.Gaps == 0 && r.Changed == 0 && r.NotLinearizable == 0 && r.Partial == 0 && r.Phantom == 0 &&
		r.Foreign == 0 && r.BadForks == 0 && r.RepairedTwice == 0 && r.RepairedLive == 0 && r.Unfoldable == 0 && r.AbandonedRepaired == r.Abandoned && len(r.Problems) == 0
}

func (r *faultReport) String() string {
	return fmt.Sprintf("events=%d sessions=%d acked=%d lost=%d dups=%d gaps=%d resolved_committed=%d resolved_not=%d unknown_committed=%d unknown_not=%d partial=%d phantom=%d foreign=%d abandoned=%d repaired=%d repaired_live=%d repaired_twice=%d unfoldable=%d forks=%d bad_forks=%d changed=%d linearizable=%d not_linearizable=%d lin_unknown=%d",
		r.Events, r.Sessions, r.Acked, r.Lost, r.Dups, r.Gaps, r.ResolvedCommitted, r.ResolvedNot, r.UnknownCommitted, r.UnknownNot, r.Partial, r.Phantom,
		r.Foreign, r.Abandoned, r.AbandonedRepaired, r.RepairedLive, r.RepairedTwice, r.Unfoldable, r.Forks, r.BadForks, r.Changed, r.Linearizable, r.NotLinearizable, r.LinUnknown)
}

// faultCheck holds the fleet's history against the stored sessions.
func faultCheck(stored map[string][]faultStored, batches []*faultBatch, forks []*faultFork, sessions map[string]*faultSessionRec, dumpProblems []string) *faultReport {
	r := &faultReport{Sessions: len(stored)}
	for _, p := range dumpProblems {
		r.problem("%s", p)
	}
	type pos struct {
		sid string
		seq uint64
		typ string
		sum [32]byte
	}
	where := map[string]pos{} // sid:eventId -> position
	for sid, evs := range stored {
		r.Events += len(evs)
		seen := map[string]bool{}
		for i, s := range evs {
			if want := uint64(i + 1); s.Env.Seq != want {
				r.Gaps++
				r.problem("%s: event %d of the stream order has seq %d (want %d)", sid, i, s.Env.Seq, want)
				break
			}
		}
		for _, s := range evs {
			k := logstore.MsgID(sid, s.Env.EventID)
			if seen[k] {
				r.Dups++
				r.problem("%s: event id %s stored twice", sid, s.Env.EventID)
			}
			seen[k] = true
			where[k] = pos{sid, s.Env.Seq, s.Env.Type, faultDataSum(s.Env.Data)}
		}
		// Every stored session folds under the rules of pkg/session.
		st := session.New(sid)
		for i := range evs {
			if err := st.Apply(&evs[i].Env); err != nil {
				r.Unfoldable++
				r.problem("%s: seq %d %s does not fold: %v", sid, evs[i].Env.Seq, evs[i].Env.Type, err)
				break
			}
		}
		repairs := 0
		for _, s := range evs {
			if s.Env.Type == schema.TypeRepairApplied {
				repairs++
			}
		}
		rec := sessions[sid]
		switch {
		case repairs > 1:
			r.RepairedTwice++
			r.problem("%s: %d repair/applied", sid, repairs)
		case rec != nil && rec.Abandoned:
			// counted below
		case repairs == 1:
			// The repairer closed a session whose agent was alive: its
			// lease ran out while the cluster could not take the renewal
			// (DESIGN.md section 6, docs/adr/006): an outage must not
			// pause a live fleet.
			r.RepairedLive++
			r.problem("%s: repaired though its agent was alive (%s)", sid, faultRepairOf(evs))
		}
		if rec != nil && rec.Abandoned && repairs == 1 && st.HasOpenWork() {
			r.problem("%s: repaired but work is still open", sid)
		}
	}
	for _, rec := range sessions {
		if !rec.Abandoned {
			continue
		}
		r.Abandoned++
		n := 0
		for _, s := range stored[rec.ID] {
			if s.Env.Type == schema.TypeRepairApplied {
				n++
			}
		}
		if n == 1 {
			r.AbandonedRepaired++
		} else if n == 0 {
			r.problem("%s: abandoned with open work and never repaired", rec.ID)
		}
	}
	sent := map[string]bool{}
	for _, b := range batches {
		present := 0
		for i, id := range b.EventIDs {
			k := logstore.MsgID(b.Session, id)
			sent[k] = true
			p, ok := where[k]
			if !ok {
				continue
			}
			present++
			if b.Outcome == faultCommitted {
				if want := b.FirstSeq + uint64(i); p.seq != want || p.typ != b.Types[i] {
					r.Lost++
					r.problem("%s: %s %s acknowledged at seq %d, stored at seq %d as %s", b.Session, b.Types[i], id, want, p.seq, p.typ)
				} else if i < len(b.Sums) && p.sum != b.Sums[i] {
					r.Changed++
					r.problem("%s: %s %s acknowledged at seq %d is stored there with other data than was sent", b.Session, b.Types[i], id, want)
				}
			}
		}
		hadUnknown := false
		for _, a := range b.Attempts {
			// The client re-sends only after an unknown outcome.
			hadUnknown = hadUnknown || a.Result == string(schema.CodeOutcomeUnknown) || a.Sends > 1
		}
		switch {
		case hadUnknown && b.Outcome == faultCommitted:
			r.ResolvedCommitted++
		case hadUnknown && b.Outcome == faultNotCommitted && b.Code != "" && present == 0:
			r.ResolvedNot++
		}
		switch b.Outcome {
		case faultCommitted:
			r.Acked += len(b.EventIDs)
			if present < len(b.EventIDs) {
				r.Lost += len(b.EventIDs) - present
				r.problem("%s: %d of %d acknowledged events %v missing (attempts %s)", b.Session, len(b.EventIDs)-present, len(b.EventIDs), b.Types, faultAttempts(b))
			}
		case faultUnknown:
			switch present {
			case 0:
				r.UnknownNot++
			case len(b.EventIDs):
				r.UnknownCommitted++
			default:
				r.Partial++
				r.problem("%s: batch %v stored %d of %d events", b.Session, b.Types, present, len(b.EventIDs))
			}
		case faultNotCommitted, "":
			if present > 0 {
				sawUnknown := false
				for _, a := range b.Attempts {
					switch a.Result {
					case string(schema.CodeOutcomeUnknown):
						sawUnknown = true
					}
				}
				// Definite refusals after an unknown send are about that
				// send only; a conflict is about the batch.
				if !sawUnknown || b.Code != "" {
					r.Phantom++
					r.problem("%s: %v stored %d events though the batch ended %q (attempts %s)", b.Session, b.Types, present, b.Code, faultAttempts(b))
				} else if present == len(b.EventIDs) {
					r.UnknownCommitted++
				} else {
					r.Partial++
				}
			}
		}
	}
	for sid, evs := range stored {
		if sessions[sid] == nil {
			continue // not the fleet's (a fork child, a hostile probe)
		}
		for _, s := range evs {
			if !s.Env.Synthetic && !sent[logstore.MsgID(sid, s.Env.EventID)] {
				r.Foreign++
				r.problem("%s: seq %d %s %s was never sent by the fleet", sid, s.Env.Seq, s.Env.Type, s.Env.EventID)
			}
		}
	}
	for _, f := range forks {
		if f.Result != "ok" {
			continue
		}
		r.Forks++
		if err := faultCheckFork(stored[f.Parent], stored[f.Child], f); err != nil {
			r.BadForks++
			r.problem("fork %s of %s: %v (attempts %s)", f.Child, f.Parent, err, faultForkAttempts(f))
		}
	}
	faultLinearize(r, stored, batches, sessions)
	sort.Strings(r.Problems)
	return r
}

// faultRepairOf describes a session's repair: when its marker was
// written and when it says the lease expired.
func faultRepairOf(evs []faultStored) string {
	for _, s := range evs {
		if s.Env.Type != schema.TypeRepairApplied {
			continue
		}
		var d schema.RepairApplied
		_ = s.Env.DecodeData(&d)
		exp := "unknown"
		if d.LeaseExpiredAt != nil {
			exp = d.LeaseExpiredAt.Local().Format("15:04:05.000")
		}
		return fmt.Sprintf("seq %d at %s, lease expired %s", s.Env.Seq, s.Env.Time.Local().Format("15:04:05.000"), exp)
	}
	return "no repair"
}

// faultCheckFork: the child of a fork answered ok is session/created with
// its parent, copies of the parent's events 2..k at the same seqs, then
// fork/committed with seedLength k (DESIGN.md section 8).
func faultCheckFork(parent, child []faultStored, f *faultFork) error {
	k := f.SeedLength
	if k == 0 || uint64(len(child)) < k+1 {
		return fmt.Errorf("child has %d events, seedLength %d", len(child), k)
	}
	var c schema.SessionCreated
	if err := child[0].Env.DecodeData(&c); err != nil || c.Parent == nil || c.Parent.SessionID != f.Parent || c.Parent.SeedLength != k {
		return fmt.Errorf("child's session/created names parent %+v (%v)", c.Parent, err)
	}
	if uint64(len(parent)) < k {
		return fmt.Errorf("parent has %d events, seedLength %d", len(parent), k)
	}
	for i := uint64(1); i < k; i++ {
		p, ch := parent[i].Env, child[i].Env
		if p.Seq != ch.Seq || p.Type != ch.Type || !ch.Synthetic || string(p.Data) != string(ch.Data) {
			return fmt.Errorf("seq %d: child has %s (synthetic %v), parent %s", ch.Seq, ch.Type, ch.Synthetic, p.Type)
		}
	}
	fc := child[k].Env
	var d schema.ForkCommitted
	if fc.Type != schema.TypeForkCommitted || fc.DecodeData(&d) != nil || d.SeedLength != k {
		return fmt.Errorf("seq %d is %s, want fork/committed seedLength %d", fc.Seq, fc.Type, k)
	}
	return nil
}

func faultForkAttempts(f *faultFork) string {
	var parts []string
	for _, a := range f.Attempts {
		parts = append(parts, fmt.Sprintf("%s@%s+%dms", a.Result, a.Start.Format("15:04:05.000"), a.End.Sub(a.Start).Milliseconds()))
	}
	return strings.Join(parts, ",")
}

func faultAttempts(b *faultBatch) string {
	var parts []string
	for _, a := range b.Attempts {
		parts = append(parts, fmt.Sprintf("%s@%s+%dms/%d", a.Result, a.Start.Format("15:04:05.000"), a.End.Sub(a.Start).Milliseconds(), a.Sends))
	}
	return strings.Join(parts, ",")
}

// faultWindow is one fault, from injection until the cluster is whole.
type faultWindow struct {
	Name       string
	Start, End time.Time
	// Detail is what the fault did, printed at the end of its FAULT line
	// (key=value pairs).
	Detail string
}

// faultUnavailable is the longest time within w during which no agent got
// a committed reply: the gaps between consecutive acknowledgements that
// overlap the window, clipped to it. It also counts the events
// acknowledged within w. oks are in time order.
func faultUnavailable(oks []faultOK, w faultWindow) (time.Duration, int) {
	var longest time.Duration
	acked := 0
	prev := time.Time{}
	for _, ok := range oks {
		t := ok.T
		if !t.Before(w.Start) && !t.After(w.End) {
			acked += ok.Events
		}
		if !prev.IsZero() && t.After(w.Start) && prev.Before(w.End) {
			a, b := prev, t
			if a.Before(w.Start) {
				a = w.Start
			}
			if b.After(w.End) {
				b = w.End
			}
			if d := b.Sub(a); d > longest {
				longest = d
			}
		}
		prev = t
	}
	// No acknowledgement after the last one inside the window.
	if !prev.IsZero() && prev.Before(w.End) {
		a := prev
		if a.Before(w.Start) {
			a = w.Start
		}
		if d := w.End.Sub(a); d > longest {
			longest = d
		}
	}
	return longest, acked
}

// faultAttemptStats summarizes what the sends were answered and how long
// committed ones took.
func faultAttemptStats(batches []*faultBatch) string {
	results := map[string]int{}
	var lat []time.Duration
	for _, b := range batches {
		for _, a := range b.Attempts {
			results[a.Result]++
			if a.Result == "ok" || a.Result == "duplicate" {
				lat = append(lat, a.End.Sub(a.Start))
			}
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(f float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[int(f*float64(len(lat)-1))].Round(100 * time.Microsecond)
	}
	keys := make([]string, 0, len(results))
	for k := range results {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, results[k]))
	}
	return fmt.Sprintf("%s latency_p50=%v p90=%v p99=%v max=%v", strings.Join(parts, " "), q(0.5), q(0.9), q(0.99), q(1))
}

// faultEnv builds a stored event for the checker's own tests.
func faultEnv(sid string, seq uint64, id, typ string) faultStored {
	data := `{}`
	switch typ {
	case schema.TypeSessionCreated:
	case schema.TypeMessageUser:
		data = `{"content":"x"}`
	case schema.TypeRepairApplied:
		data = `{"reason":"lease expired","closed":[]}`
	}
	return faultStored{StreamSeq: seq, Env: schema.Envelope{SchemaVersion: 1, SessionID: sid, Seq: seq, EventID: id,
		Time: time.Now().UTC(), Type: typ, Data: []byte(data)}}
}

// The checker must be able to fail: each broken guarantee, planted in an
// otherwise clean history, is counted.
func TestFaultChecker(t *testing.T) {
	clean := func() (map[string][]faultStored, []*faultBatch, map[string]*faultSessionRec) {
		stored := map[string][]faultStored{"s": {
			faultEnv("s", 1, "e1", schema.TypeSessionCreated),
			faultEnv("s", 2, "e2", schema.TypeMessageUser),
			faultEnv("s", 3, "e3", schema.TypeMessageUser),
		}}
		t0 := time.Now()
		at := func(ms int) []faultAttempt {
			return []faultAttempt{{Start: t0.Add(time.Duration(ms) * time.Millisecond), End: t0.Add(time.Duration(ms+1) * time.Millisecond), Result: "ok", Sends: 1}}
		}
		batches := []*faultBatch{
			{Session: "s", EventIDs: []string{"e1"}, Types: []string{schema.TypeSessionCreated}, Outcome: faultCommitted, FirstSeq: 1, LastSeq: 1, Attempts: at(0)},
			{Session: "s", EventIDs: []string{"e2", "e3"}, Types: []string{schema.TypeMessageUser, schema.TypeMessageUser}, Outcome: faultCommitted, FirstSeq: 2, LastSeq: 3, ExpectedSeq: 1, Attempts: at(2)},
		}
		for _, b := range batches {
			for _, id := range b.EventIDs {
				b.Sums = append(b.Sums, faultDataSum(stored["s"][id[1]-'1'].Env.Data))
			}
		}
		return stored, batches, map[string]*faultSessionRec{"s": {ID: "s"}}
	}
	stored, batches, sessions := clean()
	if r := faultCheck(stored, batches, nil, sessions, nil); !r.OK() {
		t.Fatalf("clean history refused: %s %v", r, r.Problems)
	}
	for _, tc := range []struct {
		name  string
		plant func(map[string][]faultStored, *[]*faultBatch, map[string]*faultSessionRec)
		bad   func(*faultReport) int
	}{
		{"Lost", func(st map[string][]faultStored, _ *[]*faultBatch, _ map[string]*faultSessionRec) {
			st["s"] = st["s"][:2]
		}, func(r *faultReport) int { return r.Lost }},
		{"Dup", func(st map[string][]faultStored, _ *[]*faultBatch, _ map[string]*faultSessionRec) {
			e := faultEnv("s", 4, "e3", schema.TypeMessageUser)
			st["s"] = append(st["s"], e)
		}, func(r *faultReport) int { return r.Dups }},
		{"Gap", func(st map[string][]faultStored, _ *[]*faultBatch, _ map[string]*faultSessionRec) {
			st["s"][2].Env.Seq = 4
		}, func(r *faultReport) int { return r.Gaps }},
		{"Partial", func(_ map[string][]faultStored, b *[]*faultBatch, _ map[string]*faultSessionRec) {
			(*b)[1].Outcome = faultUnknown
			(*b)[1].EventIDs = append((*b)[1].EventIDs, "e4")
			(*b)[1].Types = append((*b)[1].Types, schema.TypeMessageUser)
		}, func(r *faultReport) int { return r.Partial }},
		{"Phantom", func(st map[string][]faultStored, b *[]*faultBatch, _ map[string]*faultSessionRec) {
			*b = append(*b, &faultBatch{Session: "s", EventIDs: []string{"e9"}, Types: []string{schema.TypeMessageUser}, Outcome: faultNotCommitted, Code: "structure"})
			st["s"] = append(st["s"], faultEnv("s", 4, "e9", schema.TypeMessageUser))
		}, func(r *faultReport) int { return r.Phantom }},
		{"Foreign", func(st map[string][]faultStored, _ *[]*faultBatch, _ map[string]*faultSessionRec) {
			st["s"] = append(st["s"], faultEnv("s", 4, "zz", schema.TypeMessageUser))
		}, func(r *faultReport) int { return r.Foreign }},
		{"WrongSeq", func(_ map[string][]faultStored, b *[]*faultBatch, _ map[string]*faultSessionRec) {
			(*b)[1].FirstSeq = 3
		}, func(r *faultReport) int { return r.Lost }},
		{"RepairedLive", func(st map[string][]faultStored, _ *[]*faultBatch, _ map[string]*faultSessionRec) {
			st["s"] = append(st["s"], faultEnv("s", 4, "r1", schema.TypeRepairApplied))
			st["s"][3].Env.Synthetic = true
		}, func(r *faultReport) int { return r.RepairedLive }},
		{"NotRepaired", func(_ map[string][]faultStored, _ *[]*faultBatch, s map[string]*faultSessionRec) {
			s["s"].Abandoned = true
		}, func(r *faultReport) int { return r.Abandoned - r.AbandonedRepaired }},
		{"Changed", func(st map[string][]faultStored, _ *[]*faultBatch, _ map[string]*faultSessionRec) {
			st["s"][2].Env.Data = []byte(`{"content":"y"}`)
		}, func(r *faultReport) int { return r.Changed }},
		{"NotLinearizable", func(_ map[string][]faultStored, b *[]*faultBatch, _ map[string]*faultSessionRec) {
			// Answered ok at seq 2 though it expected the empty session.
			(*b)[1].ExpectedSeq = 0
		}, func(r *faultReport) int { return r.NotLinearizable }},
		{"ConflictOnTime", func(_ map[string][]faultStored, b *[]*faultBatch, _ map[string]*faultSessionRec) {
			// A conflict for an append that expected exactly what the
			// session held, with nothing else in between.
			*b = append(*b, &faultBatch{Session: "s", Agent: 1, EventIDs: []string{"e8"}, Types: []string{schema.TypeMessageUser}, ExpectedSeq: 3,
				Outcome: faultNotCommitted, Code: string(schema.CodeConflict), Attempts: []faultAttempt{{Start: time.Now().Add(time.Hour), End: time.Now().Add(time.Hour + time.Millisecond), Result: "conflict", Sends: 1}}})
		}, func(r *faultReport) int { return r.NotLinearizable }},
		{"Unfoldable", func(st map[string][]faultStored, b *[]*faultBatch, _ map[string]*faultSessionRec) {
			st["s"][1].Env.Type = schema.TypeSessionCreated
			(*b)[1].Types[0] = schema.TypeSessionCreated
		}, func(r *faultReport) int { return r.Unfoldable }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stored, batches, sessions := clean()
			tc.plant(stored, &batches, sessions)
			r := faultCheck(stored, batches, nil, sessions, nil)
			if tc.bad(r) == 0 || r.OK() {
				t.Fatalf("planted %s not caught: %s", tc.name, r)
			}
		})
	}
}

func TestFaultUnavailable(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var oks []faultOK
	for _, ms := range []int{0, 100, 200, 3200, 3300} {
		oks = append(oks, faultOK{T: at(ms), Events: 1})
	}
	d, n := faultUnavailable(oks, faultWindow{Start: at(150), End: at(4000)})
	if d != 3000*time.Millisecond || n != 3 {
		t.Fatalf("got %v, %d acked; want 3s, 3", d, n)
	}
	// Nothing acknowledged after the window started: all of it.
	d, _ = faultUnavailable(oks, faultWindow{Start: at(3400), End: at(5000)})
	if d != 1600*time.Millisecond {
		t.Fatalf("got %v, want 1.6s", d)
	}
}

// faultWorstAgent is the longest wait within w of a single agent between
// two committed replies (or from the window's start): what the unluckiest
// agent saw. Agents that were between sessions or thinking count too, so
// it is an upper bound.
func faultWorstAgent(oks []faultOK, w faultWindow) time.Duration {
	by := map[int][]faultOK{}
	for _, ok := range oks {
		by[ok.Agent] = append(by[ok.Agent], ok)
	}
	var worst time.Duration
	for _, list := range by {
		if d, _ := faultUnavailable(list, w); d > worst {
			worst = d
		}
	}
	return worst
}
