package schema

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// checkCanonical holds decodeCanonical to the general path: whatever it
// accepts, the strict decode accepts with an equal envelope, its data
// passes CheckJSON, and Encode gives the body back byte for byte.
func checkCanonical(t *testing.T, b []byte) bool {
	t.Helper()
	got, ok := decodeCanonical(b)
	if !ok {
		return false
	}
	want, err := DecodeStrict(b)
	if err != nil {
		t.Fatalf("fast path accepted what the strict path refuses (%v): %s", err, b)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("fast path and strict path differ on %s:\n fast %#v\nstrict %#v", b, got, want)
	}
	if err := CheckJSON(got.Data, MaxJSONDepth-1); err != nil {
		t.Fatalf("fast path accepted data that CheckJSON refuses (%v): %s", err, b)
	}
	enc, err := Encode(&got)
	if err != nil || !bytes.Equal(enc, b) {
		t.Fatalf("fast path accepted a body that is not canonical:\n body %s\n enc  %s (%v)", b, enc, err)
	}
	// Decoded as an event of its own session, its sessionId is the
	// string given; as one of another session, a copy of its own.
	for _, id := range []string{got.SessionID, "other-1"} {
		of, ok := decodeCanonicalData(b, true, strings.Clone(id))
		if !ok || !reflect.DeepEqual(of, got) {
			t.Fatalf("decoded as an event of %q:\n got %#v\nwant %#v", id, of, got)
		}
	}
	// The rewrite of a canonical body is Encode's of the rewritten event:
	// with its own identity, the body itself; with another, that event's.
	c, ok := ScanCanonical(b)
	if !ok {
		t.Fatalf("decoded as canonical but not scanned: %s", b)
	}
	for _, id := range []Identity{
		{SessionID: got.SessionID, Seq: got.Seq, EventID: got.EventID, Synthetic: got.Synthetic},
		{SessionID: "child", Seq: got.Seq + 1, EventID: "fork:1", Synthetic: !got.Synthetic},
	} {
		re, ok := c.Rewrite(nil, id)
		e := got
		e.SessionID, e.Seq, e.EventID, e.Synthetic = id.SessionID, id.Seq, id.EventID, id.Synthetic
		want, err := Encode(&e)
		if ok && (err != nil || !bytes.Equal(re, want)) {
			t.Fatalf("rewrite of %s as %+v:\n got %s\nwant %s (%v)", b, id, re, want, err)
		}
	}
	return true
}

