package projector

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/agentlog/formats"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
	"github.com/sessionlog/sessionlog/services/projector/httpapi"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// SetFleetEvery samples the fleet overview every d in the projectors
// started from now on; restore puts the interval back (cleanup, once they
// stopped).
func SetFleetEvery(d time.Duration) (restore func()) {
	old := fleetEvery
	fleetEvery = d
	return func() { fleetEvery = old }
}

// HoldCommits makes each batch the projector hands to its store land only
// when the fold loop waits for it, as if the disk were slow: whatever the
// fold loop reads from the store before waiting misses the batch in
// flight. release lets every batch land from then on (cleanup).
func HoldCommits(s *Service) (release func()) {
	tokens, stop := make(chan struct{}, 1), make(chan struct{})
	s.db.SetCommitGate(func() {
		select {
		case <-tokens:
		case <-stop:
		}
	})
	s.f.waiting = func() {
		select {
		case tokens <- struct{}{}:
		case <-stop:
		}
	}
	return func() { close(stop) }
}

// MarkErased makes the projector refuse id as erased, as its erasure
// watch does first, without the fold removing the session's views (the
// state between the two).
func MarkErased(s *Service, id string) { s.er.add(id) }

// followWhole is how /context followed a session before it streamed: every
// model-visible entry from seq from on, and the context they make
// (session.Context), all in memory.
func followWhole(rd reader, id string, from uint64) ([]store.ContextEntry, *session.Context, error) {
	it, err := rd.iter(store.EventPrefix(id))
	if err != nil {
		return nil, nil, err
	}
	defer it.Close()
	c := session.NewContext()
	var entries []store.ContextEntry
	for ok := it.SeekGE(store.EventKey(id, from)); ok; ok = it.Next() {
		_, e := store.DecodeEventValue(it.Value())
		if len(e) == 0 {
			continue
		}
		var ce store.ContextEntry
		if err := json.Unmarshal(e, &ce); err != nil {
			return nil, nil, err
		}
		if ce.Type == schema.TypeContextRewound {
			var d schema.ContextRewound
			if err := json.Unmarshal(ce.Data, &d); err != nil {
				return nil, nil, err
			}
			c.Rewind(ce.Seq, d.ToSeq)
			continue
		}
		c.Add(ce.Seq)
		entries = append(entries, ce)
	}
	return entries, c, nil
}

// WholeContext is GET /v1/sessions/{id}/context as the projector answered
// it before it streamed: the whole context followed in memory
// (session.Context) and written at once. Tests compare the streamed
// answer with it.
func WholeContext(s *Service, id string) ([]byte, error) {
	var out *httpapi.Context
	err := s.view(func(rd reader) error {
		sum, err := rd.summary(id)
		if err != nil || sum == nil {
			return err
		}
		out = &httpapi.Context{SessionID: id, LastSeq: sum.LastSeq, Entries: []store.ContextEntry{}}
		var from uint64 = 1
		if c, err := rd.snap.Compaction(id); err != nil {
			return err
		} else if c != nil {
			out.Compaction = c
			from = c.ThroughSeq + 1
		}
		entries, c, err := followWhole(rd, id, from)
		if err != nil {
			return err
		}
		bySeq := map[uint64]store.ContextEntry{}
		for _, ce := range entries {
			bySeq[ce.Seq] = ce
		}
		for _, seq := range c.Seqs() {
			out.Entries = append(out.Entries, bySeq[seq])
		}
		return nil
	})
	if err != nil || out == nil {
		return nil, err
	}
	var b bytes.Buffer
	err = json.NewEncoder(&b).Encode(out)
	return b.Bytes(), err
}

// WholeEvents is GET /v1/sessions/{id}/events?after=&limit= of a readable
// session as the projector answered it before it streamed: the page built
// in memory and written at once.
func WholeEvents(ctx context.Context, s *Service, id string, after uint64, limit int) ([]byte, error) {
	out := httpapi.Events{SessionID: id, Events: []json.RawMessage{}, Next: after}
	_, err := s.ls.ReadSession(ctx, id, 0, func(m *logstore.Msg) error {
		var probe struct {
			Seq uint64 `json:"seq"`
		}
		json.Unmarshal(m.Data, &probe)
		seq := probe.Seq
		if seq <= after {
			return nil
		}
		if len(out.Events) == limit {
			out.More = true
			return logstore.ErrStop
		}
		out.Events = append(out.Events, json.RawMessage(m.Data))
		out.Next = seq
		return nil
	})
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	err = json.NewEncoder(&b).Encode(out)
	return b.Bytes(), err
}

