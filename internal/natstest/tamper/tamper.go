// Package tamper damages a session's stored messages behind every
// service's back, as a lost write, a corrupted block or a bad restore
// would, for tests. A sealed body (SL-Seal, docs/adr/011-sealed-bodies.md)
// is opened with its session's key and sealed again with it through
// internal/logstore (Store.Open, Store.Seal), so a session written sealed
// is damaged as a plain one is and gives the same verdict.
package tamper

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
)

// Ways BreakChain damages a session's stored events.
const (
	BreakDelete = "delete" // the second message is gone
	BreakChange = "change" // the second message's body is another one (its time changed)
	BreakSwap   = "swap"   // the second and third messages are stored in each other's place
	// BreakGarble changes a byte of the second message's sealed body
	// without its key, as a corrupted block would: it no longer opens.
	// Sealed sessions only (a plain body has no seal to break).
	BreakGarble = "garble"
)

// BreakKinds are the ways BreakChain damages a plain or a sealed session
// alike (BreakGarble is not one: it needs a sealed body).
var BreakKinds = []string{BreakDelete, BreakChange, BreakSwap}

// BreakChain damages the stored messages of one subject of a stream (a
// session of at least four events) behind every service's back. delete
// removes the second message; garble changes its stored bytes in place;
// change and swap purge the subject and store its messages again, edited,
// with their SL- headers only (no Nats-Msg-Id: the stream would drop them
// as duplicates), each sealed body sealed again for its new header.
func BreakChain(t natstest.TB, nc *nats.Conn, stream, subject, how string) {
	t.Helper()
	BreakChainAt(t, nc, stream, subject, how, 1)
}

// BreakChainAt is BreakChain at the subject's message i (from 0) instead
// of its second: delete removes it, change changes its body, garble its
// sealed bytes, swap swaps it with the next. The subject holds message i
// (and i+1 to swap): garble or change its last message to damage a tail.
func BreakChainAt(t natstest.TB, nc *nats.Conn, stream, subject, how string, i int) {
	t.Helper()
	tp := open(t, nc, stream)
	msgs := tp.read(subject)
	need := i + 1
	if how == BreakSwap {
		need++
	}
	if i < 0 || len(msgs) < need {
		t.Fatalf("tamper: %s holds %d messages, BreakChain %s at message %d needs %d", subject, len(msgs), how, i, need)
	}
	if how == BreakDelete {
		if err := tp.s.DeleteMsg(tp.ctx, msgs[i].Sequence); err != nil {
			t.Fatalf("tamper: delete: %v", err)
		}
		return
	}
	es := make([]entry, len(msgs))
	for j, m := range msgs {
		es[j] = tp.entryOf(m)
	}
	switch how {
	case BreakChange:
		var body map[string]any
		if err := json.Unmarshal(es[i].body, &body); err != nil {
			t.Fatalf("tamper: %s's body %d: %v", subject, i, err)
		}
		body["time"] = "2001-02-03T04:05:06Z"
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatalf("tamper: %v", err)
		}
		es[i].body = b
	case BreakSwap:
		es[i], es[i+1] = es[i+1], es[i]
	case BreakGarble:
		m := msgs[i]
		if !logstore.Sealed(m.Header) || len(m.Data) == 0 {
			t.Fatalf("tamper: %s's message %d is not sealed: nothing to garble", subject, i)
		}
		b := append([]byte(nil), m.Data...)
		b[len(b)-1] ^= 0x01
		// Stored as it was but for the byte, its seal's header kept.
		es[i] = entry{h: slHeaders(m.Header), body: b}
	default:
		t.Fatalf("tamper: BreakChain: no way %q", how)
	}
	if err := tp.s.Purge(tp.ctx, jetstream.WithPurgeSubject(subject)); err != nil {
		t.Fatalf("tamper: purge %s: %v", subject, err)
	}
	for _, e := range es {
		tp.store(subject, e)
	}
}

// Copy stores the subject's last message again at its end, with its SL-
// headers only (a copy of an event, as a re-send around the writer or a
// restore that overlapped would leave), its body sealed again if sealed.
func Copy(t natstest.TB, nc *nats.Conn, stream, subject string) {
	t.Helper()
	tp := open(t, nc, stream)
	m, err := tp.s.GetLastMsgForSubject(tp.ctx, subject)
	if err != nil {
		t.Fatalf("tamper: last of %s: %v", subject, err)
	}
	tp.store(subject, tp.entryOf(m))
}

