package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/natstest/tamper"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector/httpapi"
	"github.com/sessionlog/sessionlog/services/projector/internal/projectortest"
)

// TestWatchStopsAtHostileMessage: a watch, opened before or after a
// message that is not the session's next event lands on its subject, sends
// the events before it, then an error event with code unreadable, and
// nothing of that message or after it.
func TestWatchStopsAtHostileMessage(t *testing.T) {
	e := projectortest.NewEnv(t)
	r := e.Start(t.TempDir())
	r.WaitReady(t)
	for _, h := range projectortest.Hostiles {
		t.Run(h.Name, func(t *testing.T) {
			bad, other := "wbad-"+h.Name, "wok-"+h.Name
			badS := gen.NewSession(bad, projectortest.T0)
			projectortest.PublishN(t, e, badS, 4)
			ctx, cancel := context.WithTimeout(e.Ctx, 30*time.Second)
			defer cancel()
			early := watchUntilEnd(t, ctx, r.Srv.URL+"/v1/sessions/"+bad+"/watch?after=0")
			body, seq := h.Body(bad, other)
			projectortest.PublishHostile(t, e, bad, body, seq)
			projectortest.PublishN(t, e, badS, 2)
			late := watchUntilEnd(t, ctx, r.Srv.URL+"/v1/sessions/"+bad+"/watch?after=0")
			for name, ch := range map[string]<-chan watchResult{"opened before": early, "opened after": late} {
				got := <-ch
				if got.err != nil {
					t.Fatalf("%s: %v", name, got.err)
				}
				if !reflect.DeepEqual(got.seqs, []uint64{1, 2, 3, 4}) || got.endCode != string(schema.CodeUnreadable) || got.resumeAfter != 4 {
					t.Fatalf("%s: durable seqs %v, end %q resumeAfter %d", name, got.seqs, got.endCode, got.resumeAfter)
				}
				if strings.Contains(got.raw, `"content":"forged"`) || strings.Contains(got.raw, "not an event {") {
					t.Fatalf("%s: the hostile message reached the client:\n%s", name, got.raw)
				}
			}
		})
	}
}

// TestWatchStopsAtSealedBodyThatDoesNotOpen: under sealing, a watch that
// meets a sealed body that does not open with its session's key (its
// stored bytes changed) ends as at any unreadable message: the events
// before it, then an error event of code unreadable that says the body
// does not open, nothing of it or after it; opened before the message is
// stored (the follow meets it live) and after.
func TestWatchStopsAtSealedBodyThatDoesNotOpen(t *testing.T) {
	e, r, ws := sealedEnv(t)
	const id = "wsealed"
	s := gen.NewSession(id, projectortest.T0)
	var err error
	publish := func(ev schema.Envelope) {
		t.Helper()
		if _, err := gen.Publish(e.Ctx, ws, ev); err != nil {
			t.Fatal(err)
		}
	}
	for range 4 {
		publish(s.Next())
	}
	if !tamper.Sealed(t, e.NC, "SESSIONS", logstore.SubjectPrefix+id) {
		t.Fatal("the session is not stored sealed")
	}
	ctx, cancel := context.WithTimeout(e.Ctx, 30*time.Second)
	defer cancel()
	url := r.Srv.URL + "/v1/sessions/" + id + "/watch?after=0"
	early := watchUntilEnd(t, ctx, url)
	// Event 5 sealed with the session's key, then a byte of it changed.
	ev := s.Next()
	m := &logstore.Msg{Subject: logstore.SubjectPrefix + id, Header: nats.Header{}}
	m.Header.Set(logstore.HeaderMsgID, id+":"+ev.EventID)
	m.Header.Set(logstore.HeaderSeq, "5")
	if m.Data, err = schema.Encode(&ev); err != nil {
		t.Fatal(err)
	}
	if err := ws.Seal(e.Ctx, m); err != nil {
		t.Fatal(err)
	}
	m.Data[len(m.Data)-1] ^= 1
	js := natstest.JetStream(t, e.NC)
	if _, err := js.PublishMsg(e.Ctx, &nats.Msg{Subject: m.Subject, Header: m.Header, Data: m.Data}); err != nil {
		t.Fatal(err)
	}
	// Event 6 after it, stored plain around the writer (which cannot
	// chain it after a tail that does not open).
	ev = s.Next()
	six := nats.NewMsg(m.Subject)
	six.Header.Set(logstore.HeaderSeq, "6")
	if six.Data, err = schema.Encode(&ev); err != nil {
		t.Fatal(err)
	}
	if _, err := js.PublishMsg(e.Ctx, six); err != nil {
		t.Fatal(err)
	}
	late := watchUntilEnd(t, ctx, url)
	for name, ch := range map[string]<-chan watchResult{"opened before": early, "opened after": late} {
		got := <-ch
		if got.err != nil {
			t.Fatalf("%s: %v", name, got.err)
		}
		if !reflect.DeepEqual(got.seqs, []uint64{1, 2, 3, 4}) || got.endCode != string(schema.CodeUnreadable) || got.resumeAfter != 4 ||
			!strings.Contains(got.endMessage, "the sealed body does not open") {
			t.Fatalf("%s: durable seqs %v, end %q %q resumeAfter %d", name, got.seqs, got.endCode, got.endMessage, got.resumeAfter)
		}
		t.Logf("%s: %s", name, got.endMessage)
	}
}

