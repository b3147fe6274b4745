package projector

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/agentlog/agentlogtest"
	"github.com/sessionlog/sessionlog/pkg/agentlog/formats"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// TestSearchIndexesATermAtItsFirstEvent: a term a session repeats is
// indexed once, at the first event holding it (what a search reads: the
// hit's seq, and that the session holds the term); a term first seen later
// is indexed at that event; and the terms a session remembers as indexed
// stay within maxSessionTerms however many words it writes.
func TestSearchIndexesATermAtItsFirstEvent(t *testing.T) {
	f, db := newTestFolder(t, DefaultConfig().CacheSessions)
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
		if n := f.cache[id].terms.len(); n > maxSessionTerms {
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
	f, db := newTestFolder(t, DefaultConfig().CacheSessions)
	f.catchingUp, f.snapEach = false, 1
	const id = "snap-1"
	ctx := context.Background()
	fold := folderOf(t, f, id)
	fold(schema.TypeSessionCreated, `{"title":"quokka"}`)
	fold(schema.TypeTurnStarted, `{}`)
	fold(schema.TypeMessageUser, `{"content":"the quokka and a wombat"}`)
	commit(t, f)
	want := fmt.Sprint(f.cache[id].terms)
	if f.cache[id].terms.len() < 5 {
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

// TestIndexSearchReadsMessagesAsDecoded: the fold finds a message's text
// in its data without decoding it again (messageContent), and cuts it
// into terms through a table of their hashes (termSet). The keys it
// writes for each shape of data are those of the text searchText decodes
// (the member named exactly content, whatever else the data holds), cut into terms as the index defines them: maximal runs of
// letters and digits, lower-cased, 2 to 48 bytes, the first 512 distinct
// ones of the first 32 KiB of text.
func TestIndexSearchReadsMessagesAsDecoded(t *testing.T) {
	var many strings.Builder
	for i := range 700 {
		fmt.Fprintf(&many, "w%d w%d, ", i, i/2)
	}
	long := strings.Repeat("abc ", 9000) + "tail"
	cases := []string{
		`{"content":"Plain words, plain WORDS and 42 numbers"}`,
		`{"content":"with \"escapes\"\nand a new line \u00e9t\u00e9"}`,
		`{"content":"ünïcödé Wörter ΑΒΓ straße"}`,
		`{"content":"pair \ud83d\ude00x, lone \ud83dy and \ude00z, \u00c9T\u00c9 \/ \\ end"}`,
		"{\"content\":\"raw \xff\xfe invalid bytes\\n\"}",
		`{"content":[{"type":"text","text":"blocks here"},{"type":"image","source":{"data":"abc"}}]}`,
		`{"content":{"nested":["a b",{"k":"deep value"}],"n":1}}`,
		`{"content":"kept","usage":{"input_tokens":3}}`,
		`{"usage":{"input_tokens":3},"content":"kept"}`,
		`{"content":"first","content":"last wins"}`,
		`{"Content":"spelled otherwise"}`,
		`{"cont\u0065nt":"an escaped key"}`,
		`{ "content" : "spaced out" }`,
		`{"content":"x" }`,
		`{"content":null}`,
		`{"content":123}`,
		`{"content":true}`,
		`{"content":""}`,
		`{"content":"a"}`,
		`{}`,
		`null`,
		`[1,2]`,
		`"a string"`,
		`{"content":` + string(mustJSON(t, many.String())) + `}`,
		`{"content":` + string(mustJSON(t, long)) + `}`,
	}
	const id = "shapes-1"
	for _, typ := range []string{schema.TypeMessageUser, schema.TypeMessageAssistant} {
		for _, data := range cases {
			if !json.Valid([]byte(data)) {
				t.Fatalf("invalid test data %s", data)
			}
			ev := &schema.Envelope{SchemaVersion: schema.Version, SessionID: id, Seq: 3, EventID: "e3", Type: typ, Data: json.RawMessage(data)}
			f, _ := newTestFolder(t, 2)
			f.open()
			en := &entry{id: id}
			f.indexSearch(en, ev, true)
			got := f.batch.Keys()
			f.batch.Abandon()
			var want [][]byte
			for _, term := range referenceTerms(searchText(id, ev)) {
				want = append(want, store.AppendSearchKey(nil, []byte(term), id, 3))
			}
			if strings.Contains(data, `"usage"`) && len(want) == 0 {
				// An assistant message imported from Claude Code carries
				// its model and usage beside its content: its text is
				// searched all the same.
				t.Fatalf("%s %.80s: no terms for the content", typ, data)
			}
			if len(got) != len(want) {
				t.Fatalf("%s %.80s: %d keys, want %d", typ, data, len(got), len(want))
			}
			for i := range got {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("%s %.80s: key %d is %q, want %q", typ, data, i, got[i], want[i])
				}
			}
			if en.terms.len() != len(want) {
				t.Fatalf("%s %.80s: %d terms noted, want %d", typ, data, en.terms.len(), len(want))
			}
		}
	}
}

// referenceTerms cuts s into search terms by the definition, without the
// index's table.
func referenceTerms(s string) []string {
	if len(s) > maxIndexText {
		s = s[:maxIndexText]
	}
	seen := map[string]bool{}
	var out []string
	for _, w := range strings.FieldsFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		w = strings.ToLower(w)
		if len(w) < 2 || len(w) > maxTermBytes || seen[w] || len(out) == maxEventTerms {
			continue
		}
		seen[w] = true
		out = append(out, w)
	}
	return out
}

// TestAppendUnquotedIsUnmarshal: the text of a message's string is what
// json.Unmarshal makes of it, escapes, surrogates and invalid UTF-8
// included, and a string json.Unmarshal refuses is refused.
func TestAppendUnquotedIsUnmarshal(t *testing.T) {
	cases := []string{
		`""`, `"plain"`, `"a\"b\\c\/d\be\ff\ng\rh\ti"`, `"\u00e9\u00E9 caf\u00e9"`,
		`"\ud83d\ude00 pair"`, `"\ud83d lone high"`, `"\ude00 lone low"`, `"\ud83d\u0041 high then A"`,
		`"\ud83d\ud83d\ude00 high, pair"`, `"\u0000 nul"`, `"\u2028\u2029"`, "\"raw \xff\xfe invalid\"",
		"\"cut \xe2\x82\"", `"ünïcödé"`, `"\x"`, `"\u12"`, `"\u12g4"`, `"a\"`, "\"tab\tinside\"", `"quote"inside"`,
		`"\'"`, `"`, `x`,
	}
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"a", "Z", "9", " ", `\n`, `\"`, `\\`, `\u00e9`, `\ud83d`, `\ude00`, `\uD83D\uDE00`, "é", "\xff", "\xe2\x82", "€", `\/`, `\t`}
	for range 2000 {
		var sb strings.Builder
		sb.WriteByte('"')
		for range rng.IntN(20) {
			sb.WriteString(pieces[rng.IntN(len(pieces))])
		}
		sb.WriteByte('"')
		cases = append(cases, sb.String())
	}
	for _, c := range cases {
		var want string
		err := json.Unmarshal([]byte(c), &want)
		got, ok := appendUnquoted([]byte("kept "), []byte(c))
		if ok != (err == nil) {
			t.Fatalf("%q: ok %v, json.Unmarshal error %v", c, ok, err)
		}
		if ok && string(got) != "kept "+want {
			t.Fatalf("%q: %q, want %q", c, got[5:], want)
		}
	}
}

