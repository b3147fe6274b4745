package projector

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
	"github.com/sessionlog/sessionlog/services/projector/httpapi"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// BenchmarkSearch times the search index of a fleet of 10,000 sessions
// (200,000 events, two turns each, folded into a fresh store): a page of
// 20 for a word every session holds, for a word few do, and for two words
// no session holds together (the whole driving list is examined up to
// the scan budget). index-bytes/event is what the index adds to the
// store, fold-ns/event the fold with it.
func BenchmarkSearch(b *testing.B) {
	const sessions, events = 10_000, 200_000
	fleet := gen.NewFleet("s", sessions, 7, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	// Every session cached: no restore reads the (absent) log.
	f, db := newTestFolder(b, sessions+1)
	ctx := context.Background()
	batch := DefaultConfig().MaxBatchEvents
	t0 := time.Now()
	for i := range events {
		e := fleet.Next()
		m := storedMsg(b, &e, uint64(i+1))
		if err := f.handle(ctx, &m); err != nil {
			b.Fatal(err)
		}
		if f.events >= batch {
			if err := f.flush(); err != nil {
				b.Fatal(err)
			}
		}
	}
	commit(b, f)
	fold := time.Since(t0)
	var indexBytes int
	it, _ := db.Iter([]byte("vq"))
	for ok := it.First(); ok; ok = it.Next() {
		indexBytes += len(it.Key()) + len(it.Value())
	}
	it.Close()
	s := &Service{db: db}
	for _, c := range []struct {
		name  string
		terms []string
	}{
		{"CommonWord", []string{"task"}},
		{"RareWord", []string{"s-9999"}},
		{"NoSessionHoldsBoth", []string{"please", "zebra"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if err := s.view(func(rd reader) error {
					// As a search's page reads it (httpapi): the
					// sessions holding every term, up to a page.
					hits := 0
					return rd.snap.Search(c.terms, "", "", "", func(s store.SearchSession) bool {
						if s.HoldsAll() {
							hits++
						}
						return hits < httpapi.DefaultSearchLimit
					})
				}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(indexBytes)/events, "index-bytes/event")
			b.ReportMetric(float64(fold.Nanoseconds())/events, "fold-ns/event")
		})
	}
}

// BenchmarkIndexMessage times the search indexing of one message event of
// a session that indexed its words before (the usual case: a session's
// words repeat, and the set of its indexed terms answers for them): the
// text found in the data and cut into terms, each looked up. Short is a
// line of the load generator's, Prose about 4 KiB of plain text of some
// 300 distinct words, Escaped the same with newlines and quotes (a JSON
// string with escapes), Blocks the same as a list of content blocks.
func BenchmarkIndexMessage(b *testing.B) {
	var words []string
	for i := range 300 {
		words = append(words, "w"+strconv.Itoa(i*7919%10007)+"ord")
	}
	var prose, escaped strings.Builder
	for i := 0; prose.Len() < 4<<10; i++ {
		w := words[(i*31)%len(words)]
		prose.WriteString(w + " ")
		escaped.WriteString(w)
		if i%9 == 0 {
			escaped.WriteString("\n\"q\" ")
		} else {
			escaped.WriteString(" ")
		}
	}
	blocks, _ := json.Marshal([]map[string]string{{"type": "text", "text": prose.String()}})
	for _, c := range []struct {
		name    string
		content json.RawMessage
	}{
		{"Short", mustJSON(b, "please do task 12")},
		{"Prose", mustJSON(b, prose.String())},
		{"Escaped", mustJSON(b, escaped.String())},
		{"Blocks", blocks},
	} {
		b.Run(c.name, func(b *testing.B) {
			f, _ := newTestFolder(b, 2)
			f.open()
			data, _ := json.Marshal(schema.Message{Content: c.content})
			body, err := schema.Encode(&schema.Envelope{SchemaVersion: schema.Version, SessionID: "bench-index", Seq: 2,
				EventID: "e2", Type: schema.TypeMessageUser, Time: time.Unix(1, 0).UTC(), Data: data})
			if err != nil {
				b.Fatal(err)
			}
			ev, _, err := schema.DecodeCanonicalShared(body)
			if err != nil {
				b.Fatal(err)
			}
			en := &entry{id: "bench-index"}
			f.indexSearch(en, &ev, true)
			if en.terms.len() == 0 {
				b.Fatal("nothing indexed")
			}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				f.indexSearch(en, &ev, true)
			}
		})
	}
}

func mustJSON(tb testing.TB, v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// BenchmarkIndexSessionCreated indexes a session/created event: Meta as
// the fold does, from the state's meta it has just folded, and Decode
// from its data decoded again (searchText, what the fold did before).
func BenchmarkIndexSessionCreated(b *testing.B) {
	const id = "bench-created-1"
	ev := &schema.Envelope{SchemaVersion: schema.Version, SessionID: id, Seq: 1, EventID: "e1", Time: time.Unix(1, 0).UTC(),
		Type: schema.TypeSessionCreated, Data: json.RawMessage(`{"title":"Fix the flaky build","agent":"claude-code",` +
			`"labels":{"team":"infra","repo":"sessionlog"},"workspace":"/home/dev/sessionlog"}`)}
	st := session.New(id)
	if err := st.Apply(ev); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		st   *session.State
	}{{"Meta", st}, {"Decode", nil}} {
		b.Run(c.name, func(b *testing.B) {
			f, _ := newTestFolder(b, 2)
			f.open()
			b.ReportAllocs()
			for b.Loop() {
				// A fresh entry: every term is new, as in a new session.
				f.indexSearch(&entry{id: id, st: c.st}, ev, false)
			}
		})
	}
}
