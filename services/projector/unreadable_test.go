package projector_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/projector/httpapi"
	"github.com/sessionlog/sessionlog/services/projector/internal/projectortest"
)

// hostile is a message written straight to a session's subject, around
// the writer, by a connection allowed to (here the test's superuser).
type hostile struct {
	name string
	// body of the message for session id whose events 1..4 are stored;
	// seq is its SL-Seq header (0: none).
	body func(id, other string) (body []byte, seq uint64)
}

func envelope(id string, seq uint64, eventID string) []byte {
	b, err := schema.Encode(&schema.Envelope{SchemaVersion: schema.Version, SessionID: id, Seq: seq, EventID: eventID,
		Time: projectortest.T0, Type: schema.TypeMessageUser, Data: json.RawMessage(`{"content":"forged"}`)})
	if err != nil {
		panic(err)
	}
	return b
}

var hostiles = []hostile{
	{"Garbage", func(id, _ string) ([]byte, uint64) { return []byte("\x00\xff not an event {"), 0 }},
	{"GarbageWithSeqHeader", func(id, _ string) ([]byte, uint64) { return []byte(`{"seq":5`), 5 }},
	{"ForgedSeqBackwards", func(id, _ string) ([]byte, uint64) { return envelope(id, 2, "forged-2"), 2 }},
	{"ForgedSeqRepeat", func(id, _ string) ([]byte, uint64) { return envelope(id, 4, "forged-4"), 4 }},
	{"ForeignSession", func(_, other string) ([]byte, uint64) { return envelope(other, 5, "forged-5"), 5 }},
	{"NewerSchema", func(id, _ string) ([]byte, uint64) {
		return []byte(`{"schemaVersion":9,"sessionId":"` + id + `","seq":5,"eventId":"forged-5","time":"2026-12-01T10:00:00Z","type":"message/user","data":{"content":"forged"}}`), 5
	}},
}

func publishHostile(t *testing.T, e *projectortest.Env, id string, body []byte, seq uint64) {
	t.Helper()
	loc, _ := logstore.Locate(id)
	m := nats.NewMsg(loc.Subject)
	m.Data = body
	m.Header.Set(logstore.HeaderMsgID, id+":hostile")
	if seq != 0 {
		m.Header.Set(logstore.HeaderSeq, strconv.FormatUint(seq, 10))
	}
	if _, err := rawJS(t, e).PublishMsg(e.Ctx, m); err != nil {
		t.Fatal(err)
	}
}