// tampering is one change of a stream's messages.
type tampering struct {
	t   natstest.TB
	ctx context.Context
	nc  *nats.Conn
	js  jetstream.JetStream
	s   jetstream.Stream
	// st opens and seals bodies; opened at the first sealed one.
	st *logstore.Store
}

// entry is a message to store again: with its SL- headers only, and its
// plain body, sealed again (with the session's key, for the headers it
// is stored with) when it was sealed.
type entry struct {
	h    nats.Header
	body []byte
	seal bool
}

func open(t natstest.TB, nc *nats.Conn, stream string) *tampering {
	t.Helper()
	tp := &tampering{t: t, ctx: context.Background(), nc: nc}
	var err error
	if tp.js, err = jetstream.New(nc); err != nil {
		t.Fatalf("tamper: %v", err)
	}
	if tp.s, err = tp.js.Stream(tp.ctx, stream); err != nil {
		t.Fatalf("tamper: stream %s: %v", stream, err)
	}
	return tp
}

// read returns the subject's stored messages, oldest first.
func (tp *tampering) read(subject string) []*jetstream.RawStreamMsg {
	tp.t.Helper()
	var msgs []*jetstream.RawStreamMsg
	for seq := uint64(1); ; {
		m, err := tp.s.GetMsg(tp.ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return msgs
		}
		if err != nil {
			tp.t.Fatalf("tamper: read %s: %v", subject, err)
		}
		msgs = append(msgs, m)
		seq = m.Sequence + 1
	}
}

// keys is logstore's store over the connection (not provisioning): it
// holds the sessions' keys.
func (tp *tampering) keys() *logstore.Store {
	tp.t.Helper()
	if tp.st == nil {
		st, err := logstore.Open(tp.ctx, tp.nc, logstore.Config{NoProvision: true})
		if err != nil {
			tp.t.Fatalf("tamper: %v", err)
		}
		tp.st = st
	}
	return tp.st
}

// entryOf is m to store again, its body opened if sealed.
func (tp *tampering) entryOf(m *jetstream.RawStreamMsg) entry {
	tp.t.Helper()
	e := entry{h: slHeaders(m.Header), body: m.Data}
	if !logstore.Sealed(m.Header) {
		return e
	}
	lm := &logstore.Msg{StreamSeq: m.Sequence, Subject: m.Subject, Header: m.Header, Data: m.Data}
	if err := tp.keys().Open(tp.ctx, lm); err != nil {
		tp.t.Fatalf("tamper: open %s at stream seq %d: %v", m.Subject, m.Sequence, err)
	}
	e.h.Del(logstore.HeaderSeal)
	e.body, e.seal = lm.Data, true
	return e
}

// store publishes e on subject.
func (tp *tampering) store(subject string, e entry) {
	tp.t.Helper()
	m := &logstore.Msg{Subject: subject, Header: e.h, Data: e.body}
	if e.seal {
		if err := tp.keys().Seal(tp.ctx, m); err != nil {
			tp.t.Fatalf("tamper: seal on %s: %v", subject, err)
		}
	}
	if _, err := tp.js.PublishMsg(tp.ctx, &nats.Msg{Subject: subject, Header: m.Header, Data: m.Data}); err != nil {
		tp.t.Fatalf("tamper: store again: %v", err)
	}
}

// slHeaders is a copy of h's SL- headers.
func slHeaders(h nats.Header) nats.Header {
	out := nats.Header{}
	for k, v := range h {
		if strings.HasPrefix(k, "SL-") {
			out[k] = v
		}
	}
	return out
}

// Sealed reports whether the subject holds messages and every one is
// sealed: a test run with sealing checks with it that it damaged sealed
// bodies.
func Sealed(t natstest.TB, nc *nats.Conn, stream, subject string) bool {
	t.Helper()
	msgs := open(t, nc, stream).read(subject)
	for _, m := range msgs {
		if !logstore.Sealed(m.Header) {
			return false
		}
	}
	return len(msgs) > 0
}
