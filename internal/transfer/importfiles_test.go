package transfer_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/transcripttest"
	"github.com/sessionlog/sessionlog/internal/transfer"
	"github.com/sessionlog/sessionlog/internal/writertest"
	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/agentlog/claudecode"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// importStack is an embedded server with the writer, and the files of
// `bench import` (six sessions of about seventy events).
func importStack(t *testing.T, cfg logstore.Config) (*logstore.Store, *client.Client, []string) {
	t.Helper()
	k := writertest.New(t, cfg)
	dir := t.TempDir()
	if _, err := gen.ClaudeCodeFiles(dir, 6, 5); err != nil {
		t.Fatal(err)
	}
	files, err := transfer.SessionFiles(claudecode.Format{}, []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	return k.St, k.Cl, files
}

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
		var m transcripttest.Mapped
		if _, err := agentlog.ReadFile(claudecode.Format{}, p, agentlog.Options{}, &m); err != nil {
			t.Fatal(err)
		}
		total += len(m.Events)
		if len(m.Events) < 5*opt.Batch {
			t.Fatalf("%s maps to %d events: too few batches to pipeline", p, len(m.Events))
		}
		stored, _, err := st.ReadEvents(ctx, m.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(stored) != len(m.Events) {
			t.Fatalf("%s: %d events stored, the mapping gives %d", m.ID, len(stored), len(m.Events))
		}
		for i, e := range stored {
			if w := m.Events[i]; e.EventID != w.EventID || e.Seq != w.Seq {
				t.Fatalf("%s seq %d: stored %s, mapped %s at seq %d", m.ID, e.Seq, e.EventID, w.EventID, w.Seq)
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
		var m transcripttest.Mapped
		if _, rerr := agentlog.ReadFile(claudecode.Format{}, p, agentlog.Options{}, &m); rerr != nil {
			t.Fatal(rerr)
		}
		for _, want := range []string{"append to " + m.ID + " after seq ", string(schema.CodeTooLarge), "run again to finish"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
	}
	if !named {
		t.Errorf("error %q names no file", err)
	}
}
