package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/api"
)

// A Claude Code transcript that `ship` follows or `import` takes in is
// listed by the Claude Agent SDK store under its project directory
// (sessions.api.source.list), and its session is that project's: the same
// session key under another project is refused.
func TestShipRecordsTranscriptKey(t *testing.T) {
	for _, verb := range []string{"ship", "import"} {
		t.Run(verb, func(t *testing.T) { testRecordsTranscriptKey(t, verb) })
	}
}

func testRecordsTranscriptKey(t *testing.T, verb string) {
	s := imStart(t)
	dir := filepath.Join(t.TempDir(), "projects")
	proj := filepath.Join(dir, "-home-ann-shop")
	if err := os.MkdirAll(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	const sid = "88888888-8888-4888-8888-888888888888"
	line := fmt.Sprintf(`{"parentUuid":null,"isSidechain":false,"cwd":"/home/ann/shop","sessionId":"%s","type":"user","message":{"role":"user","content":"ship me"},"uuid":"s-1","timestamp":"2026-11-30T10:00:00.000Z"}`+"\n", sid)
	if err := os.WriteFile(filepath.Join(proj, sid+".jsonl"), []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	said := func() string { return "" }
	if verb == "ship" {
		ship := startShip(t, s, dir)
		said = ship.out.String
	} else if code, out, errs := s.run(t, "import", "--from", "claude-code", dir); code != 0 {
		t.Fatalf("import: exit %d\n%s\n%s", code, out, errs)
	}
	request := func(subject string, req, out any) error {
		b, _ := json.Marshal(req)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		m, err := s.cl.Conn().RequestWithContext(ctx, subject, b)
		if err != nil {
			return err
		}
		if code := m.Header.Get("Nats-Service-Error-Code"); code != "" {
			return fmt.Errorf("%s: %s", code, m.Data)
		}
		return json.Unmarshal(m.Data, out)
	}
	natstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		var rep api.SourceListReply
		if err := request(api.SubjectSourceList, api.SourceListRequest{Format: "claude-code", ProjectKey: "-home-ann-shop"}, &rep); err != nil {
			return err
		}
		if len(rep.Sessions) != 1 || rep.Sessions[0].SessionKey != sid {
			return fmt.Errorf("listed %+v\n%s", rep.Sessions, said())
		}
		return nil
	})
	var ld api.SourceLoadReply
	if err := request(api.SubjectSourceLoad, api.SourceLoadRequest{SourceKey: api.SourceKey{Format: "claude-code", ProjectKey: "-home-ann-shop", SessionKey: sid}}, &ld); err != nil || !ld.Found || len(ld.Entries) != 1 {
		t.Fatalf("load: %+v %v", ld, err)
	}
	var rep api.SourceAppendReply
	err := request(api.SubjectSourceAppend, api.SourceAppendRequest{SourceKey: api.SourceKey{Format: "claude-code", ProjectKey: "-home-eve", SessionKey: sid},
		Entries: []json.RawMessage{json.RawMessage(`{"type":"user","uuid":"e-1","parentUuid":"s-1","message":{"role":"user","content":"mine now"}}`)}}, &rep)
	if err == nil {
		t.Fatalf("another project appended to the shipped session: %+v", rep)
	}
}
