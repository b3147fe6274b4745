package logstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// PublishUnchecked stores events as Append would send them (same headers,
// chained by SL-Prev to the body stored before each) but with no sequence
// check: a gap is stored, the returned stream seq is the last one, and the
// session's cached tail is dropped.
func TestPublishUnchecked(t *testing.T) {
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	st := open(t, nc, logstore.Config{})
	ctx := context.Background()
	if _, err := st.Append(ctx, logstore.AppendRequest{SessionID: "u", Events: events("u", 1, 2, "u")}); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.CachedTail("u"); !ok {
		t.Fatal("no cached tail after Append")
	}
	// seq 3 is skipped: the writer would refuse 4 here.
	evs := append(events("u", 4, 2, "u"), events("v", 1, 1, "v")...)
	last, err := st.PublishUnchecked(ctx, func(yield func(schema.Envelope) bool) {
		for _, e := range evs {
			if !yield(e) {
				return
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if last != 5 {
		t.Fatalf("last stream seq %d, want 5", last)
	}
	if _, ok := st.CachedTail("u"); ok {
		t.Fatal("cached tail kept after an unchecked publish")
	}
	m, err := st.MsgAt(ctx, logstore.StreamName, 3)
	if err != nil || m == nil {
		t.Fatalf("stream seq 3: %v", err)
	}
	want := map[string]string{logstore.HeaderMsgID: "u:u-4", logstore.HeaderSeq: "4", logstore.HeaderType: schema.TypeMessageUser, logstore.HeaderSchema: "1", logstore.HeaderExpectedSeq: ""}
	for k, v := range want {
		if got := m.Header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	if e, err := schema.Decode(m.Data); err != nil || e.Seq != 4 || e.EventID != "u-4" {
		t.Fatalf("body: %+v %v", e, err)
	}
	// The chain: u-4 after u-2 (Append's, before the call), u-5 after
	// u-4 (the same call), v-1 the first of its session.
	msgs, seqs := storedMsgs(t, st, "u")
	for i := 1; i < len(msgs); i++ {
		if got, want := msgs[i].Header.Get(logstore.HeaderPrev), logstore.ChainHash(msgs[i-1].Data); got != want {
			t.Errorf("u seq %d: %s = %q, want %q", seqs[i], logstore.HeaderPrev, got, want)
		}
	}
	if b := logstore.CheckChain(msgs, seqs); len(b) != 1 || b[0].Kind != logstore.BreakGap || b[0].Seq != 4 {
		t.Errorf("u's chain: breaks %v, want the gap at seq 4 alone", b)
	}
	if v, _ := storedMsgs(t, st, "v"); len(v) != 1 || v[0].Header.Get(logstore.HeaderPrev) != "" {
		t.Errorf("v's first event: %d messages, %s %q", len(v), logstore.HeaderPrev, v[0].Header.Get(logstore.HeaderPrev))
	}
	// A later call chains a session's first event to its stored tail.
	if _, err := st.PublishUnchecked(ctx, slices.Values(events("v", 2, 1, "v"))); err != nil {
		t.Fatal(err)
	}
	if v, vseqs := storedMsgs(t, st, "v"); len(v) != 2 || v[1].Header.Get(logstore.HeaderPrev) != logstore.ChainHash(v[0].Data) {
		t.Errorf("v seq 2 after a second call: %d messages (seqs %v)", len(v), vseqs)
	}
	tail, err := st.Tail(ctx, "u")
	if err != nil || tail.Seq != 5 || tail.StreamSeq != 4 {
		t.Fatalf("tail %+v %v, want seq 5 at stream seq 4", tail, err)
	}
	// A bad event is refused as Append refuses it, nothing stored.
	bad := events("w", 1, 1, "w")[0]
	bad.SessionID = "bad.id"
	if _, err := st.PublishUnchecked(ctx, func(yield func(schema.Envelope) bool) { yield(bad) }); schema.CodeOf(err) != schema.CodeBadRequest {
		t.Fatalf("bad session id: %v", err)
	}
}

// PublishUnchecked after a session's last message whose sealed body does
// not open (its stored bytes changed) has no body to chain to: it answers
// the judge's verdict on that message, as the writer answers an append
// there (code unreadable, the session and stream seq named), and stores
// nothing of the session.
func TestPublishUncheckedAfterTailThatDoesNotOpen(t *testing.T) {
	_, st, tail := garbledTail(t)
	ctx := context.Background()
	_, err := st.PublishUnchecked(ctx, slices.Values(events("g", 4, 1, "g")))
	var ue *logstore.UnreadableError
	if !errors.As(err, &ue) || ue.Kind != logstore.KindUnopened || schema.CodeOf(err) != schema.CodeUnreadable ||
		!strings.HasPrefix(err.Error(), fmt.Sprintf("session g is unreadable at stream seq %d: the sealed body does not open", tail)) {
		t.Fatalf("PublishUnchecked: %v, want unreadable at stream seq %d: the sealed body does not open", err, tail)
	}
	if last, err := st.LastStreamSeq(ctx, logstore.StreamName); err != nil || last != tail {
		t.Fatalf("last stream seq %d (%v), want %d: nothing stored", last, err, tail)
	}
	t.Log(err)
}

// PublishUnchecked never stores a session's event before one published
// before it, even when the stream's leader steps down in the middle of a
// call (the stream then answers "no responders" until the new leader
// takes the session subjects). Either the call stores every event, each
// session in order, or it returns an error; what it stored before the
// error is in order too.
func TestPublishUncheckedKeepsOrderAcrossLeaderChange(t *testing.T) {
	c := natstest.RunCluster(t, 3)
	nc := natstest.Connect(t, c.Servers[0])
	st := open(t, nc, logstore.Config{Replicas: 3})
	c.WaitStreamLeader(logstore.StreamName)
	c.WaitStreamsCurrent(logstore.StreamName)
	admin := natstest.Connect(t, c.Servers[0])
	const sessions, perSession, stepDownAfter = 10, 80, 100
	sid := func(i int) string { return "o" + strconv.Itoa(i) }
	evs := make([][]schema.Envelope, sessions)
	for i := range evs {
		evs[i] = events(sid(i), 1, perSession, sid(i))
	}
	// A publish the old leader took as it stepped down may never be
	// answered: the call then ends with ctx.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := 0
	_, err := st.PublishUnchecked(ctx, func(yield func(schema.Envelope) bool) {
		// Each session's first event first: a call reads the stored tail
		// of each session it has not published to yet.
		for k := range perSession {
			for i := range evs {
				if n == stepDownAfter {
					if _, err := admin.Request("$JS.API.STREAM.LEADER.STEPDOWN."+logstore.StreamName, nil, 10*time.Second); err != nil {
						t.Errorf("step down: %v", err)
					}
				}
				// Spread the rest over the election.
				if n > stepDownAfter {
					time.Sleep(time.Millisecond)
				}
				n++
				if !yield(evs[i][k]) {
					return
				}
			}
		}
	})
	t.Logf("PublishUnchecked: %v", err)
	for i := range evs {
		_, seqs := storedMsgs(t, st, sid(i))
		if !inOrder(seqs) {
			t.Errorf("%s stored out of order: seqs %v", sid(i), seqs)
		} else if err == nil && len(seqs) != perSession {
			t.Errorf("%s: %d events stored, the call said all %d", sid(i), len(seqs), perSession)
		}
	}
}

// inOrder: each seq above the one before it.
func inOrder(seqs []uint64) bool {
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			return false
		}
	}
	return true
}

// A call made while the stream cannot answer (two nodes of three down, no
// quorum) waits for it, and stores everything once the nodes are back,
// rather than failing on the first unreachable answer.
func TestPublishUncheckedWaitsForTheStream(t *testing.T) {
	t.Run("plain", func(t *testing.T) { publishUncheckedWaits(t, false) })
	// Sealed: the sessions' keys, made in a bucket without a quorum too,
	// are waited for as well.
	t.Run("sealed", func(t *testing.T) { publishUncheckedWaits(t, true) })
}

func publishUncheckedWaits(t *testing.T, seal bool) {
	c := natstest.RunCluster(t, 3)
	nc := natstest.Connect(t, c.Servers[0])
	st := open(t, nc, logstore.Config{Replicas: 3, RequestTimeout: time.Second, SealBodies: seal})
	c.WaitStreamLeader(logstore.StreamName)
	c.WaitStreamsCurrent(logstore.StreamName)
	for _, i := range []int{1, 2} {
		c.Servers[i].Shutdown()
		c.Servers[i].WaitForShutdown()
	}
	ctx := context.Background()
	natstest.CheckFor(t, 30*time.Second, 200*time.Millisecond, func() error {
		if _, err := st.LastHeldSeq(ctx, logstore.StreamName); err == nil || !logstore.Unreachable(err) {
			return fmt.Errorf("the last message held, without a quorum: %v, want an unreachable log", err)
		}
		return nil
	})
	evs := append(events("w1", 1, 20, "w1"), events("w2", 1, 20, "w2")...)
	done := make(chan error, 1)
	go func() {
		_, err := st.PublishUnchecked(ctx, slices.Values(evs))
		done <- err
	}()
	// Not a measure: long enough for the call to be answered (each ask
	// is bounded by the 1 s request timeout) while the stream cannot
	// answer, before the nodes come back.
	time.Sleep(3 * time.Second)
	for _, i := range []int{1, 2} {
		c.Restart(i)
	}
	if err := <-done; err != nil {
		t.Fatalf("PublishUnchecked while the stream had no quorum: %v", err)
	}
	// The read below is bounded by stalls of twice the 1 s request
	// timeout: on a loaded machine the restarted replicas may still be
	// catching up and the consumer silent that long (the read then fails
	// with ErrReadStalled, which says to retry). What was stored is read
	// once every replica is current.
	streams := []string{logstore.StreamName}
	if seal {
		streams = append(streams, "KV_"+logstore.KeysBucket)
	}
	c.WaitStreamsCurrent(streams...)
	for _, sid := range []string{"w1", "w2"} {
		if _, seqs := storedMsgs(t, st, sid); len(seqs) != 20 || !inOrder(seqs) {
			t.Errorf("%s stored seqs %v, want 1 to 20 in order", sid, seqs)
		}
	}
}
