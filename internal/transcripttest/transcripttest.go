// Package transcripttest writes agents' transcript files for the tests of
// what reads them (ship and import --from): the real transcripts' lines,
// whole, torn or rewritten; what a file maps to; and what a session holds
// once read back through the writer.
package transcripttest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/sessionlog/sessionlog/internal/sre"
	"github.com/sessionlog/sessionlog/internal/transfer"
	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/agentlog/claudecode"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// RealDir is the directory of the real transcripts of an agent: cc, codex
// or pi (pkg/agentlog/testdata/real, whose README says where each came
// from).
func RealDir(agent string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "pkg", "agentlog", "testdata", "real", agent)
}

// RealCC is the directory of the real Claude Code transcripts.
var RealCC = RealDir("cc")

// RealLines reads a real Claude Code transcript's lines (without their
// newlines).
func RealLines(t testing.TB, name string) [][]byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(RealCC, name))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n"))
}

// WriteLines writes lines as a transcript, then tail (a torn last line).
func WriteLines(t testing.TB, path string, lines [][]byte, tail []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, l := range lines {
		b.Write(l)
		b.WriteByte('\n')
	}
	b.Write(tail)
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// RewriteCase writes a real transcript (lines) to path, whose session is
// id, and gives another one's lines to rewrite it with.
func RewriteCase(t testing.TB) (path, id string, lines, other [][]byte) {
	t.Helper()
	name := "491e126e-1e71-469c-ade2-fcc8af567c74.jsonl"
	lines = RealLines(t, name)
	other = RealLines(t, "d6e0bada-1959-4eec-a9d2-0bfade768d8f.jsonl")
	path = filepath.Join(t.TempDir(), "proj", name)
	WriteLines(t, path, lines, nil)
	return path, "cc-" + strings.TrimSuffix(name, ".jsonl"), lines, other
}

// Mapped is what the mapping gives for a file's one session: as an
// agentlog.Sink, every event of the file under the last session's id.
type Mapped struct {
	ID     string
	Events []schema.Envelope
}

func (m *Mapped) Session(p agentlog.Plan) error { m.ID = p.ID; return nil }
func (m *Mapped) Event(e schema.Envelope) error { m.Events = append(m.Events, e); return nil }
func (m *Mapped) Done() error                   { return nil }

// MainOnly maps a Claude Code file and keeps its first session's events.
func MainOnly(t testing.TB, path string) *Mapped {
	t.Helper()
	return MainOf(t, claudecode.Format{}, path)
}

// MainOf maps a file and keeps its first session's events.
func MainOf(t testing.TB, f agentlog.Format, path string) *Mapped {
	t.Helper()
	var m Mapped
	s := &firstSession{m: &m}
	if _, err := agentlog.ReadFile(f, path, agentlog.Options{}, s); err != nil {
		t.Fatal(err)
	}
	return &m
}

// firstSession gives the first session of a file to m.
type firstSession struct {
	m        *Mapped
	sessions int
}

func (f *firstSession) Session(p agentlog.Plan) error {
	if f.sessions++; f.sessions == 1 {
		f.m.ID = p.ID
	}
	return nil
}

func (f *firstSession) Event(e schema.Envelope) error {
	if f.sessions == 1 {
		f.m.Events = append(f.m.Events, e)
	}
	return nil
}

func (f *firstSession) Done() error { return nil }

// Stored reads a session's stored events through the writer (none when it
// holds none).
func Stored(t testing.TB, cl *client.Client, id string) []schema.Envelope {
	t.Helper()
	var evs []schema.Envelope
	err := transfer.SessionEvents(context.Background(), cl, id)(0, func(e *schema.Envelope) error {
		evs = append(evs, *e)
		return nil
	})
	if err != nil && !errors.Is(err, sre.ErrNotFound) {
		t.Fatal(err)
	}
	return evs
}

// Output is what a follower (ship) writes while the test reads it.
type Output struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}