func TestDecodeCanonical(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 123456000, time.UTC)
	for i, tc := range []struct {
		e    Envelope
		fast bool // the fast path is expected to take it
	}{
		{Envelope{Type: TypeSessionCreated, Data: []byte(`{"title":"t","labels":{"a":"b"}}`)}, true},
		{Envelope{Type: TypeTurnStarted, TurnID: "t1", Data: []byte(`{"input":"hi \u00e9 \"q\" \\ \/ \n"}`)}, true},
		{Envelope{Type: TypeToolRequested, TurnID: "t1", StepID: "s", AttemptID: "a", ToolCallID: "c1", Data: []byte(`{"name":"sh","input":{"cmd":["ls","-l"],"n":-1.5e+3,"z":0,"f":0.25,"t":true,"u":false,"v":null}}`)}, true},
		{Envelope{Type: TypeToolResult, Ignorable: true, Synthetic: true, Data: []byte(`{"status":"ok","s":"日本語"}`)}, true},
		{Envelope{Type: TypeToolResult, Time: t0.In(time.FixedZone("", -7*3600)), Data: []byte(`[]`)}, true},
		{Envelope{Type: TypeMessageUser, Data: []byte(`{"content":"<b>&amp;</b>"}`)}, true},      // Encode escapes them
		{Envelope{Type: TypeMessageUser, Data: []byte(`{"content":"\ud83d\ude00"}`)}, false},     // surrogates: general path
		{Envelope{Type: TypeMessageUser, Data: []byte(`{"a\u0062":1}`)}, false},                  // escaped key
		{Envelope{Type: TypeMessageUser, TurnID: "t\u00e9", Data: []byte(`{}`)}, false},          // non-ASCII id
		{Envelope{Type: TypeMessageUser, Data: []byte(`{"content":"line\u2028sep"}`)}, true},     // Encode escapes U+2028
		{Envelope{Type: TypeMessageUser, Data: []byte("{\"content\":\"\xef\xbf\xbd\"}")}, false}, // U+FFFD: left to the general path
	} {
		e := tc.e
		e.SchemaVersion, e.SessionID, e.Seq, e.EventID = 1, "s-1", uint64(i+1), "e"
		if e.Time.IsZero() {
			e.Time = t0
		}
		b, err := Encode(&e)
		if err != nil {
			t.Fatal(err)
		}
		if got := checkCanonical(t, b); got != tc.fast {
			t.Errorf("case %d %s: fast path %v, want %v", i, b, got, tc.fast)
		}
	}
	// A seq of up to 19 digits is read digit by digit, a longer one by
	// strconv.
	for _, seq := range []uint64{0, 7, 10, 1 << 53, 9_999_999_999_999_999_999, 10_000_000_000_000_000_000, math.MaxUint64} {
		e := Envelope{SchemaVersion: 1, SessionID: "s-1", Seq: seq, EventID: "e", Time: t0, Type: TypeMessageUser, Data: []byte(`{}`)}
		b, err := Encode(&e)
		if err != nil {
			t.Fatal(err)
		}
		if !checkCanonical(t, b) {
			t.Errorf("seq %d: fast path refused %s", seq, b)
		}
	}
	head := `{"schemaVersion":1,"sessionId":"a","seq":1,"eventId":"e","time":"2026-01-01T00:00:00Z","type":"x/y",`
	for _, b := range []string{
		head + `"ignorable":false,"synthetic":false,"data":{"a":"<"}}`,                    // Encode would escape it
		head + "\"ignorable\":false,\"synthetic\":false,\"data\":{\"a\":\"\u2028\"}}",     // Encode would escape it
		head + `"ignorable":false,"synthetic":false,"data":{"a":1,"a":2}}`,                // duplicated key
		head + `"ignorable":false,"synthetic":false,"data":{"a":1} }`,                     // not compact
		head + `"ignorable":false,"synthetic":false,"data":{ "a":1}}`,                     // not compact
		head + `"ignorable":false,"synthetic":false,"data":{"a":01}}`,                     // bad number
		head + `"ignorable":false,"synthetic":false,"data":{"a":1.}}`,                     // bad number
		head + `"ignorable":false,"synthetic":false,"data":{"a":"\x"}}`,                   // bad escape
		head + `"ignorable":false,"synthetic":false,"data":{"a":"\ud800"}}`,               // lone surrogate
		head + `"ignorable":false,"synthetic":false,"data":{"a":tru}}`,                    // bad literal
		head + `"ignorable":false,"synthetic":false,"data":{"a":1},"x":1}`,                // unknown member
		head + `"ignorable":false,"synthetic":false,"data":{}}}`,                          // trailing
		head + `"ignorable":false,"synthetic":false,"data":{}`,                            // truncated
		head + `"turnId":"","ignorable":false,"synthetic":false,"data":{}}`,               // empty id is omitted by Encode
		head + `"stepId":"s","turnId":"t","ignorable":false,"synthetic":false,"data":{}}`, // order
		head + `"ignorable":0,"synthetic":false,"data":{}}`,                               // not a bool
		`{"schemaVersion":1,"sessionId":"a","seq":01,"eventId":"e","time":"2026-01-01T00:00:00Z","type":"x/y","ignorable":false,"synthetic":false,"data":{}}`,
		`{"schemaVersion":1,"sessionId":"a","seq":1,"eventId":"e","time":"2026-01-01T00:00:00.000Z","type":"x/y","ignorable":false,"synthetic":false,"data":{}}`,
		`{"schemaVersion":1,"sessionId":"a","seq":1,"eventId":"e","time":"2026-01-01t00:00:00Z","type":"x/y","ignorable":false,"synthetic":false,"data":{}}`,
		`{"schemaVersion":1,"sessionId":"a","seq":18446744073709551616,"eventId":"e","time":"2026-01-01T00:00:00Z","type":"x/y","ignorable":false,"synthetic":false,"data":{}}`,
		`{"schemaVersion":2,"sessionId":"a","seq":1,"eventId":"e","time":"2026-01-01T00:00:00Z","type":"x/y","ignorable":false,"synthetic":false,"data":{}}`,
	} {
		if checkCanonical(t, []byte(b)) {
			t.Errorf("fast path took %s", b)
		}
	}
	deep := bytes.Repeat([]byte("["), MaxJSONDepth-1)
	deep = append(deep, bytes.Repeat([]byte("]"), MaxJSONDepth-1)...)
	if !checkCanonical(t, []byte(head+`"ignorable":false,"synthetic":false,"data":`+string(deep)+`}`)) {
		t.Error("fast path refused data nested to the limit")
	}
	deeper := append(append([]byte("["), deep...), ']')
	if checkCanonical(t, []byte(head+`"ignorable":false,"synthetic":false,"data":`+string(deeper)+`}`)) {
		t.Error("fast path took data nested past the limit")
	}
}

