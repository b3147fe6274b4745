package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/sre"
)

// A session with no events is said to be missing by show, replay, locate
// and tail alike: erased (with its record's when, by and why) when its
// erasure record says so, else not found; tail of a session not found
// waits for it, but says so first.
func TestMissingSessionVerbs(t *testing.T) {
	s, st := storeOnServer(t)
	ctx := context.Background()
	if _, _, err := st.MarkErased(ctx, logstore.Erasure{SessionID: "gone", By: "sre", Reason: "privacy request", ErasedAt: "2026-12-06T05:00:00Z", Done: true}); err != nil {
		t.Fatal(err)
	}
	url := []string{"--nats-url", s.ClientURL()}
	for _, verb := range []string{"show", "replay", "locate"} {
		for id, want := range map[string]string{
			"gone":  "session gone: erased at 2026-12-06T05:00:00Z by sre (privacy request)",
			"never": "session never: not found",
		} {
			var out, errb bytes.Buffer
			if code := Main(ctx, append([]string{verb, id}, url...), &out, &errb); code != 1 || !strings.Contains(errb.String(), want) {
				t.Errorf("%s %s: exit %d, stderr %q, want exit 1 and %q", verb, id, code, errb.String(), want)
			}
		}
	}
	var out, errb bytes.Buffer
	if code := Main(ctx, append([]string{"tail", "gone"}, url...), &out, &errb); code != 1 || !strings.Contains(errb.String(), "erased") {
		t.Errorf("tail gone: exit %d, stderr %q, want the erasure", code, errb.String())
	}
	errb.Reset()
	tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	Main(tctx, append([]string{"tail", "never"}, url...), &out, &errb)
	if !strings.Contains(errb.String(), "session never has no events yet; waiting for its first") {
		t.Errorf("tail never: stderr %q, want it to say it waits", errb.String())
	}
}

