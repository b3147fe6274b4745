package clientlog_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/sessionlog/sessionlog/internal/clientlog"
	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/transfer"
	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/agentlog/claudecode"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// prepareOnly is the import's Log with every append prepared (encoded as
// the client sends it) and answered at once without being sent, and no
// session stored: what an import does on its side of the wire.
type prepareOnly struct{ clientlog.Log }

func (prepareOnly) Tail(context.Context, string) (uint64, string, error) { return 0, "", nil }
func (prepareOnly) Events(context.Context, string, uint64, func(schema.Envelope) error) error {
	return nil
}

func (p prepareOnly) Append(ctx context.Context, id string, expected uint64, events []schema.Envelope) (uint64, bool, error) {
	send, err := p.PrepareAppend(id, expected, events)
	if err != nil {
		return 0, false, err
	}
	return send(ctx)
}

func (p prepareOnly) PrepareAppend(id string, expected uint64, events []schema.Envelope) (func(context.Context) (uint64, bool, error), error) {
	if _, err := p.Log.PrepareAppend(id, expected, events); err != nil {
		return nil, err
	}
	last := expected + uint64(len(events))
	return func(context.Context) (uint64, bool, error) { return last, false, nil }, nil
}

// BenchmarkImportClient is the importer's side of `sessionlog bench
// import`: Claude Code files of the bench's shape (internal/gen) read,
// mapped and prepared as import's appends (clientlog.FileSink, batches
// of transfer.DefaultBatch), nothing sent. It reports the time per event;
// run it under callgrind (GOMAXPROCS=1) for the instructions per event.
func BenchmarkImportClient(b *testing.B) {
	const files, turns = 20, 40
	dir := filepath.Join(b.TempDir(), "projects")
	if _, err := gen.ClaudeCodeFiles(dir, files, turns); err != nil {
		b.Fatal(err)
	}
	paths, err := transfer.SessionFiles(claudecode.Format{}, []string{dir})
	if err != nil {
		b.Fatal(err)
	}
	nc := natstest.Connect(b, natstest.RunServer(b))
	l := clientlog.Log{Client: client.New(nc)}
	ctx := context.Background()
	events := 0
	b.ReportAllocs()
	for b.Loop() {
		for _, p := range paths {
			sink := clientlog.FileSink(ctx, l, p, transfer.DefaultBatch, nil)
			sink.Log, sink.InFlight = prepareOnly{l}, make(chan struct{}, transfer.DefaultJobs)
			res, err := sink.ReadFile(claudecode.Format{}, p, agentlog.Options{}, nil)
			if err != nil {
				b.Fatal(err)
			}
			for _, s := range res.Sessions {
				events += s.Events
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(events), "ns/event")
}
