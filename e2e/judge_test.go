package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/forker"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/projector/httpapi"
)

// judgeCase is a session of two events (seq 1 and 2, stored through the
// store as the writer stores them) followed by one message published
// straight onto its subject, around the writer.
type judgeCase struct {
	name string
	// kind is the judge's kind of unreadable message; "" for a message
	// every reader skips (an exact copy).
	kind string
	bad  func(id string, stored []*logstore.Msg) *nats.Msg
}

// TestOneJudgeEveryPath: the same stored bytes get the same verdict, with
// the same text, on every path that reads a session (DESIGN.md section 5,
// "Reading stored messages"): the writer's append and sessions.api.read,
// the projector, the repairer, the forker and the verbs show, replay,
// verify and export, all on one embedded JetStream server.
func TestOneJudgeEveryPath(t *testing.T) {
	s := natstest.RunServer(t)
	nc := natstest.Connect(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := logstore.Open(ctx, nc, logstore.Config{})
	if err != nil {
		t.Fatal(err)
	}

	event := func(id string, seq uint64, eventID, typ string, prev string, headerSeq string) *nats.Msg {
		b, err := schema.Encode(&schema.Envelope{SchemaVersion: schema.Version, SessionID: id, Seq: seq, EventID: eventID,
			Time: time.Now().UTC(), Type: typ, Data: json.RawMessage(`{"content":"around"}`)})
		if err != nil {
			t.Fatal(err)
		}
		m := nats.NewMsg("")
		m.Data = b
		m.Header.Set(logstore.HeaderMsgID, logstore.MsgID(id, eventID))
		m.Header.Set(logstore.HeaderType, typ)
		m.Header.Set(logstore.HeaderSeq, headerSeq)
		if prev != "" {
			m.Header.Set(logstore.HeaderPrev, prev)
		}
		return m
	}
	hash2 := func(stored []*logstore.Msg) string { return logstore.ChainHash(stored[1].Data) }
	cases := []judgeCase{
		{"garbage", logstore.KindGarbage, func(string, []*logstore.Msg) *nats.Msg {
			m := nats.NewMsg("")
			m.Data = []byte("\x00 not an event {")
			return m
		}},
		{"foreign", logstore.KindForeign, func(id string, stored []*logstore.Msg) *nats.Msg {
			return event("other-"+id, 3, "foreign", schema.TypeMessageUser, hash2(stored), "3")
		}},
		{"forged-seq", logstore.KindGap, func(id string, stored []*logstore.Msg) *nats.Msg {
			return event(id, 7, "forged", schema.TypeMessageUser, hash2(stored), "7")
		}},
		{"header-seq", logstore.KindHeaderSeq, func(id string, stored []*logstore.Msg) *nats.Msg {
			return event(id, 3, "header", schema.TypeMessageUser, hash2(stored), "9")
		}},
		{"second-copy", "", func(id string, stored []*logstore.Msg) *nats.Msg {
			m := nats.NewMsg("")
			m.Data = stored[1].Data
			for k, v := range stored[1].Header {
				if strings.HasPrefix(k, "SL-") { // not the batch's headers
					m.Header[k] = v
				}
			}
			m.Header.Set(logstore.HeaderMsgID, logstore.MsgID(id, "e2")+"-again")
			return m
		}},
		{"gap", logstore.KindGap, func(id string, stored []*logstore.Msg) *nats.Msg {
			return event(id, 4, "e4", schema.TypeMessageUser, hash2(stored), "4")
		}},
		{"reorder", logstore.KindReordered, func(id string, stored []*logstore.Msg) *nats.Msg {
			return event(id, 1, "e1-again", schema.TypeMessageUser, hash2(stored), "1")
		}},
		{"unknown-type", logstore.KindUnknownType, func(id string, stored []*logstore.Msg) *nats.Msg {
			return event(id, 3, "e3", "x.future/thing", hash2(stored), "3")
		}},
		{"changed", logstore.KindChanged, func(id string, stored []*logstore.Msg) *nats.Msg {
			return event(id, 3, "e3", schema.TypeMessageUser, logstore.ChainHash([]byte("another body")), "3")
		}},
	}

	// Every session, with its bad message, before any service starts.
	want := map[string]string{}  // the verdict's text; "" for readable
	badAt := map[string]uint64{} // the stream seq of the message around the writer
	js := natstest.JetStream(t, nc)
	for _, tc := range cases {
		id := "j-" + tc.name
		evs := []schema.Envelope{
			{SchemaVersion: schema.Version, SessionID: id, Seq: 1, EventID: "e1", Time: time.Now().UTC(), Type: schema.TypeSessionCreated, Data: json.RawMessage(`{}`)},
			{SchemaVersion: schema.Version, SessionID: id, Seq: 2, EventID: "e2", Time: time.Now().UTC(), Type: schema.TypeMessageUser, Data: json.RawMessage(`{"content":"hello"}`)},
		}
		if _, err := st.Append(ctx, logstore.AppendRequest{SessionID: id, Events: evs}); err != nil {
			t.Fatal(err)
		}
		var stored []*logstore.Msg
		if _, err := st.ReadSession(ctx, id, 0, func(m *logstore.Msg) error { stored = append(stored, m); return nil }); err != nil {
			t.Fatal(err)
		}
		m := tc.bad(id, stored)
		m.Subject = logstore.SubjectPrefix + id
		ack, err := js.PublishMsg(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		badAt[id] = ack.Sequence
		verdict := st.FirstUnreadable(ctx, id)
		var ue *logstore.UnreadableError
		switch {
		case tc.kind == "" && verdict != nil:
			t.Fatalf("%s: judged %v, want readable", tc.name, verdict)
		case tc.kind == "":
		case !errors.As(verdict, &ue) || ue.Kind != tc.kind || ue.StreamSeq != stored[1].StreamSeq+1:
			t.Fatalf("%s: judged %v, want an unreadable message of kind %s", tc.name, verdict, tc.kind)
		default:
			want[id] = ue.Error()
		}
		t.Logf("%s: %v", tc.name, verdict)
	}

	deps := assemble.Deps{Conn: nc}
	w, err := assemble.NewWriter(assemble.DefaultWriter(), st, deps)
	if err != nil {
		t.Fatal(err)
	}
	p, err := assemble.NewProjector(assemble.DefaultProjector(t.TempDir()), st, deps)
	if err != nil {
		t.Fatal(err)
	}
	r, err := assemble.NewRepairer(assemble.DefaultRepairer(), st, deps)
	if err != nil {
		t.Fatal(err)
	}
	f, err := assemble.NewForker(assemble.DefaultForker(), st, deps)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 3)
	runCtx, stop := context.WithCancel(ctx)
	go func() { done <- w.Run(runCtx) }()
	go func() { done <- p.Run(runCtx) }()
	go func() { done <- f.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		for range 3 {
			if err := <-done; err != nil {
				t.Errorf("service: %v", err)
			}
		}
	})
	httpSrv := httptest.NewServer(p.Handler())
	t.Cleanup(httpSrv.Close)
	natstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		for _, ready := range []func() error{w.Ready, p.Ready, f.Ready} {
			if err := ready(); err != nil {
				return err
			}
		}
		return nil
	})

	// same reports a path's answer that disagrees with the judge: an
	// error naming the verdict's text for an unreadable session, none for
	// a readable one.
	same := func(t *testing.T, id, path string, code string, msg string) {
		t.Helper()
		if w := want[id]; w == "" && code != "" {
			t.Errorf("%s: %s answered %s %q, want the session read", id, path, code, msg)
		} else if w != "" && (code != string(schema.CodeUnreadable) || !strings.Contains(msg, w)) {
			t.Errorf("%s: %s answered %s %q, want unreadable %q", id, path, code, msg, w)
		}
	}
	codeOf := func(err error) (string, string) {
		if err == nil {
			return "", ""
		}
		return string(schema.CodeOf(err)), err.Error()
	}
	request := func(subject string, body any) (json.RawMessage, api.ErrorDetail) {
		b, _ := json.Marshal(body)
		reply, err := nc.Request(subject, b, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var e api.ErrorBody
		if json.Unmarshal(reply.Data, &e) == nil && e.Error.Code != "" {
			return nil, e.Error
		}
		return reply.Data, api.ErrorDetail{}
	}
	cli := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		cmd := exec.CommandContext(ctx, sessionlogBin(t), append(args, "--nats-url", s.ClientURL())...)
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), out.String(), errb.String()
	}

	for _, tc := range cases {
		id := "j-" + tc.name
		t.Run(tc.name, func(t *testing.T) {
			// The read API: the whole session, and a page of one event
			// that stops before the bad message (served, or the verdict).
			body, e := request(api.SubjectRead, api.ReadRequest{SessionID: id})
			same(t, id, "sessions.api.read", string(e.Code), e.Message)
			if want[id] == "" {
				var page api.ReadReply
				if err := json.Unmarshal(body, &page); err != nil || len(page.Events) != 2 || page.LastSeq != 2 || page.More {
					t.Errorf("read: %s", body)
				}
			}
			if body, e := request(api.SubjectRead, api.ReadRequest{SessionID: id, Limit: 1}); e.Code != "" {
				same(t, id, "sessions.api.read of the first event", string(e.Code), e.Message)
			} else if !strings.Contains(string(body), `"more":true`) || strings.Count(string(body), `"seq":`) != 1 {
				t.Errorf("read of the first event: %s", body)
			}
			// Pages that start at the bad message and past everything
			// stored: the judge, reading from the start, stops at the
			// bad message before any of their events.
			for _, after := range []uint64{2, 3, 100} {
				body, e := request(api.SubjectRead, api.ReadRequest{SessionID: id, AfterSeq: after})
				same(t, id, fmt.Sprintf("sessions.api.read after seq %d", after), string(e.Code), e.Message)
				if e.Code == "" && strings.Contains(string(body), `"seq":`) {
					t.Errorf("read after seq %d: %s", after, body)
				}
			}

			// The projector's view of the session.
			var d httpapi.Detail
			natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
				resp, err := http.Get(httpSrv.URL + "/v1/sessions/" + id)
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				d = httpapi.Detail{}
				if err := json.Unmarshal(b, &d); err != nil {
					return fmt.Errorf("%d %s", resp.StatusCode, b)
				}
				if d.Problem == nil && d.LastStreamSeq < badAt[id] {
					return fmt.Errorf("projector at seq %d (stream seq %d)", d.LastSeq, d.LastStreamSeq)
				}
				return nil
			})
			switch {
			case want[id] == "":
				if d.Problem != nil || d.LastSeq != 2 {
					t.Errorf("projector: %s at seq %d, problem %+v; want the session read", d.Status, d.LastSeq, d.Problem)
				}
			case d.Problem == nil || d.Problem.Message != want[id] || d.LastSeq != 2:
				t.Errorf("projector: %s at seq %d, problem %+v; want %q", d.Status, d.LastSeq, d.Problem, want[id])
			case tc.kind == logstore.KindGap && d.Status != projector.StatusGap, tc.kind != logstore.KindGap && d.Status != projector.StatusUnreadable:
				t.Errorf("projector: status %s for a message of kind %s", d.Status, tc.kind)
			}

			// The projector's events: those before the bad message, then
			// its marker.
			resp, err := http.Get(httpSrv.URL + "/v1/sessions/" + id + "/events")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var evs httpapi.Events
			if err := json.Unmarshal(b, &evs); err != nil {
				t.Fatalf("events: %d %s", resp.StatusCode, b)
			}
			if want[id] == "" && (evs.Error != nil || len(evs.Events) != 2) {
				t.Errorf("events: %s", b)
			}
			if want[id] != "" && (evs.Error == nil || evs.Error.Message != want[id] || evs.Error.Code != d.Status || len(evs.Events) != 3) {
				t.Errorf("events: %s, want 2 events and the marker %q", b, want[id])
			}

			// The repairer on demand, the forker.
			_, err = r.Repair(ctx, id, true)
			code, msg := codeOf(err)
			same(t, id, "repair", code, msg)
			_, err = f.Fork(ctx, forker.Request{ParentID: id, ChildID: "child-" + id})
			code, msg = codeOf(err)
			same(t, id, "fork", code, msg)

			// The verbs.
			for _, verb := range []string{"show", "replay"} {
				exit, stdout, stderr := cli(verb, id)
				if want[id] == "" {
					if exit != 0 {
						t.Errorf("%s: exit %d\n%s%s", verb, exit, stdout, stderr)
					}
				} else if exit != 1 || !strings.Contains(stderr, want[id]) {
					t.Errorf("%s: exit %d, want 1 and %q\n%s%s", verb, exit, want[id], stdout, stderr)
				}
				if verb == "replay" && strings.Count(stdout, "\n") != 2 {
					t.Errorf("replay printed %d events, want 2:\n%s", strings.Count(stdout, "\n"), stdout)
				}
			}
			_, stdout, stderr := cli("verify", "--session", id)
			line := "kind=unreadable: " + want[id]
			if got := strings.Contains(stdout, "kind=unreadable"); got != (want[id] != "") || (want[id] != "" && !strings.Contains(stdout, line)) {
				t.Errorf("verify: want %q\n%s%s", line, stdout, stderr)
			}
		})
	}

	// export: every readable session whole, none of the others.
	_, stdout, stderr := cli("export")
	for _, tc := range cases {
		id := "j-" + tc.name
		lines := strings.Count(stdout, `"sessionId":"`+id+`","seq":`)
		if want[id] == "" && lines != 2 {
			t.Errorf("export: %d events of %s, want 2", lines, id)
		}
		if want[id] != "" && (lines != 0 || !strings.Contains(stderr, want[id])) {
			t.Errorf("export: %d events of %s, want none and %q in\n%s", lines, id, want[id], stderr)
		}
	}

	// The writer's append, last (it changes a readable session): from a
	// writer that folds the session cold.
	for _, tc := range cases {
		id := "j-" + tc.name
		body, e := request(api.SubjectAppend, map[string]any{"sessionId": id, "events": []map[string]any{
			{"type": schema.TypeMessageUser, "eventId": "next", "data": map[string]any{"content": "next"}},
		}})
		same(t, id, tc.name+": append", string(e.Code), e.Message)
		if e.Code == "" && !strings.Contains(string(body), `"lastSeq":3`) {
			t.Errorf("%s: append: %s", tc.name, body)
		}
	}
}