// TestAppendTextIsMessageText: the text read from content blocks (any
// array or object) is messageText's, which decodes them into a tree of
// maps: strings in order, object members by key, a repeated key's last
// value, escaped keys, the cut at maxIndexText; white space is left to
// messageText.
func TestAppendTextIsMessageText(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	pieces := []string{"a", "Zed", "9", " ", `\n`, `\"`, `\\`, `\u00e9`, `\ud83d`, `\uD83D\uDE00`, "é", "\xff", "€"}
	str := func() string {
		var sb strings.Builder
		sb.WriteByte('"')
		for range rng.IntN(6) {
			sb.WriteString(pieces[rng.IntN(len(pieces))])
		}
		sb.WriteByte('"')
		return sb.String()
	}
	keys := []string{`"text"`, `"type"`, `"a"`, `"b"`, `"t\u0065xt"`, `"\u00e9"`, `"é"`, "\"\xff\"", `""`}
	var value func(depth int) string
	value = func(depth int) string {
		n := rng.IntN(10)
		if depth > 4 {
			n %= 5
		}
		switch n {
		case 0, 1:
			return str()
		case 2:
			return []string{"1", "-2.5e3", "true", "false", "null"}[rng.IntN(5)]
		case 3:
			return strconv.Quote(strings.Repeat("long words ", 400+rng.IntN(400)))
		case 4, 5, 6:
			var parts []string
			for range rng.IntN(5) {
				parts = append(parts, value(depth+1))
			}
			return "[" + strings.Join(parts, ",") + "]"
		}
		var parts []string
		for range rng.IntN(5) {
			parts = append(parts, keys[rng.IntN(len(keys))]+":"+value(depth+1))
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	cases := []string{`[]`, `{}`, `[{"type":"text","text":"Where is it?"}]`, `{"b":"2","a":"1","b":"3"}`, `[ "spaced" ]`, `{"a": "spaced"}`, `[1,{"x":[true,null,"deep"]}]`}
	fallbacks := 0
	for range 3000 {
		cases = append(cases, value(0))
	}
	for _, c := range cases {
		if !json.Valid([]byte(c)) || (c[0] != '[' && c[0] != '{') {
			continue
		}
		got, ok := appendText(nil, []byte(c))
		if !ok {
			fallbacks++
			continue
		}
		if want := messageText(json.RawMessage(c)); string(got) != want {
			t.Fatalf("%.200s:\n got %.200q\nwant %.200q", c, got, want)
		}
	}
	if fallbacks != 2 {
		t.Fatalf("%d values left to messageText, want the 2 with white space", fallbacks)
	}
}

// The assistant messages of a real Claude Code transcript (which carry
// their model and usage beside their content) are indexed: their terms
// are written, as for any other message.
func TestIndexSearchRealAssistantMessages(t *testing.T) {
	f0, ok := formats.Lookup("claude-code")
	if !ok {
		t.Fatal("no claude-code format")
	}
	paths, err := filepath.Glob("../../pkg/agentlog/testdata/real/cc/*.jsonl")
	if err != nil || len(paths) == 0 {
		t.Fatalf("real transcripts: %v %v", paths, err)
	}
	withUsage, indexed := 0, 0
	for _, p := range paths {
		var c agentlogtest.Collect
		if _, err := agentlog.ReadFile(f0, p, agentlog.Options{}, &c); err != nil {
			t.Fatal(err)
		}
		for _, s := range c.Sessions {
			for i := range s.Events {
				ev := &s.Events[i]
				if ev.Type != schema.TypeMessageAssistant || !bytes.Contains(ev.Data, []byte(`"usage"`)) {
					continue
				}
				withUsage++
				f, _ := newTestFolder(t, 2)
				f.open()
				f.indexSearch(&entry{id: ev.SessionID}, ev, true)
				if len(f.batch.Keys()) > 0 {
					indexed++
				}
				f.batch.Abandon()
			}
		}
	}
	t.Logf("%d assistant messages with usage, %d of them indexed", withUsage, indexed)
	if withUsage == 0 || indexed == 0 {
		t.Fatalf("%d assistant messages with usage in the real transcripts, %d indexed", withUsage, indexed)
	}
}

// TestIndexSessionCreatedFromMeta: the fold indexes a session/created
// event it has just folded from the state's meta, which holds the data
// decoded; the keys are those of searchText's decode of the data.
func TestIndexSessionCreatedFromMeta(t *testing.T) {
	const id = "Created-1"
	for _, data := range []string{
		`{}`,
		`{"title":"Quokka \u00e9t\u00e9 \"quoted\"\nline","agent":"claude-code","workspace":"/home/x/proj-2"}`,
		`{"title":"t","labels":{"zeta":"Last one","alpha":"first","mid":"m m"}}`,
		`{"agent":"codex","parent":{"sessionId":"parent-9","seedLength":3,"depth":1},"owner":{"tenant":"t1","agent":"A"},"grants":["g1","g2"]}`,
	} {
		ev := &schema.Envelope{SchemaVersion: schema.Version, SessionID: id, Seq: 1, EventID: "e1",
			Time: time.Unix(1, 0).UTC(), Type: schema.TypeSessionCreated, Data: json.RawMessage(data)}
		keys := func(en *entry) [][]byte {
			f, _ := newTestFolder(t, 2)
			f.open()
			f.indexSearch(en, ev, true)
			defer f.batch.Abandon()
			return f.batch.Keys()
		}
		folded := &entry{id: id, st: session.New(id)}
		if err := folded.st.Apply(ev); err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		got, want := keys(folded), keys(&entry{id: id})
		if len(want) == 0 || fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
			t.Fatalf("%s: keys from the meta %q, want %q", data, got, want)
		}
	}
}