// TestHostileMessageMakesSessionUnreadable: a message that is not a valid
// event of its session stops that session unreadable, a definite answer
// on every endpoint (never 5xx, never a foreign or misplaced event), while
// every other session keeps folding, across a restart and a rebuild.
func TestHostileMessageMakesSessionUnreadable(t *testing.T) {
	e := projectortest.NewEnv(t)
	dir := t.TempDir()
	r := e.Start(dir)
	r.WaitReady(t)
	// A projector that folds nothing: its handlers see every message as
	// not judged yet and must check them themselves.
	idle, err := projector.New(projector.Config{Store: e.LS, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	idleSrv := httptest.NewServer(idle.Handler())
	t.Cleanup(func() { idleSrv.Close(); idle.DB().Close() })
	unjudged := &projectortest.Running{Service: idle, Srv: idleSrv}

	for _, h := range hostiles {
		t.Run(h.name, func(t *testing.T) {
			bad, ok := "bad-"+h.name, "ok-"+h.name
			badS, okS := gen.NewSession(bad, projectortest.T0), gen.NewSession(ok, projectortest.T0)
			good := projectortest.PublishN(t, e, badS, 4)
			body, seq := h.body(bad, ok)
			publishHostile(t, e, bad, body, seq)
			projectortest.PublishN(t, e, okS, 3)
			projectortest.PublishN(t, e, badS, 2) // seqs 5 and 6, after the bad message
			projectortest.PublishN(t, e, okS, 3)

			d := r.WaitSession(t, bad, func(d httpapi.Detail) bool { return d.Status == projector.StatusUnreadable })
			if d.LastSeq != 4 || d.Problem == nil || d.Problem.Seq != 5 || d.Problem.Code != string(schema.CodeUnreadable) {
				t.Fatalf("bad session: lastSeq %d problem %+v", d.LastSeq, d.Problem)
			}
			o := r.WaitSession(t, ok, func(d httpapi.Detail) bool { return d.LastSeq == 6 })
			if o.Problem != nil {
				t.Fatalf("the other session: %s %+v", o.Status, o.Problem)
			}

			checkEvents(t, r, bad, good, true)
			checkEvents(t, unjudged, bad, good, true)
			for _, rr := range []*projectortest.Running{r, unjudged} {
				code, b := rr.Get(t, "/v1/sessions/"+ok+"/events")
				if code != 200 || strings.Contains(string(b), "forged-") {
					t.Fatalf("the other session's events: %d %s", code, b)
				}
			}
			code, b := r.Get(t, "/v1/sessions/"+bad+"/context")
			if code != 409 || !strings.Contains(string(b), `"code":"unreadable"`) {
				t.Fatalf("context: %d %s", code, b)
			}
			for _, rr := range []*projectortest.Running{r, unjudged} {
				never5xx(t, rr, bad)
				never5xx(t, rr, ok)
			}
		})
	}

	// Garbage as a session's last message: its tail cannot be read, which
	// is as definite an answer before the projector judges it as after.
	t.Run("GarbageAtTail", func(t *testing.T) {
		id := "bad-tail"
		good := projectortest.PublishN(t, e, gen.NewSession(id, projectortest.T0), 3)
		publishHostile(t, e, id, []byte("not an event"), 0)
		code, b := unjudged.Get(t, "/v1/sessions/"+id+"/events")
		if code != 409 || !strings.Contains(string(b), `"code":"unreadable"`) {
			t.Fatalf("unjudged events: %d %s", code, b)
		}
		d := r.WaitSession(t, id, func(d httpapi.Detail) bool { return d.Status == projector.StatusUnreadable })
		if d.LastSeq != 3 || d.Problem.Seq != 4 {
			t.Fatalf("lastSeq %d problem %+v", d.LastSeq, d.Problem)
		}
		checkEvents(t, r, id, good, true)
		never5xx(t, r, id)
		never5xx(t, unjudged, id)
	})

	// The checkpoint keeps moving: it reaches the stream's end.
	natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		last, err := e.LS.LastStreamSeq(e.Ctx, "SESSIONS")
		if err != nil {
			return err
		}
		cp, _, err := r.DB().Checkpoint()
		if err != nil || len(cp.Streams) == 0 || cp.Streams[0].Seq != last {
			return fmt.Errorf("checkpoint %+v, stream end %d (%v)", cp.Streams, last, err)
		}
		return nil
	})
	projectortest.CheckRebuild(t, e, r)
	before := summaries(t, r)

	// A restart resumes with the same verdicts; so does a clean rebuild.
	r.Stop(t)
	r2 := e.Start(dir)
	r2.WaitReady(t)
	if got := summaries(t, r2); !reflect.DeepEqual(got, before) {
		t.Fatalf("after a restart:\n%v\nwant\n%v", got, before)
	}
	r3 := e.Start(filepath.Join(t.TempDir(), "fresh"))
	r3.WaitReady(t)
	if got := summaries(t, r3); !reflect.DeepEqual(got, before) {
		t.Fatalf("after a rebuild:\n%v\nwant\n%v", got, before)
	}
	for _, h := range hostiles {
		never5xx(t, r3, "bad-"+h.name)
	}
}