// TestWatchStopsAtUnreadableTail: a watch of a session whose last message
// is unreadable starts as any watch and ends at that message as at an
// unreadable message elsewhere: the events before it, then an error event
// of code unreadable. The message is a sealed body that does not open
// (its stored bytes changed), or a plain body that is not an event and
// claims no seq (an after up to the events before it is taken).
func TestWatchStopsAtUnreadableTail(t *testing.T) {
	e, r, ws := sealedEnv(t)
	const sealed, garbage = "wsealedtail", "wgarbagetail"
	s := gen.NewSession(sealed, projectortest.T0)
	for range 4 {
		if _, err := gen.Publish(e.Ctx, ws, s.Next()); err != nil {
			t.Fatal(err)
		}
	}
	tamper.BreakChainAt(t, e.NC, "SESSIONS", logstore.SubjectPrefix+sealed, tamper.BreakGarble, 3)
	if !tamper.Sealed(t, e.NC, "SESSIONS", logstore.SubjectPrefix+sealed) {
		t.Fatal("the session is not stored sealed")
	}
	projectortest.PublishN(t, e, gen.NewSession(garbage, projectortest.T0), 4)
	body, seq := projectortest.Hostiles[0].Body(garbage, "")
	projectortest.PublishHostile(t, e, garbage, body, seq)
	ctx, cancel := context.WithTimeout(e.Ctx, 30*time.Second)
	defer cancel()
	for _, c := range []struct {
		id, after, says string
		seqs            []uint64
	}{
		{sealed, "0", "the sealed body does not open", []uint64{1, 2, 3}},
		{garbage, "2", "is not an event", []uint64{3, 4}},
	} {
		got := <-watchUntilEnd(t, ctx, r.Srv.URL+"/v1/sessions/"+c.id+"/watch?after="+c.after)
		if got.err != nil {
			t.Fatalf("%s: %v", c.id, got.err)
		}
		if !reflect.DeepEqual(got.seqs, c.seqs) || got.endCode != string(schema.CodeUnreadable) || got.resumeAfter != c.seqs[len(c.seqs)-1] ||
			!strings.Contains(got.endMessage, c.says) {
			t.Fatalf("%s: durable seqs %v, end %q %q resumeAfter %d", c.id, got.seqs, got.endCode, got.endMessage, got.resumeAfter)
		}
		t.Logf("%s: %s", c.id, got.endMessage)
	}
}

// sealedEnv is a projector serving the read API, ready, and a store on its
// server that seals the bodies it writes.
func sealedEnv(t *testing.T) (*projectortest.Env, *projectortest.Running, *logstore.Store) {
	t.Helper()
	e := projectortest.NewEnv(t)
	ws, err := logstore.Open(e.Ctx, e.NC, logstore.Config{SealBodies: true})
	if err != nil {
		t.Fatal(err)
	}
	r := e.Start(t.TempDir())
	r.WaitReady(t)
	return e, r, ws
}

type watchResult struct {
	seqs        []uint64
	endCode     string
	endMessage  string
	resumeAfter uint64
	raw         string
	err         error
}

// watchUntilEnd reads a watch until its error event (or ctx ends).
func watchUntilEnd(t *testing.T, ctx context.Context, url string) <-chan watchResult {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("watch: %d %s", resp.StatusCode, b)
	}
	out := make(chan watchResult, 1)
	go func() {
		defer resp.Body.Close()
		var res watchResult
		var raw strings.Builder
		err := projectortest.ReadSSE(io.TeeReader(resp.Body, &raw), func(id, kind string, ev httpapi.WatchEvent, data string) {
			switch kind {
			case "durable":
				res.seqs = append(res.seqs, ev.Seq)
			case "error":
				var end httpapi.WatchEnd
				if err := json.Unmarshal([]byte(data), &end); err == nil {
					res.endCode, res.endMessage, res.resumeAfter = end.Error.Code, end.Error.Message, end.ResumeAfter
				}
			}
		})
		res.raw = raw.String()
		if res.endCode == "" {
			res.err = fmt.Errorf("the watch ended without an error event (%v): %s", err, res.raw)
		}
		out <- res
	}()
	return out
}