// show --json gives the folded state without the hashes only the rules
// read, and openWork as a list (empty, never null).
func TestShowJSON(t *testing.T) {
	s, st := storeOnServer(t)
	ctx := context.Background()
	// Several whole turns: the first ones' tool calls are spent.
	if _, err := gen.Seed(ctx, st, "many", 1+5*gen.TurnEvents, 0); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := Main(ctx, []string{"show", "--json", "many", "--nats-url", s.ClientURL()}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var got struct {
		State    map[string]json.RawMessage `json:"state"`
		OpenWork json.RawMessage            `json:"openWork"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, k := range sre.StateInternals {
		if _, ok := got.State[k]; ok {
			t.Errorf("state has %s:\n%s", k, out.String())
		}
	}
	if string(got.State["lastSeq"]) != strconv.Itoa(1+5*gen.TurnEvents) || string(got.OpenWork) != "[]" {
		t.Errorf("lastSeq %s, openWork %s:\n%s", got.State["lastSeq"], got.OpenWork, out.String())
	}
}

// ls --limit lists the first sessions and counts the rest on stderr; the
// table's times are to the second.
func TestLsLimit(t *testing.T) {
	s, st := storeOnServer(t)
	ctx := context.Background()
	for _, id := range []string{"a", "b", "c"} {
		if _, err := gen.Seed(ctx, st, id, 2, 0); err != nil {
			t.Fatal(err)
		}
	}
	var out, errb bytes.Buffer
	if code := Main(ctx, []string{"ls", "--limit", "2", "--nats-url", s.ClientURL()}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "a ") || !strings.HasPrefix(lines[2], "b ") ||
		!strings.Contains(errb.String(), "3 sessions, the first 2 listed") {
		t.Fatalf("stdout:\n%s\nstderr: %s", out.String(), errb.String())
	}
	if f := strings.Fields(lines[1]); !strings.HasSuffix(f[len(f)-1], "Z") || strings.Contains(f[len(f)-1], ".") {
		t.Errorf("time %q: want RFC 3339 to the second", f[len(f)-1])
	}
}

// An export holding an erased session imports the others and says which
// it left out and how to take it under another id (exit 1); --as renames
// any session of the file with OLD=NEW; an agent's own file given without
// --from is named as one.
func TestImportLeavesErasedOut(t *testing.T) {
	ctx := context.Background()
	file := exportOf(t, 5, "keep", "gone")
	dst, dstStore := storeOnServer(t)
	if _, _, err := dstStore.MarkErased(ctx, logstore.Erasure{SessionID: "gone", By: "sre", Reason: "test", ErasedAt: "2026-12-06T05:00:00Z", Done: true}); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := Main(ctx, []string{"import", "--file", file, "--nats-url", dst.ClientURL()}, &out, &errb)
	if code != 1 || !strings.Contains(out.String(), "imported 1 sessions, 5 events (0 sessions already present, 1 erased left out)") ||
		!strings.Contains(errb.String(), "session gone not imported: erased") || !strings.Contains(errb.String(), "--as gone=NEW_ID") {
		t.Fatalf("import: exit %d\nstdout %s\nstderr %s", code, out.String(), errb.String())
	}
	if tail, err := dstStore.Tail(ctx, "keep"); err != nil || tail.Seq != 5 {
		t.Fatalf("keep: %+v %v", tail, err)
	}
	out.Reset()
	errb.Reset()
	if code := Main(ctx, []string{"import", "--file", file, "--as", "gone=back", "--nats-url", dst.ClientURL()}, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "imported 1 sessions, 5 events (1 sessions already present)") {
		t.Fatalf("import --as gone=back: exit %d\nstdout %s\nstderr %s", code, out.String(), errb.String())
	}
	if tail, err := dstStore.Tail(ctx, "back"); err != nil || tail.Seq != 5 {
		t.Fatalf("back: %+v %v", tail, err)
	}
	errb.Reset()
	if code := Main(ctx, []string{"import", "--file", file, "--as", "back", "--nats-url", dst.ClientURL()}, &out, &errb); code != 2 ||
		!strings.Contains(errb.String(), "the file holds 2 sessions: name each, OLD=NEW") {
		t.Fatalf("import --as of a two-session file: exit %d: %s", code, errb.String())
	}

	for dir, format := range map[string]string{"cc": "claude-code", "codex": "codex", "pi": "pi"} {
		files, err := filepath.Glob("../../pkg/agentlog/testdata/real/" + dir + "/*.jsonl")
		if err != nil || len(files) == 0 {
			t.Fatalf("real %s files: %v %v", format, files, err)
		}
		errb.Reset()
		if code := Main(ctx, []string{"import", "--file", files[0], "--nats-url", dst.ClientURL()}, &out, &errb); code == 0 ||
			!strings.Contains(errb.String(), "this looks like a "+format+" session file") || !strings.Contains(errb.String(), "import --from "+format) {
			t.Errorf("import of a %s file without --from: exit %d: %s", format, code, errb.String())
		}
	}
}

// exportOf is the export (a file) of the sessions ids of n events each,
// seeded in a store of their own.
func exportOf(t *testing.T, n int, ids ...string) string {
	t.Helper()
	ctx := context.Background()
	src, st := storeOnServer(t)
	for _, id := range ids {
		if _, err := gen.Seed(ctx, st, id, n, 0); err != nil {
			t.Fatal(err)
		}
	}
	var export, errb bytes.Buffer
	if code := Main(ctx, []string{"export", "--nats-url", src.ClientURL()}, &export, &errb); code != 0 {
		t.Fatalf("export: exit %d: %s", code, errb.String())
	}
	file := filepath.Join(t.TempDir(), "all.jsonl")
	if err := os.WriteFile(file, export.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// storeOnServer is an embedded server and the log store on it.
func storeOnServer(t *testing.T) (*server.Server, *logstore.Store) {
	t.Helper()
	s := natstest.RunServer(t)
	st, err := logstore.Open(context.Background(), natstest.Connect(t, s), logstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return s, st
}