// WholeExport is GET /v1/sessions/{id}/export?format= made from the
// session read whole into memory (its events as agentlog.SliceEvents for an
// agent's format), not from the log a page at a time; the bytes of the
// exports built whole before they streamed are held by
// pkg/agentlog/formats' TestExportsEqualWholeSessionExports.
func WholeExport(ctx context.Context, s *Service, id, format string) ([]byte, error) {
	var b bytes.Buffer
	if format == "" {
		_, err := s.ls.ReadSession(ctx, id, 0, func(m *logstore.Msg) error {
			b.Write(m.Data)
			return b.WriteByte('\n')
		})
		return b.Bytes(), err
	}
	stored, _, err := s.ls.ReadEvents(ctx, id, 0)
	if err != nil {
		return nil, err
	}
	events := make([]schema.Envelope, len(stored))
	for i, e := range stored {
		events[i] = e.Envelope
	}
	f, _ := formats.Lookup(format)
	x, err := agentlog.NewExport(f.Name(), agentlog.SliceEvents(events))
	if err != nil {
		return nil, err
	}
	err = f.Export(&b, x)
	return b.Bytes(), err
}

// Abandoned are the seqs of the session's model-visible events that its
// rewinds abandoned, by the ranges ACP replay skips (Abandoned) and as
// the whole context followed in memory finds them (the replay's skip set
// before it held only ranges).
func Abandoned(s *Service, id string) (byRanges, whole map[uint64]bool, err error) {
	byRanges, whole = map[uint64]bool{}, map[uint64]bool{}
	err = s.view(func(rd reader) error {
		sum, err := rd.summary(id)
		if err != nil || sum == nil {
			return err
		}
		ranges, err := rd.snap.Abandoned(id, 1, sum.LastSeq)
		if err != nil {
			return err
		}
		entries, c, err := followWhole(rd, id, 1)
		if err != nil {
			return err
		}
		for _, ce := range entries {
			in := slices.ContainsFunc(ranges, func(r store.Rewound) bool { return ce.Seq > r.After && ce.Seq < r.Before })
			if role := store.ContextRole(ce.Type); in && role != "" && role != "rewind" {
				byRanges[ce.Seq] = true
			}
		}
		kept := map[uint64]bool{}
		for _, seq := range c.Seqs() {
			kept[seq] = true
		}
		for _, ce := range entries {
			if !kept[ce.Seq] {
				whole[ce.Seq] = true
			}
		}
		return nil
	})
	return byRanges, whole, err
}

// SetSearchScanBudget bounds the sessions a search examines to n in the
// projectors started from now on; restore puts the budget back (cleanup).
func SetSearchScanBudget(n int) (restore func()) {
	old := searchScanBudget
	searchScanBudget = n
	return func() { searchScanBudget = old }
}

// ListExamined reads the first page of limit sessions the list shows a
// token of tenant ("": the operator's) as /v1/sessions reads it, and
// says how many index entries it read.
func ListExamined(s *Service, tenant string, limit int) (ids []string, examined int, err error) {
	err = s.view(func(rd reader) error {
		var keep func(string) bool // a tenant's token's, as visible has it
		if tenant != "" {
			keep = func(id string) bool { return api.TenantOf(id) == tenant }
		}
		sums, _, n, err := rd.snap.List(tenant, "", nil, limit, keep)
		for _, sum := range sums {
			ids = append(ids, sum.SessionID)
		}
		examined = n.Entries
		return err
	})
	return ids, examined, err
}

// AgentIndexed lists the sessions (stored ids, newest first) in the
// indexes of agent of tenant: its activity index, and its status index
// of each status (by status, those holding any).
func AgentIndexed(s *Service, tenant, agent string) (activity []string, byStatus map[string][]string, err error) {
	byStatus = map[string][]string{}
	err = s.view(func(rd reader) error {
		walk := func(p []byte) ([]string, error) {
			it, err := rd.iter(p)
			if err != nil {
				return nil, err
			}
			var ids []string
			for ok := it.Last(); ok; ok = it.Prev() {
				ids = append(ids, store.IndexSession(p, it.Key()))
			}
			return ids, it.Close()
		}
		if activity, err = walk(store.AgentActivityPrefix(tenant, agent)); err != nil {
			return err
		}
		for _, st := range store.Statuses {
			ids, err := walk(store.AgentStatusPrefix(tenant, agent, st))
			if err != nil {
				return err
			}
			if len(ids) > 0 {
				byStatus[st] = ids
			}
		}
		return nil
	})
	return activity, byStatus, err
}

// reader reads the views of one store snapshot (tests).
type reader struct{ snap store.Snapshot }

// summary reads a session's summary (nil: none).
func (r reader) summary(id string) (*store.Summary, error) { return r.snap.Summary(id) }

// iter walks the raw keys of the reader's snapshot under prefix.
func (r reader) iter(prefix []byte) (store.Iterator, error) { return r.snap.Iter(prefix) }

// view runs fn on a snapshot of the views, as the HTTP side reads them.
func (s *Service) view(fn func(rd reader) error) error {
	return httpViews{s}.View(func(snap store.Snapshot) error { return fn(reader{snap: snap}) })
}