// FuzzDecodeCanonical: the fast path never takes a body the general path
// would read differently.
func FuzzDecodeCanonical(f *testing.F) {
	for _, b := range readTestdata(f, "v1/*.json") {
		f.Add(b)
	}
	f.Add([]byte(`{"schemaVersion":1,"sessionId":"a","seq":1,"eventId":"e","time":"2026-01-01T00:00:00.5+01:00","type":"x/y","turnId":"t","ignorable":false,"synthetic":true,"data":{"a":[1,-2.5e-3,"\u00e9\n",{"b":null}],"c":true}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		checkCanonical(t, b)
		// And Decode agrees with the strict path either way.
		e1, err1 := Decode(b)
		e2, err2 := DecodeStrict(b)
		if (err1 == nil) != (err2 == nil) || err1 == nil && !reflect.DeepEqual(e1, e2) {
			t.Fatalf("Decode %v %+v, strict %v %+v on %s", err1, e1, err2, e2, b)
		}
		// The shared decode reads the same event (its data b's bytes).
		e3, _, err3 := DecodeCanonicalShared(b)
		if (err1 == nil) != (err3 == nil) || err1 == nil && !reflect.DeepEqual(e1, e3) {
			t.Fatalf("Decode %v %+v, shared %v %+v on %s", err1, e1, err3, e3, b)
		}
		// And so does the decode of an event of a session named, its own
		// or another.
		for _, id := range []string{strings.Clone(e1.SessionID), "other-1"} {
			e4, _, err4 := DecodeCanonicalSharedOf(b, id)
			if (err1 == nil) != (err4 == nil) || err1 == nil && !reflect.DeepEqual(e1, e4) {
				t.Fatalf("Decode %v %+v, shared of %q %v %+v on %s", err1, e1, id, err4, e4, b)
			}
			e5, _, err5 := DecodeCanonicalViewOf(b, id)
			if (err1 == nil) != (err5 == nil) || err1 == nil && !reflect.DeepEqual(e1, e5) {
				t.Fatalf("Decode %v %+v, views of %q %v %+v on %s", err1, e1, id, err5, e5, b)
			}
		}
	})
}

// FuzzEncode: Encode writes exactly what json.Marshal writes, and fails
// where it fails.
func FuzzEncode(f *testing.F) {
	f.Add("s-1", uint64(7), "01J", int64(1767225600), int64(123456789), 0, "tool/result", "t1", "", "a", "c", false, true, []byte(`{"a":[1,"é",{"b":null}]}`))
	f.Add("s", uint64(0), "", int64(-62167219300), int64(0), 3600*5, "x<y", "", "s", "", "", true, false, []byte(` {"a" : 1}`))
	f.Add("s", uint64(1), "e", int64(253402300800), int64(1), -7200, "x/y", "", "", "", "", false, false, []byte(`"\u2028<"`))
	f.Add("s", uint64(1), "e", int64(0), int64(0), 25*3600, "x/y", "", "", "", "", false, false, []byte(`{}`))
	f.Fuzz(func(t *testing.T, sid string, seq uint64, eid string, sec, nsec int64, zone int, typ, turn, step, attempt, call string, ign, syn bool, data []byte) {
		e := Envelope{SchemaVersion: Version, SessionID: sid, Seq: seq, EventID: eid,
			Time: time.Unix(sec, nsec).In(time.FixedZone("z", zone%(100*3600))), Type: typ,
			TurnID: turn, StepID: step, AttemptID: attempt, ToolCallID: call, Ignorable: ign, Synthetic: syn, Data: data}
		if len(e.Data) == 0 {
			e.Data = []byte("{}")
		}
		want, werr := json.Marshal(&e)
		got, gerr := Encode(&e)
		if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("Encode %s (%v), json.Marshal %s (%v)", got, gerr, want, werr)
		}
		// AppendEncode writes the same after what dst holds, and leaves
		// dst as it was on error.
		dst := []byte("[prefix,")
		app, aerr := AppendEncode(dst, &e)
		if (aerr == nil) != (gerr == nil) || (aerr == nil && string(app) != "[prefix,"+string(got)) || (aerr != nil && string(app) != "[prefix,") {
			t.Fatalf("AppendEncode %q (%v), Encode %s (%v)", app, aerr, got, gerr)
		}
	})
}

// checkCanonUTC holds canonUTC to the general path: whatever it reads,
// time.Time's UnmarshalJSON reads as the same instant in UTC, and
// MarshalJSON writes back byte for byte.
func checkCanonUTC(t *testing.T, s string) bool {
	t.Helper()
	got, ok := canonUTC([]byte(s))
	if !ok {
		return false
	}
	var want time.Time
	if err := want.UnmarshalJSON([]byte(`"` + s + `"`)); err != nil {
		t.Fatalf("canonUTC read %q, which UnmarshalJSON refuses: %v", s, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("canonUTC read %q as %#v, UnmarshalJSON as %#v", s, got, want)
	}
	if back, _ := got.MarshalJSON(); string(back) != `"`+s+`"` {
		t.Fatalf("canonUTC read %q, which MarshalJSON writes as %s", s, back)
	}
	return true
}

func TestCanonUTC(t *testing.T) {
	for _, s := range []string{"2026-01-01T00:00:00Z", "2026-12-05T08:29:53.1Z", "2026-12-05T08:29:53.123456789Z",
		"2024-02-29T23:59:59.000000001Z", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999999999Z", "2026-04-30T12:00:00.5Z"} {
		if !checkCanonUTC(t, s) {
			t.Errorf("canonUTC refuses %q", s)
		}
	}
	// Not what Encode writes for a UTC time, or not a time at all: left
	// to the general path.
	for _, s := range []string{"2026-01-01T00:00:00.10Z", "2026-01-01T00:00:00.Z", "2026-01-01T00:00:00.1234567891Z",
		"2025-02-29T00:00:00Z", "2026-04-31T00:00:00Z", "2026-13-01T00:00:00Z", "2026-00-01T00:00:00Z", "2026-01-00T00:00:00Z",
		"2026-01-01T24:00:00Z", "2026-01-01T00:60:00Z", "2026-01-01T00:00:60Z", "2026-01-01T00:00:00+00:00", "2026-01-01T00:00:00",
		"2026-01-01 00:00:00Z", "2026-1-01T00:00:00Z", "0000-01-01T00:00:00Z", "2026-01-01T00:00:0aZ", "+026-01-01T00:00:00Z", "1900-02-29T00:00:00Z"} {
		if checkCanonUTC(t, s) {
			t.Errorf("canonUTC reads %q", s)
		}
	}
}

func FuzzCanonUTC(f *testing.F) {
	for _, s := range []string{"2026-01-01T00:00:00Z", "2024-02-29T23:59:59.000000001Z", "2026-01-01T00:00:00.10Z", "2026-04-31T00:00:00Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkCanonUTC(t, s) })
}

// The decode of an event of a session named takes the session's id as it
// is given, without a copy.
func TestDecodeCanonicalSharedOfSharesTheID(t *testing.T) {
	b, err := Encode(&Envelope{SchemaVersion: 1, SessionID: "s-1", Seq: 1, EventID: "event-1", Time: time.Unix(1, 0).UTC(), Type: TypeMessageUser, Data: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	id := strings.Clone("s-1")
	e, canonical, err := DecodeCanonicalSharedOf(b, id)
	if err != nil || !canonical || e.SessionID != id || unsafe.StringData(e.SessionID) != unsafe.StringData(id) {
		t.Fatalf("%+v canonical %v %v: want the id given", e, canonical, err)
	}
	if n := testing.AllocsPerRun(100, func() { DecodeCanonicalSharedOf(b, id) }); n != 1 {
		t.Fatalf("%v allocations a decode, want 1 (the event id)", n)
	}
}

// TestDecodeCanonicalViewOfCopiesNoID: the event id and ids of a
// canonical body decoded by DecodeCanonicalViewOf are b's bytes, and the
// decode allocates nothing; a body that is not canonical has ids of its
// own.
func TestDecodeCanonicalViewOfCopiesNoID(t *testing.T) {
	e := Envelope{SchemaVersion: 1, SessionID: "s-1", Seq: 2, EventID: "event-2", Time: time.Unix(1, 0).UTC(), Type: TypeToolResult,
		TurnID: "turn-1", StepID: "step-1", AttemptID: "attempt-1", ToolCallID: "call-1", Data: []byte(`{"status":"ok"}`)}
	b, err := Encode(&e)
	if err != nil {
		t.Fatal(err)
	}
	in := func(s string, b []byte) bool {
		p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
		start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		return p >= start && p+uintptr(len(s)) <= start+uintptr(len(b))
	}
	id := strings.Clone("s-1")
	got, canonical, err := DecodeCanonicalViewOf(b, id)
	if err != nil || !canonical || !reflect.DeepEqual(got, e) {
		t.Fatalf("%+v canonical %v %v, want %+v", got, canonical, err, e)
	}
	for _, s := range []string{got.EventID, got.TurnID, got.StepID, got.AttemptID, got.ToolCallID} {
		if !in(s, b) {
			t.Fatalf("%q is a copy, want a view of the body", s)
		}
	}
	if n := testing.AllocsPerRun(100, func() { DecodeCanonicalViewOf(b, id) }); n != 0 {
		t.Fatalf("%v allocations a decode, want none", n)
	}
	// The same event with a space after the data: not canonical.
	b2 := append(bytes.TrimSuffix(slices.Clone(b), []byte("}")), ' ', '}')
	got, canonical, err = DecodeCanonicalViewOf(b2, id)
	if err != nil || canonical || got.TurnID != e.TurnID {
		t.Fatalf("%+v canonical %v %v", got, canonical, err)
	}
	for _, s := range []string{got.EventID, got.TurnID, got.StepID, got.AttemptID, got.ToolCallID} {
		if in(s, b2) {
			t.Fatalf("%q of a body not canonical is a view of it, want a copy", s)
		}
	}
}
