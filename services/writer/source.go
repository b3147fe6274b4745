package writer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path"
	"path/filepath"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/agentlog/formats"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/forker"
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
	if err := checkProject(k.Format, k.ProjectKey); err != nil {
		return nil, "", err
	}
	if k.SessionKey == "" || path.Base(k.SessionKey) != k.SessionKey || k.SessionKey == "." || k.SessionKey == ".." {
		return nil, "", schema.Errorf(schema.CodeBadRequest, "sessionKey %q is not a file name", k.SessionKey)
	}
	if len(k.SessionKey) > maxSourceSessionKey || len(k.Subpath) > maxSourceSubpath {
		return nil, "", schema.Errorf(schema.CodeBadRequest, "sessionKey over %d bytes or subpath over %d", maxSourceSessionKey, maxSourceSubpath)
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
	if _, err := s.sourceOwner(ctx, req.SourceKey, id, false); schema.CodeOf(err) == schema.CodeConflict {
		// Another project's session: this key was never written.
		return api.SourceLoadReply{Entries: []json.RawMessage{}}, nil
	} else if err != nil {
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
	serveSource(s, ctx, m, "load", s.SourceLoad)
}

// sourceBatch is the events per atomic append of a source append.
const sourceBatch = 500

// SourceAppend maps a transcript's stored entries followed by the new ones
// as `import` maps the file, and appends what is not stored yet of each
// session they give (the main session, then a branch's fork child, forked
// as import forks it), through the step import and ship share
// (agentlog.AppendSink). An entry whose key (uuid) or text is stored
// already adds nothing. The first append of a key records its project in
// the source index; a key of another project that maps to the same
// session is refused.
func (s *Service) SourceAppend(ctx context.Context, req api.SourceAppendRequest) (api.SourceAppendReply, error) {
	f, id, err := sourceSession(req.SourceKey)
	if err != nil {
		return api.SourceAppendReply{}, err
	}
	entries := make([][]byte, len(req.Entries))
	for i, e := range req.Entries {
		var c bytes.Buffer
		if err := json.Compact(&c, e); err != nil || !bytes.HasPrefix(c.Bytes(), []byte("{")) {
			return api.SourceAppendReply{}, schema.Errorf(schema.CodeBadRequest, "entry %d is not a JSON object", i)
		}
		entries[i] = c.Bytes()
	}
	created, err := s.sourceOwner(ctx, req.SourceKey, id, true)
	if err != nil {
		return api.SourceAppendReply{}, err
	}
	stored, err := s.readAll(ctx, id)
	if err != nil {
		return api.SourceAppendReply{}, err
	}
	var lines []json.RawMessage
	rep := api.SourceAppendReply{SessionID: id}
	if len(stored) > 0 {
		x, err := agentlog.NewExport(f.Name(), stored)
		if err != nil {
			return api.SourceAppendReply{}, err
		}
		lines, rep.LastSeq = x.Lines, stored[len(stored)-1].Seq
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
	for _, c := range entries {
		if k := keyOf(c); !seen[k] {
			seen[k] = true
			lines = append(lines, c)
			added++
		}
	}
	if added > 0 {
		if err := s.appendLines(ctx, f, req.SourceKey, id, lines, &rep); err != nil {
			return api.SourceAppendReply{}, err
		}
	}
	if rep.Appended > 0 || created {
		if err := s.indexSource(ctx, req.SourceKey, id); err != nil {
			return api.SourceAppendReply{}, err
		}
	}
	return rep, nil
}

// appendLines maps lines as import maps the file the key names, and
// appends what is new of each session; rep gets the main session's.
// A branch that cannot be written now (no forker answers, its copy is not
// committed yet) is logged and left to the next append, which maps it
// again: the key names the main transcript, and that is in.
func (s *Service) appendLines(ctx context.Context, f agentlog.Format, k api.SourceKey, id string, lines []json.RawMessage, rep *api.SourceAppendReply) error {
	mainDone := false
	sink := &agentlog.AppendSink{Ctx: ctx, Log: writerLog{s}, Batch: sourceBatch,
		Finished: func(p agentlog.Plan, last uint64, added int) {
			if p.ID == id {
				rep.LastSeq, rep.Appended, mainDone = last, added, true
			}
		}}
	err := mapLines(f, k, lines, sink)
	var de *agentlog.DivergedError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &de) && de.Session == id:
		return schema.Errorf(schema.CodeConflict, "%v", de)
	case mainDone:
		s.log.Warn("source append: a branch of the transcript is left for the next append", "session", id, "err", err)
		return nil
	}
	return err
}

// writerLog is agentlog.Log on the writer's own append path.
type writerLog struct{ s *Service }

func (l writerLog) Tail(ctx context.Context, id string) (uint64, string, error) {
	t, err := l.s.st.Tail(ctx, id)
	return t.Seq, t.EventID, err
}

func (l writerLog) Append(ctx context.Context, id string, expected uint64, events []schema.Envelope) (uint64, bool, error) {
	body, err := json.Marshal(api.AppendRequest{SessionID: id, ExpectedSeq: &expected, Events: events})
	if err != nil {
		return 0, false, err
	}
	r, err := l.s.Append(ctx, body)
	return r.LastSeq, r.Duplicate, err
}

func (l writerLog) Fork(ctx context.Context, parent, child string, seq uint64) error {
	_, err := forker.Call(ctx, l.s.nc, forker.Request{ParentID: parent, ChildID: child, At: &api.ForkAt{Seq: &seq}})
	if schema.CodeOf(err) == schema.CodeConflict {
		return nil // the child exists
	}
	return err
}

// mapLines maps lines as import maps the file the key names.
func mapLines(f agentlog.Format, k api.SourceKey, lines []json.RawMessage, sink agentlog.Sink) error {
	dir, err := os.MkdirTemp("", "sessionlog-source-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p := filepath.Join(dir, k.SessionKey+".jsonl")
	if k.Subpath != "" {
		p = filepath.Join(dir, k.SessionKey, filepath.FromSlash(k.Subpath)+".jsonl")
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	var b bytes.Buffer
	for _, l := range lines {
		b.Write(l)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(p, b.Bytes(), 0o600); err != nil {
		return err
	}
	_, err = agentlog.ReadFile(f, p, agentlog.Options{}, sink)
	return err
}

func (s *Service) handleSourceAppend(ctx context.Context, m *nats.Msg) {
	serveSource(s, ctx, m, "append", s.SourceAppend)
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
