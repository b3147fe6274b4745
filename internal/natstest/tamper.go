package natstest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Ways BreakChain damages a session's stored events, as a lost write, a
// corrupted block or a bad restore would.
const (
	BreakDelete = "delete" // the second message is gone
	BreakChange = "change" // the second message's body is another one (its time changed)
	BreakSwap   = "swap"   // the second and third messages are stored in each other's place
)

// BreakKinds are the ways BreakChain knows.
var BreakKinds = []string{BreakDelete, BreakChange, BreakSwap}

// BreakChain damages the stored messages of one subject of a stream (a
// session of at least four events) behind every service's back. delete
// removes the second message; change and swap purge the subject and store
// its messages again, edited, with their SL- headers only (no Nats-Msg-Id:
// the stream would drop them as duplicates).
func BreakChain(t TB, nc *nats.Conn, stream, subject, how string) {
	t.Helper()
	BreakChainAt(t, nc, stream, subject, how, 1)
}

// BreakChainAt is BreakChain at the subject's message i (from 0) instead
// of its second: delete removes it, change changes its body, swap swaps it
// with the next. The subject holds at least i+3 messages.
func BreakChainAt(t TB, nc *nats.Conn, stream, subject, how string, i int) {
	t.Helper()
	ctx := context.Background()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("natstest: stream %s: %v", stream, err)
	}
	var msgs []*jetstream.RawStreamMsg
	for seq := uint64(1); ; {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			t.Fatalf("natstest: read %s: %v", subject, err)
		}
		msgs = append(msgs, m)
		seq = m.Sequence + 1
	}
	if i < 0 || len(msgs) < i+3 {
		t.Fatalf("natstest: %s holds %d messages, BreakChain at message %d needs %d", subject, len(msgs), i, i+3)
	}
	switch how {
	case BreakDelete:
		if err := s.DeleteMsg(ctx, msgs[i].Sequence); err != nil {
			t.Fatalf("natstest: delete: %v", err)
		}
		return
	case BreakChange:
		var body map[string]any
		if err := json.Unmarshal(msgs[i].Data, &body); err != nil {
			t.Fatalf("natstest: %s's body %d: %v", subject, i, err)
		}
		body["time"] = "2001-02-03T04:05:06Z"
		if msgs[i].Data, err = json.Marshal(body); err != nil {
			t.Fatalf("natstest: %v", err)
		}
	case BreakSwap:
		msgs[i], msgs[i+1] = msgs[i+1], msgs[i]
	default:
		t.Fatalf("natstest: BreakChain: no way %q", how)
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
		t.Fatalf("natstest: purge %s: %v", subject, err)
	}
	for _, m := range msgs {
		h := nats.Header{}
		for k, v := range m.Header {
			if strings.HasPrefix(k, "SL-") {
				h[k] = v
			}
		}
		if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: subject, Header: h, Data: m.Data}); err != nil {
			t.Fatalf("natstest: store again: %v", err)
		}
	}
}
