package store_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// fleetSummaries are the summaries of the load generator's sessions after
// each of their events, as a batch would store them.
func fleetSummaries(tb testing.TB, events int) []store.Summary {
	tb.Helper()
	fleet := gen.NewFleet("v", 20, 3, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	states := map[string]*session.State{}
	var out []store.Summary
	for i := range events {
		e := fleet.Next()
		if states[e.SessionID] == nil {
			states[e.SessionID] = session.New(e.SessionID)
		}
		if err := states[e.SessionID].Apply(&e); err != nil {
			tb.Fatal(err)
		}
		out = append(out, projector.SummaryOf(states[e.SessionID], uint64(i+1), e.Type))
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
		sum.PendingApprovals = []store.ApprovalView{{ID: "a1", TurnID: s, Prompt: s, StartSeq: 3}}
		sum.OpenTools = append(sum.OpenTools, store.ToolView{ID: s, Name: "n", TurnID: "t", Phase: s, StartSeq: 1, StartedSeq: 2, Idempotent: true})
		sum.OpenWork = append(sum.OpenWork, session.OpenItem{Kind: session.OpenKind(s), ID: "i", TurnID: s, StartSeq: 5, Idempotent: true})
		sum.OpenTurn, sum.LastTurn = &store.TurnView{ID: s, StartSeq: 1}, &store.TurnView{ID: "t", StartSeq: 1, EndSeq: 4, Reason: s}
		sum.Compaction = &store.CompactionView{ID: s, ThroughSeq: 3, EndSeq: 4}
		sum.Problem = &store.Problem{Seq: 1, StreamSeq: 2, Code: s, Message: s, GotSeq: 3}
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
		got, err := store.MarshalSummary(&sums[i])
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
		marshal func(*store.Summary) ([]byte, error)
	}{{"hand", store.MarshalSummary}, {"json", func(s *store.Summary) ([]byte, error) { return json.Marshal(s) }}} {
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
	var sum store.Summary
	fillNonZero(reflect.ValueOf(&sum).Elem())
	want, err := json.Marshal(&sum)
	if err != nil {
		t.Fatal(err)
	}
	got, err := store.MarshalSummary(&sum)
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
