package writer

import (
	"context"
	"encoding/json"
	"path"

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
	if err != nil {
		s.respondErr(m.Reply, errorDetail(err))
		return
	}
	body, err := json.Marshal(rep)
	if err != nil {
		s.respondErr(m.Reply, errorDetail(err))
		return
	}
	s.respond(m.Reply, body)
}
