package agentlog_test

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/agentlog/agentlogtest"
	"github.com/sessionlog/sessionlog/pkg/agentlog/formats"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// realFiles are the transcripts of testdata/real by format name.
func realFiles(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for dir, name := range map[string]string{"cc": "claude-code", "codex": "codex", "pi": "pi"} {
		files, err := filepath.Glob(filepath.Join("testdata", "real", dir, "*.jsonl"))
		if err != nil || len(files) == 0 {
			t.Fatalf("testdata/real/%s: %v %v", dir, files, err)
		}
		out[name] = files
	}
	return out
}

// TestRealFilesPrefixMapsToPrefix: on every real transcript, the first k
// lines of the file (and the first k lines followed by half of the next,
// a line being written) map to a prefix of the events of the whole file,
// for every k (a long file: a sample of them), whatever the file's
// modification time, in one session: what a file maps to depends only on the
// lines up to each one, so a file that grows is never "rewritten".
func TestRealFilesPrefixMapsToPrefix(t *testing.T) {
	for name, files := range realFiles(t) {
		f, _ := formats.Lookup(name)
		for _, path := range files {
			t.Run(filepath.Base(path), func(t *testing.T) {
				data, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				mtime := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
				whole, res := readAt(t, f, filepath.Join(t.TempDir(), filepath.Base(path)), data, mtime)
				if len(res.Sessions) != 1 {
					t.Fatalf("%d sessions", len(res.Sessions))
				}
				for _, e := range whole {
					if e.Time.Before(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)) {
						t.Fatalf("seq %d has the time %v", e.Seq, e.Time)
					}
				}
				lines := bytes.SplitAfter(data, []byte("\n"))
				dir := t.TempDir()
				// Every k of the shorter files; of a long one every k
				// through 100, then about 100 more, spread over it (each
				// k maps the file again).
				step := max(1, (len(lines)-100)/100)
				for k := 1; k < len(lines); k++ {
					if k > 100 && k%step != 0 {
						continue
					}
					prefix := bytes.Join(lines[:k], nil)
					for _, torn := range []bool{false, true} {
						file := prefix
						if torn {
							next := lines[k]
							file = append(append([]byte(nil), prefix...), next[:len(next)/2]...)
						}
						// A file read while it grows has another
						// modification time each time.
						got, _ := readAt(t, f, filepath.Join(dir, filepath.Base(path)), file, mtime.Add(time.Duration(k)*time.Hour))
						if len(got) > len(whole) || len(got) > 0 && !reflect.DeepEqual(got, whole[:len(got)]) {
							i := 0
							for i < len(got) && i < len(whole) && reflect.DeepEqual(got[i], whole[i]) {
								i++
							}
							t.Fatalf("the first %d lines (torn %v) are not a prefix of the file's events: at seq %d\n%s", k, torn,
								i+1, agentlogtest.Render(got[i:min(i+3, len(got))]))
						}
					}
				}
			})
		}
	}
}

// readAt writes data at path with the modification time mtime and maps it.
func readAt(t *testing.T, f agentlog.Format, path string, data []byte, mtime time.Time) ([]schema.Envelope, agentlog.Result) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	var c agentlogtest.Collect
	res, err := agentlog.ReadFile(f, path, agentlog.Options{}, &c)
	if err != nil {
		t.Fatal(err)
	}
	var out []schema.Envelope
	for _, s := range c.Sessions {
		out = append(out, s.Events...)
	}
	return out, res
}
