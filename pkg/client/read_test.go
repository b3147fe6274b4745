package client_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/session"
	"github.com/sessionlog/sessionlog/services/writer"
)

// A session longer than a page loads through sessions.api.read, page by
// page, into the state a fold of every stored event gives.
func TestLoadPages(t *testing.T) {
	const n = 2500
	s, want := longSession(t, n)
	ctx := context.Background()
	got, err := s.c.LoadState(ctx, "long")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(want)
	if got.LastSeq != n || string(a) != string(b) {
		t.Fatalf("loaded lastSeq %d, want %d; states equal: %v", got.LastSeq, n, string(a) == string(b))
	}
	r, err := s.c.Read(ctx, api.ReadRequest{SessionID: "long", AfterSeq: 2499})
	if err != nil || len(r.Events) != 1 || r.More || r.LastSeq != n {
		t.Fatalf("last page: %+v %v", r, err)
	}
	if _, err := s.c.Read(ctx, api.ReadRequest{SessionID: "nobody"}); err == nil || client.CodeOf(err) != api.CodeNotFound {
		t.Fatalf("missing session: %v", err)
	}
	if _, err := s.c.Open(ctx, "long", "agent-1"); err != nil {
		t.Fatal(err)
	}
}

// shortPages answers every read with fewer events than the store's page,
// a different number each time (as a reply cut by its byte limit is), and
// counts the reads.
type shortPages struct {
	r     writer.StoreReader
	mu    sync.Mutex
	reads int
}

func (p *shortPages) Read(ctx context.Context, req api.ReadRequest) (api.ReadReply, error) {
	p.mu.Lock()
	p.reads++
	p.mu.Unlock()
	r, err := p.r.Read(ctx, req)
	if err != nil {
		return r, err
	}
	if n := int(req.AfterSeq*7%300) + 1; n < len(r.Events) {
		r.Events, r.More = r.Events[:n], true
	}
	return r, nil
}

// Load asks for pages ahead of the one it folds, guessing where each
// starts from the first page's size; pages that come back shorter than
// guessed must not leave a gap or fold an event twice.
func TestLoadShortPages(t *testing.T) {
	const n = 3000
	s, want := longSession(t, n)
	ctx := context.Background()
	for _, r := range []client.Reader{
		&shortPages{r: writer.StoreReader{Store: s.st}},
		writer.StoreReader{Store: s.st, MaxBytes: 64 << 10},
	} {
		got, err := client.Load(ctx, r, "long")
		if err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(want)
		if got.LastSeq != n || string(a) != string(b) {
			t.Fatalf("%T: loaded lastSeq %d, want %d; states equal: %v", r, got.LastSeq, n, string(a) == string(b))
		}
	}
}

// longSession stores a session "long" of n events and returns the stack
// and the state a fold of every stored event gives.
func longSession(t *testing.T, n int) (*stack, *session.State) {
	t.Helper()
	srv := natstest.RunServer(t)
	s := newStack(t, srv.ClientURL(), logstore.Config{})
	if _, err := gen.Seed(context.Background(), s.st, "long", n, 500); err != nil {
		t.Fatal(err)
	}
	want := session.New("long")
	for _, e := range storedEvents(t, s.st, "long") {
		if err := want.Apply(&e.Envelope); err != nil {
			t.Fatal(err)
		}
	}
	return s, want
}
