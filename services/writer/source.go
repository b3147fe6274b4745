package writer

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path"
	"path/filepath"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/agentlog/formats"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// The source endpoints (DESIGN.md section 15) serve an agent's own
// transcript entries, mapped by pkg/agentlog exactly as `import` maps the
// agent's file.

// sourceSession is the session a transcript key maps to: the id the format
// gives the file the key names (<sessionKey>.jsonl, or <sessionKey>/<subpath>.jsonl).
func sourceSession(k api.SourceKey) (agentlog.Format, string, error) {
	f, ok := formats.Lookup(k.Format)
	if !ok {
		return nil, "", schema.Errorf(schema.CodeBadRequest, "unknown format %q", k.Format)
	}
	if k.SessionKey == "" || path.Base(k.SessionKey) != k.SessionKey || k.SessionKey == "." || k.SessionKey == ".." {
		return nil, "", schema.Errorf(schema.CodeBadRequest, "sessionKey %q is not a file name", k.SessionKey)
	}
	p := "/" + k.SessionKey + ".jsonl"
	if k.Subpath != "" {
		clean := path.Clean(k.Subpath)
		if clean != k.Subpath || path.IsAbs(clean) || clean == ".." || len(clean) > 2 && clean[:3] == "../" {
			return nil, "", schema.Errorf(schema.CodeBadRequest, "subpath %q is not a relative path", k.Subpath)
		}
		p = "/" + k.SessionKey + "/" + clean + ".jsonl"
	}
	id, err := f.SessionID(p, nil)
	if err != nil || !schema.ValidSessionID(id) {
		return nil, "", schema.Errorf(schema.CodeBadRequest, "key %s/%s gives no session id", k.SessionKey, k.Subpath)
	}
	return f, id, nil
}

