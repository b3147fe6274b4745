package main

import (
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/cmd/sessionlog/internal/bench"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/transfer"
	"github.com/sessionlog/sessionlog/internal/writertest"
	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/agentlog/claudecode"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// importHarness is an embedded server with the writer (its leases
// lasting cfg.LeaseTTL, or the default).
type importHarness struct {
	st  *logstore.Store
	nc  *nats.Conn
	cl  *client.Client
	url string
}

func newImportHarness(t *testing.T, cfg logstore.Config) *importHarness {
	t.Helper()
	k := writertest.New(t, cfg)
	return &importHarness{st: k.St, nc: k.NC, cl: k.Cl, url: k.URL}
}

// importStack is an embedded server with the writer, and the files of
// `bench import` (six sessions of about seventy events).
func importStack(t *testing.T, cfg logstore.Config) (*logstore.Store, *client.Client, []string) {
	t.Helper()
	h := newImportHarness(t, cfg)
	dir := t.TempDir()
	if _, err := bench.GenSessions(dir, 6, 5); err != nil {
		t.Fatal(err)
	}
	files, err := transfer.SessionFiles(claudecode.Format{}, []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	return h.st, h.cl, files
}

// startWriter runs the writer on st (its leases lasting the store's lease
// TTL), and the source service beside it, until the test ends.
func startWriter(t *testing.T, st *logstore.Store, nc *nats.Conn) { writertest.Start(t, st, nc) }

// runService runs svc until stop is called or the test ends; stop
// returns what Run returned.
func runService(t *testing.T, svc service) (stop func() error) { return writertest.Run(t, svc) }

// mapped is what the mapping gives for a file's one session.
type mapped struct {
	id     string
	events []schema.Envelope
}

func (m *mapped) Session(p agentlog.Plan) error { m.id = p.ID; return nil }
func (m *mapped) Event(e schema.Envelope) error { m.events = append(m.events, e); return nil }
func (m *mapped) Done() error                   { return nil }

// Appends sent while the next batch is mapped, several files at once, keep
// each session's order: what is stored is the mapping, seq for seq, and a
// second import appends nothing.
func TestImportFilesPipelinedKeepsEachSessionInOrder(t *testing.T) {
	st, cl, files := importStack(t, logstore.Config{})
	ctx := context.Background()
	opt := transfer.Options{Batch: 7, Jobs: 2}
	n, err := transfer.ImportFiles(ctx, cl, claudecode.Format{}, files, opt)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, p := range files {
		var m mapped
		if _, err := agentlog.ReadFile(claudecode.Format{}, p, agentlog.Options{}, &m); err != nil {
			t.Fatal(err)
		}
		total += len(m.events)
		if len(m.events) < 5*opt.Batch {
			t.Fatalf("%s maps to %d events: too few batches to pipeline", p, len(m.events))
		}
		stored, _, err := st.ReadEvents(ctx, m.id, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(stored) != len(m.events) {
			t.Fatalf("%s: %d events stored, the mapping gives %d", m.id, len(stored), len(m.events))
		}
		for i, e := range stored {
			if w := m.events[i]; e.EventID != w.EventID || e.Seq != w.Seq {
				t.Fatalf("%s seq %d: stored %s, mapped %s at seq %d", m.id, e.Seq, e.EventID, w.EventID, w.Seq)
			}
		}
	}
	if n.Events != total || n.Imported != len(files) {
		t.Errorf("counts %+v, want %d events in %d sessions", n, total, len(files))
	}
	n, err = transfer.ImportFiles(ctx, cl, claudecode.Format{}, files, opt)
	if err != nil {
		t.Fatal(err)
	}
	if n.Events != 0 || n.Unchanged != len(files) {
		t.Errorf("second import: counts %+v, want nothing appended", n)
	}
}

// An append refused while the next batch was being mapped stops the import
// with an error naming the file, its session, the position and the
// refusal. The store here takes no event over 2000 bytes: each file's
// first tool result is refused.
func TestImportFilesRefusedAppendInFlightIsNamed(t *testing.T) {
	_, cl, files := importStack(t, logstore.Config{MaxEventBytes: 2000})
	_, err := transfer.ImportFiles(context.Background(), cl, claudecode.Format{}, files, transfer.Options{Batch: 2, Jobs: 2})
	if err == nil {
		t.Fatal("the import of events over the store's limit succeeded")
	}
	named := false
	for _, p := range files {
		if !strings.HasPrefix(err.Error(), p+": ") {
			continue
		}
		named = true
		var m mapped
		if _, rerr := agentlog.ReadFile(claudecode.Format{}, p, agentlog.Options{}, &m); rerr != nil {
			t.Fatal(rerr)
		}
		for _, want := range []string{"append to " + m.id + " after seq ", string(schema.CodeTooLarge), "run again to finish"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
	}
	if !named {
		t.Errorf("error %q names no file", err)
	}
}
