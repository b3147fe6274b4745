package projectortest

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/agentlog/formats"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
	"github.com/sessionlog/sessionlog/services/projector/httpapi"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// followWhole is how /context followed a session before it streamed: every
// model-visible entry from seq from on, and the context they make
// (session.Context), all in memory.
func followWhole(snap store.Snapshot, id string, from uint64) ([]store.ContextEntry, *session.Context, error) {
	it, err := snap.Iter(store.EventPrefix(id))
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
func WholeContext(r *Running, id string) ([]byte, error) {
	var out *httpapi.Context
	err := r.View(func(snap store.Snapshot) error {
		sum, err := snap.Summary(id)
		if err != nil || sum == nil {
			return err
		}
		out = &httpapi.Context{SessionID: id, LastSeq: sum.LastSeq, Entries: []store.ContextEntry{}}
		var from uint64 = 1
		if c, err := snap.Compaction(id); err != nil {
			return err
		} else if c != nil {
			out.Compaction = c
			from = c.ThroughSeq + 1
		}
		entries, c, err := followWhole(snap, id, from)
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
func WholeEvents(ctx context.Context, ls *logstore.Store, id string, after uint64, limit int) ([]byte, error) {
	out := httpapi.Events{SessionID: id, Events: []json.RawMessage{}, Next: after}
	_, err := ls.ReadSession(ctx, id, 0, func(m *logstore.Msg) error {
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
func WholeExport(ctx context.Context, ls *logstore.Store, id, format string) ([]byte, error) {
	var b bytes.Buffer
	if format == "" {
		_, err := ls.ReadSession(ctx, id, 0, func(m *logstore.Msg) error {
			b.Write(m.Data)
			return b.WriteByte('\n')
		})
		return b.Bytes(), err
	}
	stored, _, err := ls.ReadEvents(ctx, id, 0)
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
func Abandoned(r *Running, id string) (byRanges, whole map[uint64]bool, err error) {
	byRanges, whole = map[uint64]bool{}, map[uint64]bool{}
	err = r.View(func(snap store.Snapshot) error {
		sum, err := snap.Summary(id)
		if err != nil || sum == nil {
			return err
		}
		ranges, err := snap.Abandoned(id, 1, sum.LastSeq)
		if err != nil {
			return err
		}
		entries, c, err := followWhole(snap, id, 1)
		if err != nil {
			return err
		}
		for _, ce := range entries {
			in := slices.ContainsFunc(ranges, func(rw store.Rewound) bool { return ce.Seq > rw.After && ce.Seq < rw.Before })
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