// readAll reads every stored event of a session; nil when it has none.
func (s *Service) readAll(ctx context.Context, id string) ([]schema.Envelope, error) {
	var out []schema.Envelope
	var after uint64
	for {
		page, err := ReadPage(ctx, s.st, ReadRequest{SessionID: id, AfterSeq: after}, int(s.nc.MaxPayload()))
		if schema.CodeOf(err) == schema.CodeNotFound {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		for _, raw := range page.Events {
			e, err := schema.Decode(raw)
			if err != nil {
				return nil, err
			}
			out = append(out, e)
			after = e.Seq
		}
		if !page.More || len(page.Events) == 0 {
			return out, nil
		}
	}
}

// SourceLoad returns the verbatim entries of a transcript.
func (s *Service) SourceLoad(ctx context.Context, req api.SourceLoadRequest) (api.SourceLoadReply, error) {
	f, id, err := sourceSession(req.SourceKey)
	if err != nil {
		return api.SourceLoadReply{}, err
	}
	events, err := s.readAll(ctx, id)
	if err != nil || len(events) == 0 {
		return api.SourceLoadReply{Entries: []json.RawMessage{}}, err
	}
	x, err := agentlog.NewExport(f.Name(), events)
	if err != nil {
		return api.SourceLoadReply{}, err
	}
	if len(x.Lines) == 0 {
		return api.SourceLoadReply{Entries: []json.RawMessage{}}, nil
	}
	return api.SourceLoadReply{SessionID: id, Found: true, Entries: x.Lines}, nil
}

func (s *Service) handleSourceLoad(ctx context.Context, m *nats.Msg) {
	var req api.SourceLoadRequest
	if err := unmarshal(m.Data, &req); err != nil {
		s.respondErr(m.Reply, errorDetail(schema.Errorf(schema.CodeBadRequest, "request is not a valid source load request: %v", err)))
		return
	}
	rep, err := s.SourceLoad(ctx, req)
	s.respondJSON(m.Reply, rep, err)
}

// sourceBatch is the events per atomic append of a source append.
const sourceBatch = 500

// SourceAppend maps a transcript's stored entries followed by the new ones
// as `import` maps the file, and appends the events after the stored tail
// (the main session; a branch's fork child is left to import and ship).
// An entry whose key (uuid) or text is stored already adds nothing.
func (s *Service) SourceAppend(ctx context.Context, req api.SourceAppendRequest) (api.SourceAppendReply, error) {
	f, id, err := sourceSession(req.SourceKey)
	if err != nil {
		return api.SourceAppendReply{}, err
	}
	stored, err := s.readAll(ctx, id)
	if err != nil {
		return api.SourceAppendReply{}, err
	}
	var lines []json.RawMessage
	var tail uint64
	var tailID string
	if len(stored) > 0 {
		x, err := agentlog.NewExport(f.Name(), stored)
		if err != nil {
			return api.SourceAppendReply{}, err
		}
		lines, tail, tailID = x.Lines, stored[len(stored)-1].Seq, stored[len(stored)-1].EventID
	}
	seen := map[string]bool{}
	m := f.NewMapper("")
	keyOf := func(raw []byte) string {
		if l, err := m.Decode(raw); err == nil && l.Key != "" {
			return "k:" + l.Key
		}
		return "t:" + string(raw)
	}
	for _, l := range lines {
		seen[keyOf(l)] = true
	}
	added := 0
	for i, e := range req.Entries {
		var c bytes.Buffer
		if err := json.Compact(&c, e); err != nil || !bytes.HasPrefix(c.Bytes(), []byte("{")) {
			return api.SourceAppendReply{}, schema.Errorf(schema.CodeBadRequest, "entry %d is not a JSON object", i)
		}
		if k := keyOf(c.Bytes()); !seen[k] {
			seen[k] = true
			lines = append(lines, c.Bytes())
			added++
		}
	}
	rep := api.SourceAppendReply{SessionID: id, LastSeq: tail}
	if added == 0 {
		return rep, nil
	}
	events, err := mapLines(f, req.SourceKey, id, lines)
	if err != nil {
		return api.SourceAppendReply{}, err
	}
	var fresh []schema.Envelope
	for _, e := range events {
		switch {
		case e.Seq < tail:
		case e.Seq == tail:
			if e.EventID != tailID {
				return api.SourceAppendReply{}, schema.Errorf(schema.CodeConflict, "session %s differs from the entries at seq %d (stored event %s, the entries give %s)", id, tail, tailID, e.EventID)
			}
		default:
			e.Seq, e.SessionID = 0, ""
			fresh = append(fresh, e)
		}
	}
	for len(fresh) > 0 {
		n := min(len(fresh), sourceBatch)
		exp := rep.LastSeq
		body, err := json.Marshal(api.AppendRequest{SessionID: id, ExpectedSeq: &exp, Events: fresh[:n]})
		if err != nil {
			return api.SourceAppendReply{}, err
		}
		r, err := s.Append(ctx, body)
		if err != nil {
			return api.SourceAppendReply{}, err
		}
		rep.LastSeq = r.LastSeq
		if !r.Duplicate {
			rep.Appended += n
		}
		fresh = fresh[n:]
	}
	return rep, nil
}

// mapLines maps lines as import maps the file the key names, and returns
// the main session's events.
func mapLines(f agentlog.Format, k api.SourceKey, id string, lines []json.RawMessage) ([]schema.Envelope, error) {
	dir, err := os.MkdirTemp("", "sessionlog-source-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	p := filepath.Join(dir, k.SessionKey+".jsonl")
	if k.Subpath != "" {
		p = filepath.Join(dir, k.SessionKey, filepath.FromSlash(k.Subpath)+".jsonl")
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	for _, l := range lines {
		b.Write(l)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(p, b.Bytes(), 0o600); err != nil {
		return nil, err
	}
	sink := &mainSink{id: id}
	if _, err := agentlog.ReadFile(f, p, agentlog.Options{}, sink); err != nil {
		return nil, schema.Errorf(schema.CodeBadRequest, "entries: %v", err)
	}
	return sink.events, nil
}

// mainSink keeps the events of one session.
type mainSink struct {
	id, cur string
	events  []schema.Envelope
}

func (s *mainSink) Session(p agentlog.Plan) error { s.cur = p.ID; return nil }
func (s *mainSink) Done() error                   { return nil }
func (s *mainSink) Event(e schema.Envelope) error {
	if s.cur == s.id {
		s.events = append(s.events, e)
	}
	return nil
}

func (s *Service) handleSourceAppend(ctx context.Context, m *nats.Msg) {
	var req api.SourceAppendRequest
	if err := unmarshal(m.Data, &req); err != nil {
		s.respondErr(m.Reply, errorDetail(schema.Errorf(schema.CodeBadRequest, "request is not a valid source append request: %v", err)))
		return
	}
	rep, err := s.SourceAppend(ctx, req)
	s.respondJSON(m.Reply, rep, err)
}

// respondJSON answers v, or err.
func (s *Service) respondJSON(reply string, v any, err error) {
	if err == nil {
		var body []byte
		if body, err = json.Marshal(v); err == nil {
			s.respond(reply, body)
			return
		}
	}
	s.respondErr(reply, errorDetail(err))
}
