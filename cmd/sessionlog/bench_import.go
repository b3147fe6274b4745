package main

import (
	"context"
	"io"

	"github.com/sessionlog/sessionlog/cmd/sessionlog/internal/bench"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// `sessionlog bench import [--quick]`: a generated directory of Claude
// Code session files imported into an embedded server through the writer,
// as `import --from claude-code` runs it, against two floors in one run:
//   - decode_floor: reading and mapping the same files, appending nothing;
//   - baseline: the raw store floor, the very messages the import stored
//     (body bytes and logstore's headers) published again straight to
//     JetStream on the same server, in atomic batches of --batch, --jobs
//     sessions at once (bench.ImportFloor).
//
// The import runs as a child process, `sessionlog import --from
// claude-code` of this binary against the server over TCP, as a user runs
// it; this process holds the embedded server and the writer. The files
// are imported in --rounds parts, each followed by its floor, so that on
// a shared machine both see the same load; value and baseline are events
// over the summed times. cpu_us_per_ev and floor_cpu_us_per_ev are the
// CPU time per event in each (the child's and this process's), which a
// shared machine disturbs less than the rates; importer_cpu_us_per_ev
// is the importer process's part of cpu_us_per_ev. peak_rss_mib is the
// importer's own peak resident set (the child's, largest of the rounds):
// it stays flat in the number of files. server_peak_rss_mib is this
// process's (server and writer) during the import rounds, which grows
// with the data: the server's stream caches hold the events of the
// import and, by the last round, of the earlier rounds' floors too.
// decode_peak_rss_mib is the mapping's alone, before the server starts.
func runBenchImport(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("bench import")
	fs.SetOutput(stdout)
	quick := fs.Bool("quick", false, "100 files of about 100 KB (under a minute)")
	files := fs.Int("files", 1000, "session files to generate")
	turns := fs.Int("turns", 40, "turns per file (about 2.5 KB each)")
	batch := fs.Int("batch", 500, "events per append")
	jobs := fs.Int("jobs", 4, "appends in flight at once (import's default), and sessions at once in the floor")
	rounds := fs.Int("rounds", 5, "import a part of the files, then run the floor on it, this many times")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run (the import rounds and the floor rounds; --rounds 1 and the floor comes after the whole import) to this file")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *quick {
		*files = 100
	}
	if *rounds < 1 || *files < 1 || *jobs < 1 || *batch < 1 || *batch > schema.MaxBatchEvents {
		return usageErrorf("--rounds, --files and --jobs must be >= 1, --batch 1..%d", schema.MaxBatchEvents)
	}
	return bench.Import(ctx, bench.ImportConfig{Files: *files, Turns: *turns, Batch: *batch, Jobs: *jobs, Rounds: *rounds, CPUProfile: *cpuProfile}, stdout)
}
