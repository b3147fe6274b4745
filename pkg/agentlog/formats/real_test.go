package formats_test

import (
	"path/filepath"
	"testing"

	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/agentlog/agentlogtest"
	"github.com/sessionlog/sessionlog/pkg/agentlog/claudecode"
	"github.com/sessionlog/sessionlog/pkg/agentlog/codex"
	"github.com/sessionlog/sessionlog/pkg/agentlog/pi"
)

// real are the real transcripts of each format (testdata/real/README.md).
var real = []struct {
	dir string
	f   agentlog.Format
}{
	{"cc", claudecode.Format{}},
	{"codex", codex.Format{}},
	{"pi", pi.Format{}},
}

var all = []agentlog.Format{claudecode.Format{}, codex.Format{}, pi.Format{}}

func realFiles(t *testing.T, dir string) []string {
	return agentlogtest.Files(t, filepath.Join("..", "testdata", "real", dir, "*.jsonl"))
}

// TestRealFilesExportToTheirOwnFormat: each real transcript exported to
// its own format is the file, line for line deep-equal as JSON values, and
// nothing more, though a codex file ends with a call without output and
// the pi file has calls without results.
func TestRealFilesExportToTheirOwnFormat(t *testing.T) {
	for _, r := range real {
		for _, path := range realFiles(t, r.dir) {
			t.Run(r.dir+"/"+filepath.Base(path), func(t *testing.T) { agentlogtest.CheckOwnExport(t, r.f, path) })
		}
	}
}

// TestRealFilesRoundTrip: each real transcript exported to every format
// from its events and imported again keeps its model-visible context, its
// calls paired as they were.
func TestRealFilesRoundTrip(t *testing.T) {
	for _, r := range real {
		for _, path := range realFiles(t, r.dir) {
			for _, to := range all {
				t.Run(r.dir+"/"+to.Name()+"/"+filepath.Base(path), func(t *testing.T) { agentlogtest.CheckRoundTrip(t, r.f, path, to) })
			}
		}
	}
}
