package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/natstest/tamper"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// `sessionlog verify` reports an event id stored twice in a session (as
// JetStream stores it after its duplicate window, or under another
// Nats-Msg-Id): one PROBLEM line, naming both seqs; on one stream and on
// three partitions, on one node and on an R3 cluster.
func TestVerifyDuplicateEventID(t *testing.T) { natstest.ForEachLayout(t, testVerifyDuplicateEventID) }

func testVerifyDuplicateEventID(t *testing.T, l natstest.Layout) {
	d, nc, st := layoutStore(t, l)
	ctx := context.Background()
	now := time.Now().UTC()
	mk := func(sid string, seq uint64, id, typ, data string) schema.Envelope {
		return schema.Envelope{SchemaVersion: schema.Version, SessionID: sid, Seq: seq, EventID: id, Time: now, Type: typ, Data: []byte(data)}
	}
	for _, sid := range []string{"clean", "twice"} {
		if _, err := st.Append(ctx, logstore.AppendRequest{SessionID: sid, Events: []schema.Envelope{
			mk(sid, 1, sid+"-1", schema.TypeSessionCreated, `{}`),
			mk(sid, 2, "same", schema.TypeMessageUser, `{"content":"first"}`),
		}}); err != nil {
			t.Fatal(err)
		}
	}
	// The id again at seq 3, under another message id.
	again := mk("twice", 3, "same", schema.TypeMessageUser, `{"content":"second"}`)
	body, err := schema.Encode(&again)
	if err != nil {
		t.Fatal(err)
	}
	h := nats.Header{}
	h.Set(logstore.HeaderMsgID, "twice:other-msg-id")
	h.Set(logstore.HeaderSeq, "3")
	h.Set(logstore.HeaderType, again.Type)
	loc, err := st.Locate("twice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := natstest.JetStream(t, nc).PublishMsg(ctx, &nats.Msg{Subject: loc.Subject, Header: h, Data: body}); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := Main(ctx, append([]string{"verify"}, append(args, "--nats-url", d.URL)...), &out, &errb)
		return code, out.String()
	}
	if code, out := run("--session", "clean"); code != 0 || strings.Contains(out, "PROBLEM") {
		t.Fatalf("clean: exit %d, %q", code, out)
	}
	code, out := run()
	var problems []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "PROBLEM") {
			problems = append(problems, l)
		}
	}
	if code != 1 || len(problems) != 1 {
		t.Fatalf("exit %d, want 1 and one PROBLEM line: %q", code, out)
	}
	for _, want := range []string{"session=twice", "seq=3", "kind=duplicate_id", "same", "seq 2"} {
		if !strings.Contains(problems[0], want) {
			t.Errorf("%q does not mention %q", problems[0], want)
		}
	}
}

// `sessionlog verify` finds a broken hash chain: an event deleted in the
// middle (gap at seq 3), a body changed (seq 2 changed), two events
// swapped (reordered); a whole session has no problem. Alike with sealed
// bodies, which the tamper opens and seals again with the session's key;
// a sealed body changed without the key is no link of the chain to judge:
// it does not open, and verify names it unreadable where it is.
func TestVerifyChain(t *testing.T) { natstest.ForEachSealing(t, testVerifyChain) }

func testVerifyChain(t *testing.T, sealed bool) {
	d, nc, _ := layoutStore(t, natstest.Layout{Partitions: 1, Nodes: 1})
	ctx := context.Background()
	st, err := logstore.Open(ctx, nc, logstore.Config{SealBodies: sealed})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"whole":            "",
		tamper.BreakDelete: "seq=3 kind=gap",
		tamper.BreakChange: "seq=2 kind=changed",
		tamper.BreakSwap:   "seq=3 kind=reordered",
	}
	kinds := tamper.BreakKinds
	if sealed {
		kinds = append(kinds, tamper.BreakGarble)
		want[tamper.BreakGarble] = "seq=2 kind=unreadable"
	}
	for _, how := range append([]string{"whole"}, kinds...) {
		sid := "chain-" + how
		evs := make([]schema.Envelope, 5)
		for i := range evs {
			typ, data := schema.TypeMessageUser, `{"content":"hi"}`
			if i == 0 {
				typ, data = schema.TypeSessionCreated, `{}`
			}
			evs[i] = schema.Envelope{SchemaVersion: schema.Version, SessionID: sid, Seq: uint64(i + 1), EventID: sid + "-" + string(rune('a'+i)),
				Time: time.Now().UTC(), Type: typ, Data: []byte(data)}
		}
		if _, err := st.Append(ctx, logstore.AppendRequest{SessionID: sid, Events: evs}); err != nil {
			t.Fatal(err)
		}
		if how != "whole" {
			tamper.BreakChain(t, nc, "SESSIONS", logstore.SubjectPrefix+sid, how)
		}
		if got := tamper.Sealed(t, nc, "SESSIONS", logstore.SubjectPrefix+sid); got != sealed {
			t.Fatalf("%s: stored sealed %v, want %v", how, got, sealed)
		}
	}
	for how, line := range want {
		var out, errb bytes.Buffer
		code := Main(ctx, []string{"verify", "--session", "chain-" + how, "--nats-url", d.URL}, &out, &errb)
		if line == "" {
			if code != 0 || strings.Contains(out.String(), "PROBLEM") {
				t.Errorf("%s: exit %d, %q", how, code, out.String())
			}
			continue
		}
		seq, kind, _ := strings.Cut(line, " ")
		found := false
		for _, l := range strings.Split(out.String(), "\n") {
			found = found || strings.HasPrefix(l, "PROBLEM session=chain-"+how+" "+seq+" ") && strings.Contains(l, " "+kind+":")
		}
		if code != 1 || !found {
			t.Errorf("%s: exit %d, want a PROBLEM line with %q: %s", how, code, line, out.String())
		}
		t.Logf("%s: %s", how, out.String())
	}
}

