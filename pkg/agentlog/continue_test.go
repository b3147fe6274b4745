package agentlog

import (
	"errors"
	"strings"
	"testing"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// TestContinuationGivesTheLongerFilesEvents: a file mapped through its
// first k lines and continued with the rest, line by line, gives the
// session ReadFile gives the whole file, for every k, and the mapping of
// the first k lines is a prefix of it; a line that goes back (a rewind),
// starts a new root or repeats an id continues the session too, and only
// a line the format cannot read is ErrNotContinued.
func TestContinuationGivesTheLongerFilesEvents(t *testing.T) {
	lines := []string{
		`{"kind":"title"}`,
		`{"id":"u1","kind":"user","text":"hello"}`,
		`{"id":"a1","parent":"u1","kind":"assistant","msg":"m1","text":"let me look"}`,
		`{"id":"a2","parent":"a1","kind":"assistant","msg":"m1","call":"c1","input":{"cmd":"ls"},"stop":"tool_use"}`,
		`{"id":"r1","parent":"a2","kind":"result","call":"c1","text":"a b"}`,
		`{"id":"a3","parent":"r1","kind":"assistant","msg":"m2","text":"done","stop":"end_turn"}`,
		`{"id":"u2","parent":"a3","kind":"user","text":"again"}`,
		`{"id":"a4","parent":"u2","kind":"assistant","msg":"m3","text":"ok","stop":"end_turn"}`,
	}
	file := func(ls []string) string { return strings.Join(ls, "\n") + "\n" }
	var whole collect
	if _, err := ReadFile(toy{}, write(t, file(lines)), Options{}, &whole); err != nil {
		t.Fatal(err)
	}
	want := render(whole.events["toy-s1"])
	checked := 0
	for k := 1; k < len(lines); k++ {
		var c collect
		var cont *Continuation
		if _, err := ReadFile(toy{}, write(t, file(lines[:k])), Options{Continue: func(x *Continuation) { cont = x }}, &c); err != nil {
			t.Fatal(err)
		}
		if cont == nil {
			t.Fatalf("k=%d: no continuation", k)
		}
		got := c.events["toy-s1"]
		if !strings.HasPrefix(want, render(got)) {
			t.Fatalf("k=%d: not a prefix:\n%s\nthe whole file:\n%s", k, render(got), want)
		}
		checked++
		emit := func(e schema.Envelope) error { got = append(got, e); return nil }
		for _, l := range lines[k:] {
			if err := cont.Add([]byte(l), emit); err != nil {
				t.Fatalf("k=%d: %s: %v", k, l, err)
			}
		}
		if err := cont.End(emit); err != nil {
			t.Fatal(err)
		}
		if render(got) != want {
			t.Fatalf("k=%d: continued:\n%s\nthe whole file:\n%s", k, render(got), want)
		}
	}
	if checked != len(lines)-1 {
		t.Fatalf("%d prefixes checked", checked)
	}

	var cont *Continuation
	if _, err := ReadFile(toy{}, write(t, file(lines)), Options{Continue: func(x *Continuation) { cont = x }}, &collect{}); err != nil {
		t.Fatal(err)
	}
	if err := cont.Add([]byte(`not json`), func(schema.Envelope) error { return nil }); !errors.Is(err, ErrNotContinued) {
		t.Errorf("not json: %v, want ErrNotContinued", err)
	}
	for _, l := range []string{
		`{"id":"b1","parent":"a3","kind":"user","text":"a branch"}`,
		`{"id":"b2","kind":"user","text":"a new root"}`,
		`{"id":"u1","parent":"b2","kind":"user","text":"a taken id"}`,
	} {
		if err := cont.Add([]byte(l), func(schema.Envelope) error { return nil }); err != nil {
			t.Errorf("%s: %v", l, err)
		}
	}
	if err := cont.Add([]byte(`{"id":"u3","parent":"a4","kind":"user","text":"continues"}`), func(schema.Envelope) error { return nil }); err != nil {
		t.Fatalf("a refused line spoilt the continuation: %v", err)
	}
}
