package projector

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector/httpapi"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// BenchmarkAgentList times the first page of 50 of /v1/sessions for a
// token of one agent of a tenant of 5,000 sessions owned by 25 agents in
// turn (200 each), as the list reads it now (Index: the merge of its
// agents' indexes, store.Snapshot.AgentsList) and as it read it before
// (TenantWalk: the tenant's index, each session's summary read and judged
// by sees, then the summaries of those it sees). entries/op and summaries/op are what
// one page read.
func BenchmarkAgentList(b *testing.B) {
	const sessions, agents, limit = 5000, 25, 50
	f, db := newTestFolder(b, sessions+1)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range sessions {
		data, _ := json.Marshal(schema.SessionCreated{Title: "t", Owner: &schema.Owner{Tenant: "acme", Agent: fmt.Sprintf("a%02d", i%agents)}})
		e := schema.Envelope{SchemaVersion: schema.Version, SessionID: fmt.Sprintf("_Tacme_s%05d", i), Seq: 1, EventID: fmt.Sprint(i),
			Time: t0.Add(time.Duration(i) * time.Millisecond), Type: schema.TypeSessionCreated, Data: data}
		m := storedMsg(b, &e, uint64(i+1))
		if err := f.handle(ctx, &m); err != nil {
			b.Fatal(err)
		}
	}
	commit(b, f)
	s := &Service{db: db}
	who := []string{"a07"}
	var reads store.ListReads // what a page read
	for _, c := range []struct {
		name string
		page func(rd reader) ([]store.Summary, store.ListReads, error)
	}{
		{"Index", func(rd reader) ([]store.Summary, store.ListReads, error) {
			sums, _, n, err := rd.snap.AgentsList("acme", who, "", nil, limit, func(id string, sum *store.Summary) bool {
				return httpapi.Sees("acme", who, id, sum)
			})
			return sums, n, err
		}},
		{"TenantWalk", func(rd reader) ([]store.Summary, store.ListReads, error) {
			keep := func(id string) bool {
				reads.Summaries++
				sum, err := rd.summary(id)
				return err == nil && httpapi.Sees("acme", who, id, sum)
			}
			sums, _, n, err := rd.snap.List("acme", "", nil, limit, keep)
			return sums, n, err
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				reads = store.ListReads{}
				err := s.view(func(rd reader) error {
					sums, n, err := c.page(rd)
					if err == nil && len(sums) != limit {
						err = fmt.Errorf("a page of %d sessions", len(sums))
					}
					reads.Add(n)
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(reads.Entries), "entries/op")
			b.ReportMetric(float64(reads.Summaries), "summaries/op")
		})
	}
}
