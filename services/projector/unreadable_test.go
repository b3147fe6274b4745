package projector_test

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/projector/httpapi"
	"github.com/sessionlog/sessionlog/services/projector/internal/projectortest"
)

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

	for _, h := range projectortest.Hostiles {
		t.Run(h.Name, func(t *testing.T) {
			bad, ok := "bad-"+h.Name, "ok-"+h.Name
			badS, okS := gen.NewSession(bad, projectortest.T0), gen.NewSession(ok, projectortest.T0)
			good := projectortest.PublishN(t, e, badS, 4)
			body, seq := h.Body(bad, ok)
			projectortest.PublishHostile(t, e, bad, body, seq)
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
		projectortest.PublishHostile(t, e, id, []byte("not an event"), 0)
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
	for _, h := range projectortest.Hostiles {
		never5xx(t, r3, "bad-"+h.Name)
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
	if len(out) != 2*len(projectortest.Hostiles)+1 {
		t.Fatalf("%d sessions listed, want %d", len(out), 2*len(projectortest.Hostiles)+1)
	}
	return out
}
