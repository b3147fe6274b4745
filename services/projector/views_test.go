package projector

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

// TestAppendContextEntryIsMarshal: the hand-written context entry is byte
// for byte what json.Marshal writes, on the load generator's traffic and on
// the values it must leave to json.Marshal.
func TestAppendContextEntryIsMarshal(t *testing.T) {
	fleet := gen.NewFleet("c", 5, 7, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var evs []schema.Envelope
	for range 400 {
		evs = append(evs, fleet.Next())
	}
	base := schema.Envelope{Seq: 9, Type: schema.TypeMessageUser, TurnID: "t1"}
	for _, d := range []string{
		``, `{}`, `{"content":"a b"}`, `{ "content":"a"}`, "{\"content\":\"a\"}\n", `{"content":"<b>"}`,
		`{"content":"a & b"}`, `{"content":"\u003c"}`, `{"content":"x\"<"}`, `{"content":"\\"}`, `{"content":"\\<"}`,
		"{\"content\":\"\u2028\"}", "{\"content\":\"\u2029x\"}", "{\"content\":\"\u2027\"}", `{"a":[1, 2]}`,
		`{"a":[1,2],"b":{"c":null}}`, `{"content":"é ü 漢"}`,
	} {
		e := base
		e.Data = json.RawMessage(d)
		evs = append(evs, e)
	}
	for _, id := range []string{"a<b", "a\"b", `a\b`, "é", "a b", "a\x7f"} {
		e := base
		e.TurnID = id
		evs = append(evs, e)
		e = base
		e.Type = schema.TypeToolRequested
		e.ToolCallID, e.AttemptID, e.Synthetic = id, id, true
		evs = append(evs, e)
	}
	visible := 0
	for i := range evs {
		var want []byte
		if role, data := contextOf(&evs[i]); role != "" {
			want = marshalContextEntry(&evs[i], role, data)
		}
		got := appendContextEntry([]byte("prefix"), &evs[i])
		if !bytes.Equal(got[len("prefix"):], want) {
			t.Fatalf("event %d %+v:\n got %s\nwant %s", i, evs[i], got[len("prefix"):], want)
		}
		if want != nil {
			visible++
		}
	}
	if visible < 100 {
		t.Fatalf("only %d model-visible events", visible)
	}
}

// canonicalEvents are events as the fold gets them: encoded as the writer
// stores them and decoded again, those whose body schema.DecodeCanonical
// finds canonical (the load generator's traffic, and data json.Marshal
// escapes or compacts, which Encode writes escaped and compact).
func canonicalEvents(tb testing.TB) []schema.Envelope {
	tb.Helper()
	fleet := gen.NewFleet("c", 5, 7, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var in []schema.Envelope
	for range 400 {
		in = append(in, fleet.Next())
	}
	base := schema.Envelope{SchemaVersion: schema.Version, SessionID: "s", Seq: 9, EventID: "e9", Time: time.Unix(1, 0).UTC(), Type: schema.TypeMessageUser, TurnID: "t1"}
	for _, d := range []string{
		`{"content":"<b>"}`, `{"content":"a & b"}`, `{ "content":"a"}`, "{\"content\":\"\u2028\"}", `{"content":"é ü 漢"}`, `{"a":[1, 2]}`,
	} {
		e := base
		e.Data = json.RawMessage(d)
		in = append(in, e)
	}
	for _, id := range []string{"a<b", "é", "a b"} {
		e := base
		e.Type = schema.TypeToolRequested
		e.ToolCallID, e.AttemptID = id, id
		e.Data = json.RawMessage(`{"name":"x"}`)
		in = append(in, e)
	}
	var out []schema.Envelope
	for i := range in {
		body, err := schema.Encode(&in[i])
		if err != nil {
			tb.Fatal(err)
		}
		e, canonical, err := schema.DecodeCanonical(body)
		if err != nil {
			tb.Fatal(err)
		}
		if canonical {
			out = append(out, e)
		}
	}
	if len(out) < 400 {
		tb.Fatalf("only %d canonical bodies", len(out))
	}
	return out
}

// TestContextEntryOfCanonicalIsMarshal: the context entry of an event of a
// canonical body, its data taken as it is without a scan, is byte for byte
// what json.Marshal writes.
func TestContextEntryOfCanonicalIsMarshal(t *testing.T) {
	for i, e := range canonicalEvents(t) {
		var want []byte
		if role, data := contextOf(&e); role != "" {
			want = marshalContextEntry(&e, role, data)
		}
		if got := appendContextEntryOf(nil, &e, true); !bytes.Equal(got, want) {
			t.Fatalf("event %d %+v:\n got %s\nwant %s", i, e, got, want)
		}
	}
}

// BenchmarkContextEntry: the context entries of the load generator's
// events, their data scanned (scan) or taken as the decode found it
// (canonical).
func BenchmarkContextEntry(b *testing.B) {
	evs := canonicalEvents(b)
	for _, asIs := range []bool{false, true} {
		name := map[bool]string{false: "scan", true: "canonical"}[asIs]
		b.Run(name, func(b *testing.B) {
			var dst []byte
			for b.Loop() {
				for i := range evs {
					dst = appendContextEntryOf(dst[:0], &evs[i], asIs)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
		})
	}
}

// fleetSummaries are the summaries of the load generator's sessions after
// each of their events, as a batch would store them.
func fleetSummaries(tb testing.TB, events int) []Summary {
	tb.Helper()
	fleet := gen.NewFleet("v", 20, 3, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	states := map[string]*session.State{}
	var out []Summary
	for i := range events {
		e := fleet.Next()
		if states[e.SessionID] == nil {
			states[e.SessionID] = session.New(e.SessionID)
		}
		if err := states[e.SessionID].Apply(&e); err != nil {
			tb.Fatal(err)
		}
		out = append(out, SummaryOf(states[e.SessionID], uint64(i+1), e.Type))
	}
	return out
}

// TestMarshalSummaryIsMarshal: the summary written by hand is byte for
// byte json.Marshal's, on the load generator's sessions and on the values
// it leaves to json.Marshal.
func TestMarshalSummaryIsMarshal(t *testing.T) {
	sums := fleetSummaries(t, 3000)
	odd := []string{"", "a<b", "a\"b", "é", "\u2028", "a\x7f", "\xff"}
	for i, s := range odd {
		sum := sums[i*100]
		sum.SessionID, sum.Title, sum.LastHash = s, s, s
		sum.Labels = map[string]string{"b": s, "a": "1"}
		sum.Parent = &schema.Parent{SessionID: "p", SeedLength: 3, Depth: 1}
		sum.Forking, sum.Repairs, sum.LastRepairSeq, sum.Rewinds, sum.ForkCommittedSeq = true, 2, 9, 1, 4
		sum.PendingApprovals = []ApprovalView{{ID: "a1", TurnID: s, Prompt: s, StartSeq: 3}}
		sum.OpenTools = append(sum.OpenTools, ToolView{ID: s, Name: "n", TurnID: "t", Phase: s, StartSeq: 1, StartedSeq: 2, Idempotent: true})
		sum.OpenWork = append(sum.OpenWork, session.OpenItem{Kind: session.OpenKind(s), ID: "i", TurnID: s, StartSeq: 5, Idempotent: true})
		sum.OpenTurn, sum.LastTurn = &TurnView{ID: s, StartSeq: 1}, &TurnView{ID: "t", StartSeq: 1, EndSeq: 4, Reason: s}
		sum.Compaction = &CompactionView{ID: s, ThroughSeq: 3, EndSeq: 4}
		sum.Problem = &Problem{Seq: 1, StreamSeq: 2, Code: s, Message: s, GotSeq: 3}
		sums = append(sums, sum)
	}
	for _, tm := range []time.Time{
		{}, time.Date(2026, 1, 1, 0, 0, 0, 1, time.UTC), time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("x", 5*3600+1800)),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("y", 24*3600)), time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("z", -3600-7)),
	} {
		sum := sums[7]
		sum.CreatedAt, sum.LastActivity = tm, tm
		sums = append(sums, sum)
	}
	neg := sums[9]
	neg.Turns = -1
	sums = append(sums, neg)
	for i := range sums {
		want, wantErr := json.Marshal(&sums[i])
		got, err := marshalSummary(&sums[i])
		if (err == nil) != (wantErr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("summary %d:\n got %s (%v)\nwant %s (%v)", i, got, err, want, wantErr)
		}
	}
}

// BenchmarkSummaryJSON: the load generator's summaries by marshalSummary
// and by json.Marshal.
func BenchmarkSummaryJSON(b *testing.B) {
	sums := fleetSummaries(b, 2000)
	for _, bc := range []struct {
		name    string
		marshal func(*Summary) ([]byte, error)
	}{{"hand", marshalSummary}, {"json", func(s *Summary) ([]byte, error) { return json.Marshal(s) }}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				for i := range sums {
					if _, err := bc.marshal(&sums[i]); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(sums)), "ns/summary")
		})
	}
}

// marshalSummary writes every member json.Marshal writes: a summary with
// every field set (by reflection, so a field added to Summary is set too)
// marshals the same both ways. (The summary's owner and grants, added on
// one branch while another wrote marshalSummary, were left out of it.)
func TestMarshalSummaryWritesEveryField(t *testing.T) {
	var sum Summary
	fillNonZero(reflect.ValueOf(&sum).Elem())
	want, err := json.Marshal(&sum)
	if err != nil {
		t.Fatal(err)
	}
	got, err := marshalSummary(&sum)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("marshalSummary:\n%s\njson.Marshal:\n%s", got, want)
	}
}

// fillNonZero sets v and everything in it to a value that is not zero.
func fillNonZero(v reflect.Value) {
	switch v.Type() {
	case reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)))
		return
	case reflect.TypeFor[json.RawMessage]():
		v.Set(reflect.ValueOf(json.RawMessage(`{"x":1}`)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(3)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillNonZero(v.Elem())
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fillNonZero(v.Index(0))
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fillNonZero(k)
		fillNonZero(e)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillNonZero(v.Field(i))
			}
		}
	case reflect.Interface:
		v.Set(reflect.ValueOf("x"))
	}
}
