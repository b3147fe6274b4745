package projector

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// TestSearchIndexesATermAtItsFirstEvent: a term a session repeats is
// indexed once, at the first event holding it (what a search reads: the
// hit's seq, and that the session holds the term); a term first seen later
// is indexed at that event; and the terms a session remembers as indexed
// stay within maxSessionTerms however many words it writes.
func TestSearchIndexesATermAtItsFirstEvent(t *testing.T) {
	f, db := newTestFolder(t, DefaultCacheSessions)
	const id = "once-1"
	fold := folderOf(t, f, id)
	fold(schema.TypeSessionCreated, `{"title":"quokka"}`)
	fold(schema.TypeTurnStarted, `{}`)
	fold(schema.TypeMessageUser, `{"content":"the quokka and the quokka"}`)
	fold(schema.TypeMessageUser, `{"content":"a wombat, the quokka"}`)
	commit(t, f)
	seqsOf := func(term string) []uint64 {
		t.Helper()
		p := store.SearchSessionPrefix(term, id)
		it, err := db.Iter(p)
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		var out []uint64
		for ok := it.First(); ok; ok = it.Next() {
			_, s, _ := store.SearchEntry(store.SearchTermPrefix(term), it.Key())
			out = append(out, s)
		}
		return out
	}
	for term, want := range map[string]string{"quokka": "[1]", "the": "[3]", "wombat": "[4]", "once": "[1]"} {
		if got := fmt.Sprint(seqsOf(term)); got != want {
			t.Errorf("term %q indexed at seqs %s, want %s", term, got, want)
		}
	}

	// Many distinct words: the session remembers at most maxSessionTerms.
	var words []string
	for i := range 3 * maxSessionTerms {
		words = append(words, fmt.Sprintf("w%d", i))
	}
	for i := 0; i < len(words); i += 100 {
		fold(schema.TypeMessageUser, `{"content":`+strconv.Quote(strings.Join(words[i:min(i+100, len(words))], " "))+`}`)
		if n := len(f.cache[id].terms); n > maxSessionTerms {
			t.Fatalf("the session remembers %d indexed terms, more than %d", n, maxSessionTerms)
		}
	}
	commit(t, f)
	it, err := db.Iter(store.SearchPrefix())
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if bytes.Contains(it.Key(), []byte("\x00"+id+"\x00")) {
			n++
		}
	}
	if n < len(words) {
		t.Fatalf("%d search keys, fewer than the %d distinct words", n, len(words))
	}
}

// TestSnapshotKeepsIndexedTerms: a session's indexed terms come back from
// its snapshot, whether the snapshot holds their hashes or (as written
// before) the terms themselves; a term indexed before the snapshot is not
// indexed again after the restore.
func TestSnapshotKeepsIndexedTerms(t *testing.T) {
	f, db := newTestFolder(t, DefaultCacheSessions)
	f.catchingUp, f.snapEach = false, 1
	const id = "snap-1"
	ctx := context.Background()
	fold := folderOf(t, f, id)
	fold(schema.TypeSessionCreated, `{"title":"quokka"}`)
	fold(schema.TypeTurnStarted, `{}`)
	fold(schema.TypeMessageUser, `{"content":"the quokka and a wombat"}`)
	commit(t, f)
	want := fmt.Sprint(f.cache[id].terms)
	if len(f.cache[id].terms) < 5 {
		t.Fatalf("terms %s: want the id, quokka, the, and, wombat", want)
	}
	restore := func() string {
		t.Helper()
		f.forget(id)
		if _, err := f.load(ctx, id); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(f.cache[id].terms)
	}
	if got := restore(); got != want {
		t.Fatalf("restored terms %s, want %s", got, want)
	}

	// The snapshot as written before: the terms by name.
	v, _, err := db.Get(store.SnapshotKey(id))
	if err != nil {
		t.Fatal(err)
	}
	var sn snapshot
	if err := json.Unmarshal(v, &sn); err != nil {
		t.Fatal(err)
	}
	sn.TermHashes, sn.Terms = nil, []string{strings.ToLower(id), "snap", "quokka", "the", "and", "wombat"}
	old, err := json.Marshal(&sn)
	if err != nil {
		t.Fatal(err)
	}
	b := db.NewBatch()
	b.SetInternal(store.SnapshotKey(id), old)
	if err := b.Commit(f.checkpoint()); err != nil {
		t.Fatal(err)
	}
	if got := restore(); got != want {
		t.Fatalf("terms restored from names %s, want %s", got, want)
	}

	// Indexed before the restore: no second key.
	fold(schema.TypeMessageUser, `{"content":"wombat"}`)
	commit(t, f)
	it, err := db.Iter(store.SearchSessionPrefix("wombat", id))
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	if n != 1 {
		t.Fatalf("wombat has %d keys, want 1", n)
	}
}

// folderOf returns a function that folds the session's next event (of
// type typ with data) through f, at seqs 1, 2, ... in turn "t1".
func folderOf(t *testing.T, f *folder, id string) func(typ, data string) {
	var seq uint64
	return func(typ, data string) {
		t.Helper()
		seq++
		ev := schema.Envelope{SchemaVersion: schema.Version, SessionID: id, Seq: seq, EventID: fmt.Sprintf("%s-%d", id, seq),
			Time: time.Date(2026, 1, 1, 0, 0, 0, int(seq), time.UTC), Type: typ, Data: json.RawMessage(data)}
		if typ != schema.TypeSessionCreated {
			ev.TurnID = "t1"
		}
		m := storedMsg(t, &ev, seq)
		if err := f.handle(context.Background(), &m); err != nil {
			t.Fatal(err)
		}
	}
}
