package store

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// viewsStore is a store holding the views of two sessions as the fold
// writes them: "a" (seqs 1..12, two rewinds of which the second abandons
// the first, and a third after them; stream seq 100+seq) and "ab" (seqs
// 1, 2 and 5: its id shares "a"'s bytes), a's summary and compaction,
// what is kept of the erased session "gone", a summary that does not
// decode ("bad"), the children "a-1", "a-2" and "b" of "a" and "x" of
// "ab", and the status index: "a" and "ab" active, "b" closed (and "c"
// of a status "activex").
func viewsStore(t *testing.T) (*DB, *Summary) {
	t.Helper()
	d, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	msg := func(text string) json.RawMessage { return json.RawMessage(`{"content":"` + text + `"}`) }
	rewound := func(to uint64) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"toEventId":"e%d","toSeq":%d}`, to, to))
	}
	events := []schema.Envelope{
		{Seq: 1, Type: schema.TypeSessionCreated, Data: json.RawMessage(`{}`)},
		{Seq: 2, Type: schema.TypeMessageUser, Data: msg("u1")},
		{Seq: 3, Type: schema.TypeMessageAssistant, Data: msg("a1")},
		{Seq: 4, Type: schema.TypeMessageUser, Data: msg("u2")},
		{Seq: 5, Type: schema.TypeMessageAssistant, Data: msg("a2")},
		{Seq: 6, Type: schema.TypeContextRewound, Data: rewound(3)},
		{Seq: 7, Type: schema.TypeMessageUser, Data: msg("u3")},
		{Seq: 8, Type: schema.TypeContextRewound, Data: rewound(2)},
		{Seq: 9, Type: schema.TypeMessageAssistant, Data: msg("a3")},
		{Seq: 10, Type: schema.TypeMessageUser, Data: msg("u4")},
		{Seq: 11, Type: schema.TypeContextRewound, Data: rewound(9)},
		{Seq: 12, Type: schema.TypeMessageAssistant, Data: msg("a4")},
	}
	b := d.NewBatch()
	for i := range events {
		e := &events[i]
		e.SessionID = "a"
		b.Set(EventKey("a", e.Seq), nil, AppendEventValue(nil, 100+e.Seq, e, false))
	}
	for _, seq := range []uint64{1, 2, 5} {
		e := schema.Envelope{SessionID: "ab", Seq: seq, Type: schema.TypeMessageUser, Data: msg("x")}
		b.Set(EventKey("ab", seq), nil, AppendEventValue(nil, 200+seq, &e, false))
	}
	sum := &Summary{SessionID: "a", Status: "active", LastSeq: 12, LastStreamSeq: 112, Title: "t",
		CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), LastActivity: time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC),
		Owner: &schema.Owner{Tenant: "acme", Agent: "x"}, Grants: []string{"y"}, Turns: 1, Rewinds: 3}
	v, err := AppendSummary(nil, sum)
	if err != nil {
		t.Fatal(err)
	}
	b.Set(SummaryKey("a"), nil, v)
	b.Set(SummaryKey("bad"), nil, []byte(`{"sessionId":`))
	for _, c := range [][2]string{{"a", "a-2"}, {"a", "a-1"}, {"a", "b"}, {"ab", "x"}} {
		b.Set(ChildKey(c[0], c[1]), nil, nil)
	}
	for i, c := range [][2]string{{"active", "a"}, {"active", "ab"}, {"closed", "b"}, {"activex", "c"}} {
		b.Set(StatusKey(c[0], uint64(i), c[1]), nil, nil)
	}
	c, _ := json.Marshal(CompactionSummary{CompactionID: "c1", ThroughSeq: 3, EndSeq: 5, Summary: "so far"})
	b.Set(CompactionKey("a"), nil, c)
	o, _ := json.Marshal(ErasedOwner{Owner: &schema.Owner{Tenant: "acme", Agent: "z"}})
	b.SetInternal(ErasedOwnerKey("gone"), o)
	if err := b.Commit(Checkpoint{Version: "t"}); err != nil {
		t.Fatal(err)
	}
	return d, sum
}

// TestSnapshotTypedReads: the summary, the last compaction and what is
// kept of an erased session read back as they were written (nil when
// there is none, an error when the value does not decode); the event
// index gives the stream seq of one event, the last event at or before a
// seq, and the stream seqs of a range up to a limit (more: one follows in
// the range), of the session asked alone; the children of a session are
// its own, in id order, until the function says stop; a status counts
// its sessions alone.
func TestSnapshotTypedReads(t *testing.T) {
	d, want := viewsStore(t)
	snap := d.NewSnapshot()
	defer snap.Close()

	if sum, err := snap.Summary("a"); err != nil || !reflect.DeepEqual(sum, want) {
		t.Errorf("summary of a = %+v, %v; want %+v", sum, err, want)
	}
	if sum, err := snap.Summary("none"); sum != nil || err != nil {
		t.Errorf("summary of none = %+v, %v; want nil, nil", sum, err)
	}
	if sum, err := snap.Summary("bad"); sum != nil || err == nil {
		t.Errorf("summary of bad = %+v, %v; want nil and an error", sum, err)
	}
	if c, err := snap.Compaction("a"); err != nil || c == nil || *c != (CompactionSummary{CompactionID: "c1", ThroughSeq: 3, EndSeq: 5, Summary: "so far"}) {
		t.Errorf("compaction of a = %+v, %v", c, err)
	}
	if c, err := snap.Compaction("ab"); c != nil || err != nil {
		t.Errorf("compaction of ab = %+v, %v; want nil, nil", c, err)
	}
	if o, err := snap.ErasedOwner("gone"); err != nil || o == nil || o.Owner == nil || *o.Owner != (schema.Owner{Tenant: "acme", Agent: "z"}) || o.Grants != nil {
		t.Errorf("erased owner of gone = %+v, %v", o, err)
	}
	if o, err := snap.ErasedOwner("a"); o != nil || err != nil {
		t.Errorf("erased owner of a = %+v, %v; want nil, nil", o, err)
	}

	var children []string
	all := func(c string) bool { children = append(children, c); return true }
	if err := snap.Children("a", all); err != nil || !slices.Equal(children, []string{"a-1", "a-2", "b"}) {
		t.Errorf("children of a = %v, %v", children, err)
	}
	children = nil
	if err := snap.Children("a", func(c string) bool { children = append(children, c); return len(children) < 2 }); err != nil || !slices.Equal(children, []string{"a-1", "a-2"}) {
		t.Errorf("children of a up to the second = %v, %v", children, err)
	}
	children = nil
	if err := snap.Children("b", all); err != nil || children != nil {
		t.Errorf("children of b = %v, %v; want none", children, err)
	}
	for status, want := range map[string]int{"active": 2, "closed": 1, "paused": 0} {
		if n, err := snap.StatusCount(status); err != nil || n != want {
			t.Errorf("sessions %s = %d, %v; want %d", status, n, err, want)
		}
	}

	for _, c := range []struct {
		id       string
		seq, out uint64
	}{{"a", 4, 104}, {"a", 13, 0}, {"ab", 5, 205}, {"ab", 3, 0}, {"b", 1, 0}} {
		if ss, err := snap.StreamSeq(c.id, c.seq); err != nil || ss != c.out {
			t.Errorf("stream seq of %s/%d = %d, %v; want %d", c.id, c.seq, ss, err, c.out)
		}
	}
	for _, c := range []struct {
		id                 string
		seq, at, streamSeq uint64
	}{
		{"a", 0, 0, 0}, {"a", 1, 1, 101}, {"a", 5, 5, 105}, {"a", 12, 12, 112}, {"a", 99, 12, 112}, {"a", ^uint64(0), 12, 112},
		{"ab", 4, 2, 202}, {"ab", 5, 5, 205}, {"ab", ^uint64(0), 5, 205}, {"b", 3, 0, 0},
	} {
		if at, ss, err := snap.LastEvent(c.id, c.seq); err != nil || at != c.at || ss != c.streamSeq {
			t.Errorf("last event of %s at or before %d = %d (stream seq %d), %v; want %d (%d)", c.id, c.seq, at, ss, err, c.at, c.streamSeq)
		}
	}
	for _, c := range []struct {
		id         string
		from, last uint64
		limit      int
		want       []uint64
		more       bool
	}{
		{"a", 3, 7, 10, []uint64{103, 104, 105, 106, 107}, false},
		{"a", 3, 7, 5, []uint64{103, 104, 105, 106, 107}, false},
		{"a", 3, 7, 2, []uint64{103, 104}, true},
		{"a", 11, 99, 10, []uint64{111, 112}, false},
		{"a", 13, 99, 10, nil, false},
		{"ab", 1, 99, 10, []uint64{201, 202, 205}, false},
		{"ab", 3, 4, 10, nil, false},
	} {
		seqs, more, err := snap.StreamSeqs(c.id, c.from, c.last, c.limit)
		if err != nil || !slices.Equal(seqs, c.want) || more != c.more {
			t.Errorf("stream seqs of %s %d..%d (limit %d) = %v more %v, %v; want %v more %v", c.id, c.from, c.last, c.limit, seqs, more, err, c.want, c.more)
		}
	}
}

// TestSnapshotContextReads: Abandoned finds the ranges of the rewinds
// that stand in the context's chain back from last (a rewind another
// abandoned is not one of them), from seq from on; ContextPage serves
// the model-visible entries of a seq range but those skip names and the
// rewinds, in pages of about limit bytes that together are the whole.
func TestSnapshotContextReads(t *testing.T) {
	d, _ := viewsStore(t)
	snap := d.NewSnapshot()
	defer snap.Close()
	for _, c := range []struct {
		from, last uint64
		want       []Rewound
	}{
		{1, 12, []Rewound{{2, 8}, {9, 11}}},
		{1, 10, []Rewound{{2, 8}}},
		{1, 7, []Rewound{{3, 6}}},
		{1, 5, nil},
		{7, 12, []Rewound{{2, 8}, {9, 11}}},
		{9, 12, []Rewound{{9, 11}}},
		{12, 12, nil},
		{5, 4, nil},
	} {
		if got, err := snap.Abandoned("a", c.from, c.last); err != nil || !slices.Equal(got, c.want) {
			t.Errorf("abandoned of a %d..%d = %v, %v; want %v", c.from, c.last, got, err, c.want)
		}
	}

	seqs := func(es []ContextEntry) (out []uint64) {
		for _, e := range es {
			out = append(out, e.Seq)
		}
		return out
	}
	never := func(uint64) bool { return false }
	ranges, _ := snap.Abandoned("a", 1, 12)
	abandoned := func(seq uint64) bool {
		return slices.ContainsFunc(ranges, func(r Rewound) bool { return seq > r.After && seq < r.Before })
	}
	for _, c := range []struct {
		from, last uint64
		skip       func(uint64) bool
		want       []uint64
	}{
		{1, 12, never, []uint64{2, 3, 4, 5, 7, 9, 10, 12}},
		{1, 12, abandoned, []uint64{2, 9, 12}},
		{4, 9, never, []uint64{4, 5, 7, 9}},
		{13, 20, never, nil},
	} {
		entries, next, err := snap.ContextPage("a", c.from, c.last, 1<<20, c.skip)
		if err != nil || next != 0 || !slices.Equal(seqs(entries), c.want) {
			t.Errorf("context of a %d..%d = %v next %d, %v; want %v next 0", c.from, c.last, seqs(entries), next, err, c.want)
		}
		var paged []ContextEntry
		pages := 0
		for next := c.from; next != 0; pages++ {
			var es []ContextEntry
			if es, next, err = snap.ContextPage("a", next, c.last, 1, c.skip); err != nil {
				t.Fatal(err)
			}
			paged = append(paged, es...)
		}
		if !reflect.DeepEqual(paged, entries) || len(c.want) > 1 && pages < len(c.want) {
			t.Errorf("context of a %d..%d in pages of 1 byte = %v in %d pages; want %v in one page each", c.from, c.last, seqs(paged), pages, c.want)
		}
	}
	entries, _, err := snap.ContextPage("a", 2, 2, 1<<20, never)
	if want := (ContextEntry{Seq: 2, Type: schema.TypeMessageUser, Role: "user", Data: json.RawMessage(`{"content":"u1"}`)}); err != nil || len(entries) != 1 || !reflect.DeepEqual(entries[0], want) {
		t.Errorf("context entry 2 = %+v, %v; want %+v", entries, err, want)
	}
}

// TestDBStreamSeqs: the committed store gives the stream seqs of a
// session's indexed events in a seq range, in seq order, every one of
// them, of the session asked alone, and what was committed last.
func TestDBStreamSeqs(t *testing.T) {
	d, _ := viewsStore(t)
	for _, c := range []struct {
		id         string
		from, last uint64
		want       []uint64
	}{
		{"a", 3, 7, []uint64{103, 104, 105, 106, 107}},
		{"a", 11, 99, []uint64{111, 112}},
		{"a", 1, 12, []uint64{101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112}},
		{"a", 13, 99, nil},
		{"ab", 1, 99, []uint64{201, 202, 205}},
		{"ab", 3, 4, nil},
		{"b", 1, 99, nil},
	} {
		if seqs, err := d.StreamSeqs(c.id, c.from, c.last); err != nil || !slices.Equal(seqs, c.want) {
			t.Errorf("stream seqs of %s %d..%d = %v, %v; want %v", c.id, c.from, c.last, seqs, err, c.want)
		}
	}
	e := schema.Envelope{SessionID: "ab", Seq: 3, Type: schema.TypeMessageUser, Data: json.RawMessage(`{"content":"y"}`)}
	b := d.NewBatch()
	b.Set(EventKey("ab", 3), nil, AppendEventValue(nil, 203, &e, false))
	if err := b.Commit(Checkpoint{Version: "t2"}); err != nil {
		t.Fatal(err)
	}
	if seqs, err := d.StreamSeqs("ab", 1, 99); err != nil || !slices.Equal(seqs, []uint64{201, 202, 203, 205}) {
		t.Errorf("stream seqs of ab after a commit = %v, %v; want [201 202 203 205]", seqs, err)
	}
}