// checkEvents pages through a session's events one at a time: the good
// events in order, then (when marked) the marker and error, never anything
// of the bad message or after it.
func checkEvents(t *testing.T, r *projectortest.Running, id string, good []schema.Envelope, marked bool) {
	t.Helper()
	var got []schema.Envelope
	var after uint64
	for page := 0; ; page++ {
		if page > 10 {
			t.Fatalf("%s: events do not end", id)
		}
		code, b := r.Get(t, fmt.Sprintf("/v1/sessions/%s/events?after=%d&limit=1", id, after))
		if code == 409 && strings.Contains(string(b), `"code":"unreadable"`) && !marked {
			break // the unjudged tail is not an event: no page at all
		}
		if code != 200 {
			t.Fatalf("%s events after %d: %d %s", id, after, code, b)
		}
		var ev httpapi.Events
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatal(err)
		}
		for _, raw := range ev.Events {
			if strings.Contains(string(raw), `"content":"forged"`) {
				t.Fatalf("%s: the bad message is served: %s", id, raw)
			}
			var probe struct {
				Unreadable bool `json:"unreadable"`
			}
			json.Unmarshal(raw, &probe)
			if probe.Unreadable {
				if ev.Error == nil || ev.Error.Code != string(schema.CodeUnreadable) || ev.Error.Seq != uint64(len(good))+1 || ev.More {
					t.Fatalf("%s: marker %s error %+v more %v", id, raw, ev.Error, ev.More)
				}
				continue
			}
			e, err := schema.Decode(raw)
			if err != nil {
				t.Fatalf("%s: %v: %s", id, err, raw)
			}
			got = append(got, e)
		}
		if !ev.More {
			if marked && ev.Error == nil {
				t.Fatalf("%s: the events end without the error", id)
			}
			break
		}
		after = ev.Next
	}
	if len(got) > len(good) {
		t.Fatalf("%s: %d events served, want at most the %d before the bad message", id, len(got), len(good))
	}
	if marked && len(got) != len(good) {
		t.Fatalf("%s: %d events served, want %d", id, len(got), len(good))
	}
	for i, e := range got {
		if e.SessionID != id || e.Seq != uint64(i+1) || e.EventID != good[i].EventID {
			t.Fatalf("%s: event %d is %s seq %d %s", id, i, e.SessionID, e.Seq, e.EventID)
		}
	}
}

// never5xx asks every read endpoint about a session with odd and
// ordinary parameters: none may answer a server error.
func never5xx(t *testing.T, r *projectortest.Running, id string) {
	t.Helper()
	paths := []string{"/v1/sessions/" + id, "/v1/sessions/" + id + "/context", "/v1/sessions?status=unreadable", "/v1/sessions?status=gap", "/v1/sessions"}
	for _, after := range []string{"", "0", "1", "3", "4", "5", "6", "7", "100", "18446744073709551615", "-1", "x"} {
		for _, limit := range []string{"", "1", "2", "4", "1000", "0", "1001"} {
			paths = append(paths, fmt.Sprintf("/v1/sessions/%s/events?after=%s&limit=%s", id, after, limit))
		}
	}
	for _, p := range paths {
		if code, b := r.Get(t, p); code >= 500 {
			t.Fatalf("GET %s: %d %s", p, code, b)
		}
	}
}

// summaries lists every session's summary as the projector serves it.
func summaries(t *testing.T, r *projectortest.Running) map[string]string {
	t.Helper()
	out := map[string]string{}
	var list httpapi.List
	r.GetJSON(t, "/v1/sessions?limit=1000", &list)
	for _, s := range list.Sessions {
		b, _ := json.Marshal(s)
		out[s.SessionID] = string(b)
	}
	if len(out) != 2*len(hostiles)+1 {
		t.Fatalf("%d sessions listed, want %d", len(out), 2*len(hostiles)+1)
	}
	return out
}

// TestWatchStopsAtHostileMessage: a watch, opened before or after a
// message that is not the session's next event lands on its subject, sends
// the events before it, then an error event with code unreadable, and
// nothing of that message or after it.
func TestWatchStopsAtHostileMessage(t *testing.T) {
	e := projectortest.NewEnv(t)
	r := e.Start(t.TempDir())
	r.WaitReady(t)
	for _, h := range hostiles {
		t.Run(h.name, func(t *testing.T) {
			bad, other := "wbad-"+h.name, "wok-"+h.name
			badS := gen.NewSession(bad, projectortest.T0)
			projectortest.PublishN(t, e, badS, 4)
			ctx, cancel := context.WithTimeout(e.Ctx, 30*time.Second)
			defer cancel()
			early := watchUntilEnd(t, ctx, r.Srv.URL+"/v1/sessions/"+bad+"/watch?after=0")
			body, seq := h.body(bad, other)
			publishHostile(t, e, bad, body, seq)
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

type watchResult struct {
	seqs        []uint64
	endCode     string
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
		t.Fatalf("watch: %d", resp.StatusCode)
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
					res.endCode, res.resumeAfter = end.Error.Code, end.ResumeAfter
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
