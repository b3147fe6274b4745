package logstore_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// The judge's verdict on each kind of stored message after seqs 1 and 2
// of session "s": the next event, an exact copy of the last, and every
// kind of unreadable message, each with its kind, the seq it claims and
// one text whatever the path.
func TestJudgeVerdicts(t *testing.T) {
	msg := func(streamSeq uint64, id string, seq uint64, eventID, typ, headerSeq, prev string) *logstore.Msg {
		b, err := schema.Encode(&schema.Envelope{SchemaVersion: schema.Version, SessionID: id, Seq: seq, EventID: eventID,
			Time: time.Unix(1, 0).UTC(), Type: typ, Data: json.RawMessage(`{"content":"x"}`)})
		if err != nil {
			t.Fatal(err)
		}
		h := nats.Header{}
		if headerSeq != "" {
			h.Set(logstore.HeaderSeq, headerSeq)
		}
		if prev != "" {
			h.Set(logstore.HeaderPrev, prev)
		}
		return &logstore.Msg{StreamSeq: streamSeq, Header: h, Data: b}
	}
	first := msg(1, "s", 1, "e1", schema.TypeSessionCreated, "1", "")
	second := msg(2, "s", 2, "e2", schema.TypeMessageUser, "2", logstore.ChainHash(first.Data))
	h2 := logstore.ChainHash(second.Data)
	copyOf := *second
	copyOf.StreamSeq = 3
	newer := &logstore.Msg{StreamSeq: 3, Header: nats.Header{}, Data: []byte(`{"schemaVersion":99,"sessionId":"s","seq":3,"eventId":"e3","time":"1970-01-01T00:00:01Z","type":"message/user","data":{}}`)}
	for _, tc := range []struct {
		name    string
		m       *logstore.Msg
		verdict logstore.Verdict
		kind    string
		got     uint64
		reason  string
	}{
		{"Next", msg(3, "s", 3, "e3", schema.TypeMessageUser, "3", h2), logstore.VerdictOK, "", 0, ""},
		{"NextWithoutHeaders", msg(3, "s", 3, "e3", schema.TypeMessageUser, "", ""), logstore.VerdictOK, "", 0, ""},
		{"IgnorableUnknownType", func() *logstore.Msg {
			m := msg(3, "s", 3, "e3", "x.future/note", "3", h2)
			m.Data = []byte(strings.Replace(string(m.Data), `"ignorable":false`, `"ignorable":true`, 1))
			return m
		}(), logstore.VerdictOK, "", 0, ""},
		{"ExactCopy", &copyOf, logstore.VerdictCopy, "", 0, ""},
		{"Garbage", &logstore.Msg{StreamSeq: 3, Header: nats.Header{logstore.HeaderSeq: {"3"}}, Data: []byte("\x00 not an event")}, logstore.VerdictUnreadable, logstore.KindGarbage, 3, "the stored message is not an event"},
		{"NewerSchema", newer, logstore.VerdictUnreadable, logstore.KindNewer, 0, "newer schema"},
		{"Foreign", msg(3, "other", 3, "e3", schema.TypeMessageUser, "3", h2), logstore.VerdictUnreadable, logstore.KindForeign, 3, `event "e3" names session "other"`},
		{"HeaderSeq", msg(3, "s", 3, "e3", schema.TypeMessageUser, "9", h2), logstore.VerdictUnreadable, logstore.KindHeaderSeq, 3, `its SL-Seq header says "9"`},
		{"ForgedSeq", msg(3, "s", 7, "e7", schema.TypeMessageUser, "7", h2), logstore.VerdictUnreadable, logstore.KindGap, 7, "seqs 3..6 are missing"},
		{"SameSeqOtherID", msg(3, "s", 2, "e2b", schema.TypeMessageUser, "2", h2), logstore.VerdictUnreadable, logstore.KindReordered, 2, "holds seq 2 but is stored after seq 2"},
		{"CopyOtherBody", func() *logstore.Msg {
			m := msg(3, "s", 2, "e2", schema.TypeMessageUser, "2", logstore.ChainHash(first.Data))
			m.Data = []byte(strings.Replace(string(m.Data), `"content":"x"`, `"content":"y"`, 1))
			return m
		}(), logstore.VerdictUnreadable, logstore.KindReordered, 2, "stored after seq 2"},
		{"Backwards", msg(3, "s", 1, "e1b", schema.TypeMessageUser, "1", h2), logstore.VerdictUnreadable, logstore.KindReordered, 1, "stored after seq 2"},
		{"Changed", msg(3, "s", 3, "e3", schema.TypeMessageUser, "3", logstore.ChainHash([]byte("x"))), logstore.VerdictUnreadable, logstore.KindChanged, 3, "hash chain broken at seq 2"},
		{"UnknownType", msg(3, "s", 3, "e3", "x.future/thing", "3", h2), logstore.VerdictUnreadable, logstore.KindUnknownType, 3, `type "x.future/thing"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A judge that keeps the hash unspelled gives the same verdict
			// with the same text.
			spelled := logstore.Judge{SessionID: "s"}
			j := logstore.Judge{SessionID: "s", Unspelled: true}
			for _, m := range []*logstore.Msg{first, second} {
				if _, v, err := spelled.Next(m); v != logstore.VerdictOK || err != nil {
					t.Fatalf("seq %d: %v %v", m.StreamSeq, v, err)
				}
				if _, v, err := j.Next(m); v != logstore.VerdictOK || err != nil || j.Last.Hash != "" || j.LastSum.String() != logstore.ChainHash(m.Data) {
					t.Fatalf("unspelled, seq %d: %v %v, last %+v sum %s", m.StreamSeq, v, err, j.Last, j.LastSum)
				}
			}
			_, wantV, wantErr := spelled.Next(tc.m)
			_, v, err := j.Next(tc.m)
			if v != wantV || fmt.Sprint(err) != fmt.Sprint(wantErr) {
				t.Fatalf("unspelled: %v %v, spelled %v %v", v, err, wantV, wantErr)
			}
			if v != tc.verdict {
				t.Fatalf("verdict %v (%v), want %v", v, err, tc.verdict)
			}
			if tc.verdict != logstore.VerdictUnreadable {
				if err != nil || j.Last.StreamSeq != 3 {
					t.Fatalf("err %v, last %+v", err, j.Last)
				}
				return
			}
			var ue *logstore.UnreadableError
			if !errors.As(err, &ue) || !errors.Is(err, logstore.ErrUnreadable) || schema.CodeOf(err) != schema.CodeUnreadable {
				t.Fatalf("error %T %v: want an *UnreadableError of code unreadable", err, err)
			}
			wantPrefix := "session s is unreadable at stream seq 3: "
			if ue.Kind != tc.kind || ue.GotSeq != tc.got || ue.AfterSeq != 2 || !strings.HasPrefix(err.Error(), wantPrefix) || !strings.Contains(ue.Reason, tc.reason) {
				t.Fatalf("got kind %s got %d after %d: %v; want kind %s got %d, %q", ue.Kind, ue.GotSeq, ue.AfterSeq, err, tc.kind, tc.got, tc.reason)
			}
			if j.Last.Seq != 2 || j.Last.StreamSeq != 2 {
				t.Fatalf("the judge moved past an unreadable message: %+v", j.Last)
			}
		})
	}
}

// A session's first stored message must be its seq 1.
func TestJudgeFirstSeq(t *testing.T) {
	for seq, kind := range map[uint64]string{0: logstore.KindReordered, 2: logstore.KindGap, 5: logstore.KindGap} {
		b, _ := schema.Encode(&schema.Envelope{SchemaVersion: schema.Version, SessionID: "s", Seq: seq, EventID: "e", Time: time.Unix(1, 0).UTC(), Type: schema.TypeSessionCreated, Data: json.RawMessage(`{}`)})
		_, v, err := (&logstore.Judge{SessionID: "s"}).Next(&logstore.Msg{StreamSeq: 1, Header: nats.Header{}, Data: b})
		var ue *logstore.UnreadableError
		if v != logstore.VerdictUnreadable || !errors.As(err, &ue) || ue.Kind != kind {
			t.Errorf("first message seq %s: %v %v, want %s", strconv.FormatUint(seq, 10), v, err, kind)
		}
	}
}

// The judge never panics, and its verdict holds together: an event it
// accepts moves Last to it; anything else leaves Last's seq where it was
// and an unreadable verdict is an *UnreadableError at the message.
func FuzzJudge(f *testing.F) {
	b, _ := schema.Encode(&schema.Envelope{SchemaVersion: schema.Version, SessionID: "s", Seq: 3, EventID: "e3", Time: time.Unix(1, 0).UTC(), Type: schema.TypeMessageUser, Data: json.RawMessage(`{"content":"x"}`)})
	f.Add(b, "3", "")
	f.Add([]byte("\x00 not an event"), "", "")
	f.Add([]byte(`{"schemaVersion":1,"sessionId":"s","seq":2,"eventId":"e2"}`), "2", "abc")
	f.Fuzz(func(t *testing.T, body []byte, headerSeq, prev string) {
		h := nats.Header{}
		if headerSeq != "" {
			h.Set(logstore.HeaderSeq, headerSeq)
		}
		if prev != "" {
			h.Set(logstore.HeaderPrev, prev)
		}
		last := logstore.Tail{Seq: 2, StreamSeq: 2, EventID: "e2", Hash: logstore.ChainHash([]byte("two"))}
		j := logstore.Judge{SessionID: "s", Last: last}
		ev, v, err := j.Next(&logstore.Msg{StreamSeq: 3, Header: h, Data: body})
		switch v {
		case logstore.VerdictOK:
			if err != nil || ev.Seq != 3 || ev.SessionID != "s" || j.Last.Seq != 3 || j.Last.StreamSeq != 3 || j.Last.Hash != logstore.ChainHash(body) {
				t.Fatalf("accepted %+v, last %+v, err %v", ev, j.Last, err)
			}
		case logstore.VerdictCopy:
			if err != nil || j.Last.Seq != 2 || j.Last.StreamSeq != 3 {
				t.Fatalf("copy: last %+v, err %v", j.Last, err)
			}
		default:
			var ue *logstore.UnreadableError
			if !errors.As(err, &ue) || ue.StreamSeq != 3 || j.Last != last {
				t.Fatalf("unreadable: %v, last %+v", err, j.Last)
			}
		}
	})
}
