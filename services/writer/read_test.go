package writer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/natstest/tamper"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/writer"
)

// readReq sends a request on sessions.api.read and returns the page or the
// error body (whose code must match the micro error header).
func readReq(t *testing.T, nc *nats.Conn, body string) (api.ReadReply, *api.ErrorDetail, int) {
	t.Helper()
	m, err := nc.Request(api.SubjectRead, []byte(body), 20*time.Second)
	if err != nil {
		t.Fatalf("read %s: %v", body, err)
	}
	if code := m.Header.Get(micro.ErrorCodeHeader); code != "" {
		var eb api.ErrorBody
		if err := json.Unmarshal(m.Data, &eb); err != nil || string(eb.Error.Code) != code {
			t.Fatalf("error reply %q (header %s): %v", m.Data, code, err)
		}
		return api.ReadReply{}, &eb.Error, len(m.Data)
	}
	var r api.ReadReply
	if err := json.Unmarshal(m.Data, &r); err != nil {
		t.Fatalf("reply %q: %v", m.Data, err)
	}
	return r, nil, len(m.Data)
}

func seqs(t *testing.T, evs []json.RawMessage) []uint64 {
	t.Helper()
	out := make([]uint64, len(evs))
	for i, b := range evs {
		e, err := schema.Decode(b)
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		out[i] = e.Seq
	}
	return out
}

// checkRun checks that got holds seqs from, from+1, ...
func checkRun(t *testing.T, got []uint64, from uint64, n int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("%d events, want %d", len(got), n)
	}
	for i, s := range got {
		if s != from+uint64(i) {
			t.Fatalf("event %d has seq %d, want %d", i, s, from+uint64(i))
		}
	}
}

