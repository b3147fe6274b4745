package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// show, replay and export of a session holding a message that is not a
// valid event of it (stored around the writer) say it is unreadable:
// never a raw error, never the bad message or what follows it printed as
// an event.
func TestReadVerbsSayUnreadable(t *testing.T) {
	s := natstest.RunServer(t)
	nc := natstest.Connect(t, s)
	ctx := context.Background()
	st, err := logstore.Open(ctx, nc, logstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	env := func(id string, seq uint64, eventID, typ, data string) schema.Envelope {
		return schema.Envelope{SchemaVersion: 1, SessionID: id, Seq: seq, EventID: eventID, Time: time.Now().UTC(), Type: typ, Data: json.RawMessage(data)}
	}
	good := func(id string) {
		evs := []schema.Envelope{
			env(id, 1, "e1", schema.TypeSessionCreated, `{}`),
			env(id, 2, "e2", schema.TypeMessageUser, `{"content":"one"}`),
			env(id, 3, "e3", schema.TypeMessageUser, `{"content":"two"}`),
		}
		if _, err := st.Append(ctx, logstore.AppendRequest{SessionID: id, Events: evs}); err != nil {
			t.Fatal(err)
		}
	}
	around := func(id string, body []byte, seq uint64) {
		loc, _ := logstore.Locate(id)
		m := nats.NewMsg(loc.Subject)
		m.Data = body
		m.Header.Set(logstore.HeaderMsgID, id+":around-"+strconv.FormatUint(seq, 10))
		if seq != 0 {
			m.Header.Set(logstore.HeaderSeq, strconv.FormatUint(seq, 10))
		}
		if _, err := natstest.JetStream(t, nc).PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	encode := func(e schema.Envelope) []byte {
		b, err := schema.Encode(&e)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	good("ok")
	cases := map[string]func(id string){
		"garbage-tail": func(id string) { around(id, []byte("\x00 not an event"), 0) },
		"forged-seq": func(id string) {
			around(id, encode(env(id, 2, "forged", schema.TypeMessageUser, `{"content":"forged"}`)), 2)
			around(id, encode(env(id, 4, "e4", schema.TypeMessageUser, `{"content":"after"}`)), 4)
		},
		"foreign": func(id string) {
			around(id, encode(env("ok", 4, "forged", schema.TypeMessageUser, `{"content":"forged"}`)), 4)
			around(id, encode(env(id, 5, "e5", schema.TypeMessageUser, `{"content":"after"}`)), 5)
		},
	}
	for id, bad := range cases {
		good(id)
		bad(id)
	}
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := Main(ctx, append(args, "--nats-url", s.ClientURL()), &out, &errb)
		return code, out.String(), errb.String()
	}
	for id := range cases {
		t.Run(id, func(t *testing.T) {
			code, stdout, stderr := run("show", id)
			if code != 1 || !strings.Contains(stdout, "unreadable") || !strings.Contains(stderr, id+" is unreadable") || !strings.Contains(stdout, "last seq  3") {
				t.Fatalf("show: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
			}
			code, stdout, _ = run("show", "--json", id)
			if code != 1 || !strings.Contains(stdout, `"status": "unreadable"`) {
				t.Fatalf("show --json: exit %d\n%s", code, stdout)
			}
			code, stdout, stderr = run("replay", id)
			lines := strings.Split(strings.TrimSpace(stdout), "\n")
			if code != 1 || len(lines) != 3 || strings.Contains(stdout, `"content":"forged"`) || strings.Contains(stdout, `"content":"after"`) || !strings.Contains(stderr, id+" is unreadable") {
				t.Fatalf("replay: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
			}
		})
	}
	code, stdout, stderr := run("export")
	if code != 1 || strings.Count(stdout, "\n") != 3 || strings.Contains(stdout, `"content":"forged"`) || !strings.Contains(stderr, "3 sessions not exported") {
		t.Fatalf("export: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if !strings.Contains(l, `"sessionId":"ok"`) {
			t.Fatalf("export: a line of another session than ok: %s", l)
		}
	}
	if code, stdout, stderr := run("show", "ok"); code != 0 || !strings.Contains(stdout, "idle") {
		t.Fatalf("show ok: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	if code, stdout, _ := run("replay", "ok"); code != 0 || strings.Count(stdout, "\n") != 3 {
		t.Fatalf("replay ok: exit %d\n%s", code, stdout)
	}
}