// `sessionlog verify --http-url` holds the log to what the projector
// folded: a session whose last events went from the log (a whole, shorter
// session, which the hash chain cannot tell) and one that went whole are
// named "lost"; without the projector verify sees nothing wrong with
// either. Events are removed from the stream directly, as the engine lost
// a range of one after a replica's block file was damaged.
func TestVerifyHoldsToProjector(t *testing.T) {
	d, nc, st := layoutStore(t, natstest.Layout{Partitions: 1, Nodes: 1})
	ctx := context.Background()
	api := freeAddr(t)
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan int, 1)
	go func() {
		done <- Main(pctx, []string{"projector", "--nats-url", d.URL, "--http-listen", api, "--data-dir", t.TempDir()}, io.Discard, io.Discard)
	}()
	defer func() { cancel(); <-done }()
	lengths := map[string]int{"shorter": 5, "gone": 3, "whole": 4}
	for sid, n := range lengths {
		evs := make([]schema.Envelope, n)
		for i := range evs {
			typ, data := schema.TypeMessageUser, `{"content":"hi"}`
			if i == 0 {
				typ, data = schema.TypeSessionCreated, `{}`
			}
			evs[i] = schema.Envelope{SchemaVersion: schema.Version, SessionID: sid, Seq: uint64(i + 1), EventID: fmt.Sprintf("%s-%d", sid, i+1),
				Time: time.Now().UTC(), Type: typ, Data: []byte(data)}
		}
		if _, err := st.Append(ctx, logstore.AppendRequest{SessionID: sid, Events: evs}); err != nil {
			t.Fatal(err)
		}
	}
	natstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		for sid, n := range lengths {
			resp, err := http.Get("http://" + api + "/v1/sessions/" + sid)
			if err != nil {
				return err
			}
			var sum struct {
				LastSeq int `json:"lastSeq"`
			}
			err = json.NewDecoder(resp.Body).Decode(&sum)
			resp.Body.Close()
			if err != nil || sum.LastSeq != n {
				return fmt.Errorf("%s: the projector shows seq %d (%v), want %d", sid, sum.LastSeq, err, n)
			}
		}
		return nil
	})
	// The last two events of "shorter" and all of "gone" leave the log.
	stream, err := natstest.JetStream(t, nc).Stream(ctx, logstore.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	for sid, from := range map[string]uint64{"shorter": 4, "gone": 1} {
		evs, _, err := st.ReadEvents(ctx, sid, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Seq >= from {
				if err := stream.DeleteMsg(ctx, ev.StreamSeq); err != nil {
					t.Fatal(err)
				}
			}
		}
		st.ForgetTail(sid)
	}
	run := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := Main(ctx, append([]string{"verify", "--nats-url", d.URL}, args...), &out, &errb)
		return code, out.String() + errb.String()
	}
	if code, out := run(); code != 0 || strings.Contains(out, "PROBLEM") {
		t.Fatalf("verify without the projector: exit %d, %q (the chain cannot see a lost tail)", code, out)
	}
	code, out := run("--http-url", "http://"+api)
	var problems []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "PROBLEM") {
			problems = append(problems, l)
		}
	}
	want := []string{
		"PROBLEM session=gone seq=1 stream_seq=0 kind=lost: the projector shows 3 events of it; the log holds none",
		"PROBLEM session=shorter seq=4 stream_seq=0 kind=lost: the projector folded up to seq 5; the log holds up to seq 3: seqs 4..5 gone",
	}
	slices.Sort(problems)
	if code != 1 || !slices.Equal(problems, want) {
		t.Fatalf("verify --http-url: exit %d, problems\n%s\nwant\n%s\n(output %q)", code, strings.Join(problems, "\n"), strings.Join(want, "\n"), out)
	}
	if code, out := run("--http-url", "http://"+api, "--session", "whole"); code != 0 || strings.Contains(out, "PROBLEM") {
		t.Fatalf("verify --session whole: exit %d, %q", code, out)
	}
	if code, _ := run("--http-url", "ftp://x"); code == 0 {
		t.Fatal("verify --http-url ftp://x: exit 0")
	}
}