func TestRead(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	const n = 2500
	if _, err := gen.Seed(ctx, e.st, "big", n, 500); err != nil {
		t.Fatal(err)
	}
	// Another session interleaved, so stream seqs are not session seqs.
	mustOK(t, e.nc, map[string]any{"sessionId": "other", "expectedSeq": 0, "events": events(created())})
	mustOK(t, e.nc, map[string]any{"sessionId": "small", "expectedSeq": 0, "events": events(created())})
	mustOK(t, e.nc, map[string]any{"sessionId": "other", "events": events(ev(schema.TypeTurnStarted, "turnId", "t1"))})
	mustOK(t, e.nc, map[string]any{"sessionId": "small", "events": events(ev(schema.TypeTurnStarted, "turnId", "t1"))})

	t.Run("Pages", func(t *testing.T) {
		var all []uint64
		after, pages := uint64(0), 0
		for {
			r, ed, _ := readReq(t, e.nc, `{"sessionId":"big","afterSeq":`+strconv.FormatUint(after, 10)+`}`)
			if ed != nil {
				t.Fatalf("page after %d: %s: %s", after, ed.Code, ed.Message)
			}
			pages++
			if r.SessionID != "big" || r.LastSeq != n {
				t.Fatalf("page %+v", r)
			}
			got := seqs(t, r.Events)
			if len(got) > api.DefaultReadLimit {
				t.Fatalf("page of %d events", len(got))
			}
			all = append(all, got...)
			if !r.More {
				break
			}
			after = got[len(got)-1]
		}
		if pages != 3 {
			t.Fatalf("%d pages, want 3 (1000, 1000, 500)", pages)
		}
		checkRun(t, all, 1, n)
	})
	t.Run("AfterSeqInTheMiddle", func(t *testing.T) {
		r, ed, _ := readReq(t, e.nc, `{"sessionId":"big","afterSeq":1234,"limit":100}`)
		if ed != nil {
			t.Fatal(ed.Message)
		}
		checkRun(t, seqs(t, r.Events), 1235, 100)
		if !r.More || r.LastSeq != n {
			t.Fatalf("more %v lastSeq %d", r.More, r.LastSeq)
		}
		r, _, _ = readReq(t, e.nc, `{"sessionId":"big","afterSeq":2400,"limit":100}`)
		checkRun(t, seqs(t, r.Events), 2401, 100)
		if r.More {
			t.Fatal("more after the last event")
		}
		r, _, _ = readReq(t, e.nc, `{"sessionId":"big","afterSeq":2500}`)
		if len(r.Events) != 0 || r.More || r.LastSeq != n {
			t.Fatalf("after the tail: %+v", r)
		}
		r, _, _ = readReq(t, e.nc, `{"sessionId":"small","afterSeq":1}`)
		checkRun(t, seqs(t, r.Events), 2, 1)
		if r.More || r.LastSeq != 2 {
			t.Fatalf("small: %+v", r)
		}
	})
	t.Run("LimitBounds", func(t *testing.T) {
		r, ed, _ := readReq(t, e.nc, `{"sessionId":"big","limit":1}`)
		if ed != nil || len(r.Events) != 1 || !r.More {
			t.Fatalf("limit 1: %+v %+v", r, ed)
		}
		r, ed, _ = readReq(t, e.nc, `{"sessionId":"big","afterSeq":5,"limit":1000}`)
		if ed != nil {
			t.Fatal(ed.Message)
		}
		checkRun(t, seqs(t, r.Events), 6, 1000)
		for _, body := range []string{`{"sessionId":"big","limit":1001}`, `{"sessionId":"big","limit":-1}`, `{"sessionId":"big","afterSeq":-1}`} {
			if _, ed, _ := readReq(t, e.nc, body); ed == nil || ed.Code != api.CodeBadRequest {
				t.Fatalf("%s: %+v, want bad_request", body, ed)
			}
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		if _, ed, _ := readReq(t, e.nc, `{"sessionId":"nobody"}`); ed == nil || ed.Code != api.CodeNotFound {
			t.Fatalf("%+v, want not_found", ed)
		}
	})
	t.Run("ErrBadRequest", func(t *testing.T) {
		for _, body := range []string{`{"sessionId":"a.b"}`, `{"sessionId":"a*"}`, `{"sessionId":""}`, `{}`, `not json`,
			`{"sessionId":"` + strings.Repeat("x", 129) + `"}`, `{"sessionId":"big","extra":1}`} {
			if _, ed, _ := readReq(t, e.nc, body); ed == nil || ed.Code != api.CodeBadRequest {
				t.Fatalf("%s: %+v, want bad_request", body, ed)
			}
		}
	})
	t.Run("InProcess", func(t *testing.T) {
		r, err := e.w.Read(ctx, api.ReadRequest{SessionID: "big", AfterSeq: 999, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		checkRun(t, seqs(t, r.Events), 1000, 2)
		r2, err := writer.StoreReader{Store: e.st}.Read(ctx, api.ReadRequest{SessionID: "big", AfterSeq: 999, Limit: 2})
		if err != nil || string(writer.EncodeReadReply(r)) != string(writer.EncodeReadReply(r2)) {
			t.Fatalf("store reader: %v", err)
		}
	})
}

// Pages stay under the server's max payload: a page stops before the
// event that would pass it, and the next page starts with that event.
func TestReadMaxPayload(t *testing.T) {
	opts := natstest.Options(t.TempDir())
	opts.MaxPayload = 64 << 10
	srv, err := natstest.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	e := newEnv(t, envOpts{srv: srv, store: logstore.Config{MaxEventBytes: 32 << 10}})
	mustOK(t, e.nc, map[string]any{"sessionId": "fat", "expectedSeq": 0, "events": events(created())})
	const n = 30
	for i := 0; i < n; i++ {
		text := strings.Repeat(string(rune('a'+i%26)), 9000+i*300)
		mustOK(t, e.nc, map[string]any{"sessionId": "fat", "events": events(ev(schema.TypeGoalUpdated, "data", map[string]any{"revision": i + 1, "objective": text, "status": "active"}))})
	}
	var all []uint64
	after, pages := uint64(0), 0
	for {
		r, ed, size := readReq(t, e.nc, `{"sessionId":"fat","afterSeq":`+strconv.FormatUint(after, 10)+`}`)
		if ed != nil {
			t.Fatalf("%s: %s", ed.Code, ed.Message)
		}
		if size > int(e.nc.MaxPayload()) {
			t.Fatalf("reply of %d bytes over the max payload %d", size, e.nc.MaxPayload())
		}
		if len(r.Events) == 0 {
			t.Fatal("empty page")
		}
		pages++
		got := seqs(t, r.Events)
		all = append(all, got...)
		if !r.More {
			break
		}
		after = got[len(got)-1]
	}
	checkRun(t, all, 1, n+1)
	if pages < 5 {
		t.Fatalf("%d pages for %d events of ~10KB under 64KB", pages, n)
	}

	// An event that cannot fit in a reply at all is refused, not skipped.
	_, err = writer.StoreReader{Store: e.st, MaxBytes: 4096}.Read(context.Background(), api.ReadRequest{SessionID: "fat", AfterSeq: 1})
	if schema.CodeOf(err) != schema.CodeTooLarge {
		t.Fatalf("%v, want too_large", err)
	}
}

// Pages of a session stored among another session's messages, on every
// layout: read page by page, from the middle, and through a limit, the
// reads hold every seq once in order; once the session's erasure is
// recorded, a read answers erased.
func TestReadInterleaved(t *testing.T) { natstest.ForEachLayout(t, testReadInterleaved) }

func testReadInterleaved(t *testing.T, l natstest.Layout) {
	e := newEnvLayout(t, l, envOpts{})
	ctx := context.Background()
	const sid, n = "mix", 1200
	loc, _ := e.st.Locate(sid)
	other := ""
	for i := 0; other == ""; i++ {
		if o, _ := e.st.Locate("mix-other-" + strconv.Itoa(i)); o.Stream == loc.Stream {
			other = "mix-other-" + strconv.Itoa(i)
		}
	}
	exact := func(id string) []schema.Envelope {
		var out []schema.Envelope
		if err := gen.Exact(id, n, func(ev schema.Envelope) error { out = append(out, ev); return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	evs := map[string][]schema.Envelope{sid: exact(sid), other: exact(other)}
	expected := map[string]uint64{}
	for i := 0; len(evs[sid]) > 0; i++ {
		for _, id := range []string{sid, other} {
			k := min(1+i%17, len(evs[id]))
			r, err := e.st.Append(ctx, logstore.AppendRequest{SessionID: id, ExpectedStreamSeq: expected[id], Events: evs[id][:k]})
			if err != nil {
				t.Fatal(err)
			}
			expected[id], evs[id] = r.StreamSeq, evs[id][k:]
		}
	}
	var all []uint64
	for after := uint64(0); ; {
		r, ed, _ := readReq(t, e.nc, `{"sessionId":"mix","limit":300,"afterSeq":`+strconv.FormatUint(after, 10)+`}`)
		if ed != nil {
			t.Fatalf("page after %d: %s: %s", after, ed.Code, ed.Message)
		}
		got := seqs(t, r.Events)
		checkRun(t, got, after+1, min(300, n-int(after)))
		if r.LastSeq != n || r.More != (after+uint64(len(got)) < n) {
			t.Fatalf("after %d: lastSeq %d more %v", after, r.LastSeq, r.More)
		}
		all = append(all, got...)
		if !r.More {
			break
		}
		after = got[len(got)-1]
	}
	checkRun(t, all, 1, n)
	for _, after := range []int{1, 17, 599, 1000, n - 1} {
		r, ed, _ := readReq(t, e.nc, `{"sessionId":"mix","afterSeq":`+strconv.Itoa(after)+`}`)
		if ed != nil {
			t.Fatalf("after %d: %s", after, ed.Message)
		}
		checkRun(t, seqs(t, r.Events), uint64(after)+1, min(api.DefaultReadLimit, n-after))
	}

	if _, _, err := e.st.MarkErased(ctx, logstore.Erasure{SessionID: sid, By: "test", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{`{"sessionId":"mix"}`, `{"sessionId":"mix","afterSeq":600}`} {
		if _, ed, _ := readReq(t, e.nc, body); ed == nil || ed.Code != api.CodeErased {
			t.Fatalf("%s after the erasure record: %+v, want erased", body, ed)
		}
	}
	if r, ed, _ := readReq(t, e.nc, `{"sessionId":"`+other+`","afterSeq":1190}`); ed != nil || len(r.Events) != 10 {
		t.Fatalf("the other session: %+v %+v", r, ed)
	}
}

// judgedPage is the page the judge gives (DESIGN.md section 5, "Reading
// stored messages"): the session read from its start, its events after
// after up to limit, more when one follows them; when the judge stops at
// an unreadable message before the page is full and one more event is
// read, its verdict instead.
func judgedPage(t *testing.T, st *logstore.Store, sid string, after uint64, limit int) (seqs []uint64, more bool, verdict string) {
	t.Helper()
	_, err := st.ReadJudged(context.Background(), &logstore.Judge{SessionID: sid}, func(_ *logstore.Msg, ev *schema.Envelope) error {
		if ev.Seq > after {
			if seqs = append(seqs, ev.Seq); len(seqs) > limit {
				return logstore.ErrStop
			}
		}
		return nil
	})
	switch {
	case len(seqs) > limit:
		return seqs[:limit], true, ""
	case errors.Is(err, logstore.ErrUnreadable):
		return nil, false, err.Error()
	case err != nil:
		t.Fatal(err)
	}
	return seqs, false, ""
}

// checkJudgedPage reads the page of sid after after, of at most limit
// events, and checks it against the page the judge gives (judgedPage),
// its lastSeq against lastSeq.
func checkJudgedPage(t *testing.T, e *env, sid string, after uint64, limit int, lastSeq uint64) {
	t.Helper()
	wantSeqs, wantMore, verdict := judgedPage(t, e.st, sid, after, limit)
	body := fmt.Sprintf(`{"sessionId":%q,"afterSeq":%d,"limit":%d}`, sid, after, limit)
	r, ed, _ := readReq(t, e.nc, body)
	switch {
	case verdict != "":
		if ed == nil || ed.Code != api.CodeUnreadable || ed.Message != verdict {
			t.Errorf("%s: got %d events %+v, want unreadable %q", body, len(r.Events), ed, verdict)
		}
	case ed != nil:
		t.Errorf("%s: got %s %q, want %d events", body, ed.Code, ed.Message, len(wantSeqs))
	case !slices.Equal(seqs(t, r.Events), wantSeqs) || r.More != wantMore || r.LastSeq != lastSeq:
		t.Errorf("%s: got seqs %v more %v lastSeq %d, want %v more %v lastSeq %d", body, seqs(t, r.Events), r.More, r.LastSeq, wantSeqs, wantMore, lastSeq)
	}
}

// A page over a session whose stored chain is broken in the middle (the
// event at seq k replaced by a well-formed event of the same seq and
// another body, which only the next event's SL-Prev reveals; the event
// deleted; two swapped) answers what the judge gives, reading the session
// from its start: the events before the first bad message when the page
// stops short of it, else unreadable with the judge's text. Pages from
// every position, before the break (with limits that end before it, on it
// and after it) and after it (which the judge never reaches: unreadable),
// over a session broken before any page was read and over one read page
// by page first (the reader then knows the session's events as they were
// before the break). Alike with sealed bodies, which the tamper opens and
// seals again with the session's key.
func TestReadChainBroken(t *testing.T) { natstest.ForEachSealing(t, testReadChainBroken) }

func testReadChainBroken(t *testing.T, sealed bool) {
	e := newEnv(t, envOpts{store: logstore.Config{SealBodies: sealed}})
	ctx := context.Background()
	const n, k = 60, 30 // the break is at seq k (message k-1)
	for _, how := range tamper.BreakKinds {
		for _, readFirst := range []bool{false, true} {
			name := how
			if readFirst {
				name += "-after-reads"
			}
			t.Run(name, func(t *testing.T) {
				sid := "chain-" + name
				appendInterleaved(t, e, sid, n)
				if readFirst {
					for after := uint64(0); after < n; after += 7 {
						r, ed, _ := readReq(t, e.nc, fmt.Sprintf(`{"sessionId":%q,"afterSeq":%d,"limit":7}`, sid, after))
						if ed != nil || len(r.Events) != int(min(7, n-after)) {
							t.Fatalf("page after %d before the break: %d events, %+v", after, len(r.Events), ed)
						}
					}
				}
				tamper.BreakChainAt(t, e.nc, "SESSIONS", logstore.SubjectPrefix+sid, how, k-1)
				if got := tamper.Sealed(t, e.nc, "SESSIONS", logstore.SubjectPrefix+sid); got != sealed {
					t.Fatalf("stored sealed %v, want %v", got, sealed)
				}
				if err := e.st.FirstUnreadable(ctx, sid); !errors.Is(err, logstore.ErrUnreadable) {
					t.Fatalf("the judge finds %v, want the session unreadable", err)
				}
				asked := 0
				for after := uint64(0); after < n; after++ {
					if how == tamper.BreakDelete && after == k {
						continue // no event k to read after
					}
					limits := []int{1, 5, 1000}
					if after < k {
						limits = append(limits, int(k-2-after)+1, int(k-1-after), int(k-after), int(k+1-after))
					}
					for _, limit := range limits {
						if limit < 1 {
							continue
						}
						checkJudgedPage(t, e, sid, after, limit, n)
						asked++
					}
				}
				t.Logf("%d pages, verdict %v", asked, e.st.FirstUnreadable(ctx, sid))
			})
		}
	}
}

// appendInterleaved stores n events of session sid, a few at a time, with
// another session's events between them, so that stream seqs are not
// session seqs.
func appendInterleaved(t *testing.T, e *env, sid string, n int) {
	t.Helper()
	ctx := context.Background()
	var evs []schema.Envelope
	if err := gen.Exact(sid, n, func(ev schema.Envelope) error { evs = append(evs, ev); return nil }); err != nil {
		t.Fatal(err)
	}
	mustOK(t, e.nc, map[string]any{"sessionId": sid + "-other", "events": events(created())})
	var expected uint64
	for i := 0; i < n; i += 7 {
		r, err := e.st.Append(ctx, logstore.AppendRequest{SessionID: sid, ExpectedStreamSeq: expected, Events: evs[i:min(i+7, n)]})
		if err != nil {
			t.Fatal(err)
		}
		expected = r.StreamSeq
		mustOK(t, e.nc, map[string]any{"sessionId": sid + "-other", "events": events(userEv(fmt.Sprintf("o%d", i), "between"))})
	}
}

// A stored body laid out as Encode writes it that the judge cannot decode
// (a time that is not one; data nested deeper than an event may be) is
// unreadable on every page that reaches it, as the judge reading the
// session from its start finds it, though it is JSON, names the session
// and holds the next seq, SL-Seq and SL-Prev.
func TestReadPageDecodesAsTheJudge(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	const n, bad = 8, 6
	deep := strings.Repeat("[", schema.MaxJSONDepth+1) + strings.Repeat("]", schema.MaxJSONDepth+1)
	for name, edit := range map[string]func([]byte) []byte{
		"time": func(b []byte) []byte {
			return []byte(strings.Replace(string(b), `"time":"2026-`, `"time":"yesterday 2026-`, 1))
		},
		"deep": func(b []byte) []byte {
			return append(b[:strings.Index(string(b), `"data":`)+len(`"data":`)], deep+"}"...)
		},
	} {
		t.Run(name, func(t *testing.T) {
			sid := "undecodable-" + name
			var evs []schema.Envelope
			if err := gen.Exact(sid, n, func(ev schema.Envelope) error { evs = append(evs, ev); return nil }); err != nil {
				t.Fatal(err)
			}
			r, err := e.st.Append(ctx, logstore.AppendRequest{SessionID: sid, Events: evs[:bad-1]})
			if err != nil {
				t.Fatal(err)
			}
			tail, err := e.st.Tail(ctx, sid)
			if err != nil || tail.StreamSeq != r.StreamSeq {
				t.Fatalf("tail %+v %v", tail, err)
			}
			js, err := jetstream.New(e.nc)
			if err != nil {
				t.Fatal(err)
			}
			prev := tail.Hash
			for i := bad - 1; i < n; i++ {
				body, err := schema.Encode(&evs[i])
				if err != nil {
					t.Fatal(err)
				}
				if i == bad-1 {
					body = edit(body)
					if _, ok := schema.ScanCanonical(body); !ok || !json.Valid(body) {
						t.Fatalf("the edited body does not look canonical: %s", body)
					}
				}
				h := nats.Header{}
				h.Set(logstore.HeaderSeq, strconv.Itoa(i+1))
				h.Set(logstore.HeaderPrev, prev)
				if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: logstore.SubjectPrefix + sid, Header: h, Data: body}); err != nil {
					t.Fatal(err)
				}
				prev = logstore.ChainHash(body)
			}
			if err := e.st.FirstUnreadable(ctx, sid); !errors.Is(err, logstore.ErrUnreadable) {
				t.Fatalf("the judge finds %v, want the session unreadable", err)
			}
			for after := uint64(0); after < n; after++ {
				for _, limit := range []int{1, 3, 1000} {
					checkJudgedPage(t, e, sid, after, limit, n)
				}
			}
		})
	}
}

// An agent of a tenant reads by the ids it names: an error names the
// session so, never by its stored _T<tenant>_<id>; an operator, who names
// the stored id, gets that.
func TestReadErrorNamesAskedID(t *testing.T) {
	e := newTenantEnv(t)
	e.writer(t, writer.Config{})
	mustOK(t, e.alice, map[string]any{"sessionId": "s-1", "events": events(created())})
	for _, c := range []struct {
		name string
		nc   *nats.Conn
		id   string
	}{{"alice", e.alice, "s-nowhere"}, {"carol", e.carol, "s-1"}, {"operator", e.admin, "_Tacme_s-nowhere"}} {
		_, d, _ := readReq(t, c.nc, fmt.Sprintf(`{"sessionId":%q}`, c.id))
		if d == nil || d.Code != schema.CodeNotFound || d.Message != "session "+c.id+" does not exist" {
			t.Errorf("%s reading %s: %+v, want not_found naming %s", c.name, c.id, d, c.id)
		}
	}
	if r, d, _ := readReq(t, e.alice, `{"sessionId":"s-1"}`); d != nil || r.SessionID != "s-1" || len(r.Events) != 1 {
		t.Fatalf("alice reading s-1: %+v %+v", r, d)
	}
}

// The heartbeat and append errors of an agent of a tenant name its
// sessions as it does, as the read API's do, never by their stored
// _T<tenant>_ id.
func TestErrorsNameAskedID(t *testing.T) {
	e := newTenantEnv(t)
	e.writer(t, writer.Config{})
	mustOK(t, e.alice, map[string]any{"sessionId": "s-1", "events": events(created())})
	hb := request(t, e.alice, logstore.SubjectHeartbeat, map[string]any{"sessionId": "s-nowhere", "holder": "h"})
	if hb.err == nil || hb.err.Code != schema.CodeNotFound || hb.err.Message != "session s-nowhere does not exist" {
		t.Errorf("heartbeat of s-nowhere: %+v, want not_found naming s-nowhere", hb.err)
	}
	// The eraser's mark, made on the operator's connection.
	ops, err := logstore.Open(context.Background(), e.admin, logstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ops.MarkErased(context.Background(), logstore.Erasure{SessionID: "_Tacme_s-1", By: "test", Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		r := request(t, e.alice, logstore.SubjectAppend, map[string]any{"sessionId": "s-1", "events": events(ev(schema.TypeMessageUser, "data", map[string]any{"content": "late"}))})
		if r.err == nil || r.err.Code != schema.CodeErased || r.err.Message != "session s-1 was erased; use another id" {
			return fmt.Errorf("append to the erased s-1: %+v, want erased naming s-1", r.err)
		}
		return nil
	})
}

// TestErrorsNameTheTenantsOtherSessions: an error that names another of
// the caller's tenant's sessions (the judge's verdict on an event stored
// on the session's subject that names another session) names it as the
// tenant's agents do, never by its stored id.
func TestErrorsNameTheTenantsOtherSessions(t *testing.T) {
	e := newTenantEnv(t)
	e.writer(t, writer.Config{})
	mustOK(t, e.alice, map[string]any{"sessionId": "s-1", "events": events(created(), userEv("u1", "one"))})
	m := badMsg(t, "ForeignSession", "_Tacme_s-1")
	var env schema.Envelope
	if err := json.Unmarshal(m.Data, &env); err != nil {
		t.Fatal(err)
	}
	env.SessionID = "_Tacme_s-2"
	b, err := schema.Encode(&env)
	if err != nil {
		t.Fatal(err)
	}
	m.Data = b
	if _, err := natstest.JetStream(t, e.admin).PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	read := request(t, e.alice, api.SubjectRead, map[string]any{"sessionId": "s-1"})
	app := request(t, e.alice, logstore.SubjectAppend, map[string]any{"sessionId": "s-1", "events": events(userEv("u2", "two"))})
	for name, r := range map[string]reply{"read": read, "append": app} {
		if r.err == nil || r.err.Code != schema.CodeUnreadable {
			t.Fatalf("%s of s-1: %+v, want unreadable", name, r.err)
		}
		if strings.Contains(r.err.Message, "_Tacme_") || !strings.Contains(r.err.Message, `"s-2"`) {
			t.Errorf("%s of s-1: %q, want s-2 named as alice names it", name, r.err.Message)
		}
	}
}
