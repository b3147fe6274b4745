package logstore_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/natstest/tamper"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// readIDs reads the session's events (judged: chain included) and
// returns their event ids.
func readIDs(t *testing.T, st *logstore.Store, id string) []string {
	t.Helper()
	evs, _, err := st.ReadEvents(context.Background(), id, 0)
	if err != nil {
		t.Fatalf("read %s: %v", id, err)
	}
	var ids []string
	for _, e := range evs {
		ids = append(ids, e.EventID)
	}
	return ids
}

// mixed starts a server with a store that writes plain bodies and one
// that seals them, and writes session id's first 2 events with the plain
// one and n more with the sealing one; it returns the sealing one's
// append.
func mixed(t *testing.T, id string, n int) (*nats.Conn, *logstore.Store, *logstore.Store, logstore.AppendResult) {
	t.Helper()
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	ctx := context.Background()
	plain := open(t, nc, logstore.Plain(logstore.Config{}))
	st := open(t, nc, logstore.Config{SealBodies: true})
	r, err := plain.Append(ctx, logstore.AppendRequest{SessionID: id, Events: events(id, 1, 2, "p")})
	if err != nil {
		t.Fatal(err)
	}
	r, err = st.Append(ctx, logstore.AppendRequest{SessionID: id, ExpectedStreamSeq: r.StreamSeq, Events: events(id, 3, n, "s")})
	if err != nil {
		t.Fatal(err)
	}
	return nc, plain, st, r
}

// A sealing store stores ciphertext with SL-Seal; every read (of this
// store, of another with an empty key cache, of a store that does not
// seal) gives the plain bodies, the chain whole, also when a session holds
// plain events written before sealing.
func TestSealedBodiesReadPlain(t *testing.T) {
	// "mix": two plain events, then three sealed ones after them.
	nc, plain, st, _ := mixed(t, "mix", 3)
	ctx := context.Background()
	// "all": sealed from its first event, one alone and a batch, then
	// one published unchecked.
	r, err := st.Append(ctx, logstore.AppendRequest{SessionID: "all", Events: events("all", 1, 1, "a")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, logstore.AppendRequest{SessionID: "all", ExpectedStreamSeq: r.StreamSeq, Events: events("all", 2, 4, "a")}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PublishUnchecked(ctx, slices.Values(events("all", 6, 1, "a"))); err != nil {
		t.Fatal(err)
	}

	// What the stream holds.
	js := natstest.JetStream(t, nc)
	stream, err := js.Stream(ctx, "SESSIONS")
	if err != nil {
		t.Fatal(err)
	}
	sealed := 0
	for seq := uint64(1); seq <= 11; seq++ {
		m, err := stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		isSealed := m.Header.Get(logstore.HeaderSeal) == logstore.SealVersion
		if isSealed {
			sealed++
		}
		if hasPlain := bytes.Contains(m.Data, []byte(`"eventId"`)); hasPlain == isSealed {
			t.Errorf("stream seq %d: sealed %v, plain body %v", seq, isSealed, hasPlain)
		}
	}
	if sealed != 9 {
		t.Errorf("%d sealed messages, want 9", sealed)
	}

	want := map[string][]string{"mix": {"p-1", "p-2", "s-3", "s-4", "s-5"}, "all": {"a-1", "a-2", "a-3", "a-4", "a-5", "a-6"}}
	fresh := open(t, nc, logstore.Config{})
	for _, reader := range []*logstore.Store{st, plain, fresh} {
		for id, ids := range want {
			if got := readIDs(t, reader, id); !slices.Equal(got, ids) {
				t.Errorf("%s reads %v, want %v", id, got, ids)
			}
		}
	}
	// A follower gets plain bodies.
	f, err := fresh.Follow(ctx, logstore.FollowSpec{Stream: "SESSIONS"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for range 11 {
		m, err := f.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := schema.Decode(m.Data); err != nil {
			t.Fatalf("followed stream seq %d: %v", m.StreamSeq, err)
		}
	}
	// One key a session, in one message (never replaced).
	kv, err := js.KeyValue(ctx, logstore.KeysBucket)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"mix", "all"} {
		e, err := kv.Get(ctx, id)
		if err != nil || len(e.Value()) != 32 || e.Revision() == 0 {
			t.Fatalf("key of %s: %v", id, err)
		}
	}
}

// Shred removes a sealed session (its plain events by secure delete)
// below the given seq with one purge, after destroying its key; a sealed
// message whose key is gone reads as erased.
func TestShred(t *testing.T) {
	nc, _, st, r := mixed(t, "x", 8)
	ctx := context.Background()
	// Another session's events stay.
	if _, err := st.Append(ctx, logstore.AppendRequest{SessionID: "y", Events: events("y", 1, 3, "y")}); err != nil {
		t.Fatal(err)
	}
	// A message after the given seq: nothing done.
	if n, err := st.Shred(ctx, "x", r.StreamSeq-1, nil); err != nil || n != 0 {
		t.Fatalf("shred below the tail = %d, %v; want 0", n, err)
	}
	if c, err := st.StoredCount(ctx, "x"); err != nil || c.N != 10 {
		t.Fatalf("count = %+v, %v", c, err)
	}
	n, err := st.Shred(ctx, "x", r.StreamSeq, nil)
	if err != nil || n != 10 {
		t.Fatalf("shred = %d, %v; want 10", n, err)
	}
	if c, err := st.StoredCount(ctx, "x"); err != nil || c.N != 0 {
		t.Fatalf("count after = %+v, %v", c, err)
	}
	kv, err := natstest.JetStream(t, nc).KeyValue(ctx, logstore.KeysBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, "x"); err != jetstream.ErrKeyNotFound {
		t.Fatalf("key of x after the shred: %v", err)
	}
	// Again: nothing left, no error.
	if n, err := st.Shred(ctx, "x", r.StreamSeq, nil); err != nil || n != 0 {
		t.Fatalf("shred again = %d, %v", n, err)
	}
	if got := readIDs(t, open(t, nc, logstore.Config{}), "y"); len(got) != 3 {
		t.Fatalf("y reads %v", got)
	}

	// A sealed event whose key is gone reads as erased, from any store,
	// at once: also in "w", whose tail is plain (an event written around
	// the sealing store), so that its sealed events are read after the
	// tail (a read of 8 events or less gets them from the leader one by
	// one).
	rz, err := st.Append(ctx, logstore.AppendRequest{SessionID: "z", Events: events("z", 1, 2, "z")})
	if err != nil {
		t.Fatal(err)
	}
	rw, err := st.Append(ctx, logstore.AppendRequest{SessionID: "w", Events: events("w", 1, 2, "w")})
	if err != nil {
		t.Fatal(err)
	}
	plain := open(t, nc, logstore.Config{})
	if _, err := plain.Append(ctx, logstore.AppendRequest{SessionID: "w", ExpectedStreamSeq: rw.StreamSeq, Events: events("w", 3, 3, "w")}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"z", "w"} {
		if err := st.DropSessionRecords(ctx, id); err != nil {
			t.Fatal(err)
		}
		for _, reader := range []*logstore.Store{st, open(t, nc, logstore.Config{})} {
			if _, _, err := reader.ReadEvents(ctx, id, 0); schema.CodeOf(err) != schema.CodeErased || errors.Is(err, logstore.ErrReadStalled) {
				t.Fatalf("read of %s without its key: %v, want erased", id, err)
			}
		}
	}
	// A shred cut after the key went (a job resumed) purges what is left.
	if n, err := st.Shred(ctx, "z", rz.StreamSeq, nil); err != nil || n != 2 {
		t.Fatalf("shred without the key = %d, %v; want 2", n, err)
	}
}

// A recount of a tenant's usage counts a sealed body as the append
// counted it: the body as written, without the seal's bytes.
func TestRecountSealedBodies(t *testing.T) {
	_, _, st, _ := mixed(t, "_Tacme_a", 3)
	ctx := context.Background()
	// The bodies as written: two plain, three sealed.
	want := logstore.TenantUsage{Sessions: 1}
	if _, err := st.ReadSession(ctx, "_Tacme_a", 0, func(m *logstore.Msg) error {
		want.Bytes += int64(len(m.Data))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.AddUsage(ctx, "acme", logstore.TenantUsage{Sessions: 7, Bytes: 1}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RecountUsage(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := st.UsageOf(ctx, "acme"); err != nil || got != want {
		t.Fatalf("usage after a recount: %+v %v, want %+v", got, err, want)
	}
}

// A shred whose walk a replica behind the leader answered, missing a
// message past the digest the leader holds, does nothing: that message
// is not in the digest, so the session goes the old way, its key kept
// (a body whose key is gone could never be hashed, and the job would
// stop there on every sweep).
func TestShredBehindLeaderPastTheDigest(t *testing.T) {
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	ctx := context.Background()
	var behind atomic.Bool
	st := open(t, nc, logstore.Config{SealBodies: true, FaultHook: func(f logstore.FaultStage) error {
		if f == logstore.FaultShredWalk && behind.Load() {
			return errors.New("a replica behind the leader")
		}
		return nil
	}})
	r, err := st.Append(ctx, logstore.AppendRequest{SessionID: "w", Events: events("w", 1, 3, "w")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, logstore.AppendRequest{SessionID: "w", ExpectedStreamSeq: r.StreamSeq, Events: events("w", 4, 2, "w")}); err != nil {
		t.Fatal(err)
	}
	behind.Store(true)
	if n, err := st.Shred(ctx, "w", r.StreamSeq, nil); err != nil || n != 0 {
		t.Fatalf("shred through stream seq %d with two events after it = %d, %v; want 0", r.StreamSeq, n, err)
	}
	if got := readIDs(t, open(t, nc, logstore.Config{}), "w"); len(got) != 5 {
		t.Fatalf("w reads %v after the shred, want its 5 events", got)
	}
}

// A batched read of a sealed session is one answer of a replica, its
// bodies opened (Chained.Held is set only then), as a plain session's
// is: the batch is asked with the headers a seal needs, and not read
// again from the leader (before, every batch of a sealed session was:
// its bodies, asked without headers, did not decode).
func TestSealedReadBatchInOneAnswer(t *testing.T) {
	nc := natstest.Connect(t, natstest.RunServer(t))
	st := open(t, nc, logstore.Config{SealBodies: true})
	const sid = "sealed-batch"
	appendRun(t, st, sid, 20)
	want, prevs, tail := leaderChain(t, st, sid)
	for _, after := range []int{0, 5, 19} {
		got, err := st.ReadChained(context.Background(), sid, tail, uint64(after), 10, 0)
		if err != nil {
			t.Fatal(err)
		}
		if wantHeld := int64(len(want) - after + min(after, 1)); got.Held != wantHeld {
			t.Errorf("after %d: held %d, want %d (the batch in one answer)", after, got.Held, wantHeld)
		}
		checkChained(t, st, sid, tail, after, 10, 0, want, prevs)
	}
}

// Under sealing, the values of a session's lease, claim and fork record
// are stored sealed with its key (DESIGN.md section 2): the bucket holds
// no holder or workspace, every read of this package gives the plain
// value (a store that does not seal, with an empty key cache, too), a
// value moved under another key does not open, a value whose key is gone
// reads as erased (a fork record: as none), and plain values written
// before sealing still read.
func TestSealedKVValues(t *testing.T) {
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	ctx := context.Background()
	st := open(t, nc, logstore.Config{SealBodies: true})
	plain := open(t, nc, logstore.Config{})
	js := natstest.JetStream(t, nc)
	raw := func(bucket, key string) []byte {
		t.Helper()
		kv, err := js.KeyValue(ctx, bucket)
		if err != nil {
			t.Fatal(err)
		}
		e, err := kv.Get(ctx, key)
		if err != nil {
			t.Fatalf("%s %s: %v", bucket, key, err)
		}
		return e.Value()
	}
	if err := st.RenewLease(ctx, "s", "holder-secret", time.Now()); err != nil {
		t.Fatal(err)
	}
	recs, err := st.OpenForkRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fork := []byte(`{"childId":"c","parentId":"s","workspace":"/ws-secret","heartbeatAt":"2026-01-02T03:04:05Z"}`)
	if err := recs.Create(ctx, "c", fork); err != nil {
		t.Fatal(err)
	}
	for _, v := range [][]byte{raw(logstore.LeaseBucket, "s"), raw(logstore.ClaimBucket, "s"), raw(logstore.ForkBucket, "c")} {
		if !bytes.HasPrefix(v, []byte(logstore.ValueSealPrefix)) || bytes.Contains(v, []byte("secret")) {
			t.Fatalf("stored value %q, want sealed", v)
		}
	}
	for _, reader := range []*logstore.Store{st, plain} {
		l, _, err := reader.GetLease(ctx, "s")
		if err != nil || l == nil || l.Holder != "holder-secret" {
			t.Fatalf("lease %+v, %v", l, err)
		}
		rec, err := reader.LeaseRecord(ctx, "s")
		if err != nil || !rec.Live() || rec.Lease.Holder != "holder-secret" {
			t.Fatalf("lease record %+v, %v", rec, err)
		}
		if c, err := reader.GetClaim(ctx, "s"); err != nil || c == nil || c.Holder != "holder-secret" {
			t.Fatalf("claim %+v, %v", c, err)
		}
		f, ok, err := reader.ForkInFlightOf(ctx, "c")
		if err != nil || !ok || f.ParentID != "s" {
			t.Fatalf("fork in flight %+v %v %v", f, ok, err)
		}
		n := 0
		if err := reader.ForksInFlight(ctx, func(logstore.ForkInFlight) { n++ }); err != nil || n != 1 {
			t.Fatalf("forks in flight: %d, %v", n, err)
		}
		r, err := reader.OpenForkRecords(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok, err := r.Get(ctx, "c"); err != nil || !ok || !bytes.Equal(got.Value, fork) {
			t.Fatalf("fork record %q %v %v", got.Value, ok, err)
		}
	}
	// The lease's rules hold on the sealed value: another holder is
	// refused, takeover takes it, and a renewal replaces it.
	var held *logstore.LeaseHeldError
	if err := st.TakeLease(ctx, "s", "holder-other", time.Now(), false); !errors.As(err, &held) || held.Holder != "holder-secret" {
		t.Fatalf("another holder's take: %v", err)
	}
	if err := st.TakeLease(ctx, "s", "holder-other", time.Now(), true); err != nil {
		t.Fatal(err)
	}
	if l, _, err := plain.GetLease(ctx, "s"); err != nil || l == nil || l.Holder != "holder-other" {
		t.Fatalf("lease after takeover %+v, %v", l, err)
	}

	// Moved under another key (another session's), a value does not open.
	if err := st.RenewLease(ctx, "t", "holder-t", time.Now()); err != nil {
		t.Fatal(err)
	}
	leases, err := js.KeyValue(ctx, logstore.LeaseBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leases.Put(ctx, "t", raw(logstore.LeaseBucket, "s")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.GetLease(ctx, "t"); schema.CodeOf(err) != schema.CodeUnreadable {
		t.Fatalf("a value moved to another key: %v, want unreadable", err)
	}

	// A plain value (written before sealing) reads as it is.
	if err := plain.RenewLease(ctx, "p", "holder-plain", time.Now()); err != nil {
		t.Fatal(err)
	}
	if l, _, err := st.GetLease(ctx, "p"); err != nil || l == nil || l.Holder != "holder-plain" {
		t.Fatalf("plain lease %+v, %v", l, err)
	}

	// The key gone (an erase destroyed it): the session reads as erased,
	// its fork record as none.
	keys, err := js.KeyValue(ctx, logstore.KeysBucket)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"s", "c"} {
		if err := keys.Purge(ctx, id); err != nil {
			t.Fatal(err)
		}
		st.ForgetKey(id)
		plain.ForgetKey(id)
	}
	for _, reader := range []*logstore.Store{st, plain} {
		if _, _, err := reader.GetLease(ctx, "s"); schema.CodeOf(err) != schema.CodeErased {
			t.Fatalf("lease without its key: %v, want erased", err)
		}
		if _, err := reader.LeaseRecord(ctx, "s"); schema.CodeOf(err) != schema.CodeErased {
			t.Fatalf("lease record without its key: %v, want erased", err)
		}
		if err := reader.TakeLease(ctx, "s", "holder-other", time.Now(), false); schema.CodeOf(err) != schema.CodeErased {
			t.Fatalf("take without its key: %v, want erased", err)
		}
		if _, err := reader.GetClaim(ctx, "s"); schema.CodeOf(err) != schema.CodeErased {
			t.Fatalf("claim without its key: %v, want erased", err)
		}
		if f, ok, err := reader.ForkInFlightOf(ctx, "c"); err != nil || ok {
			t.Fatalf("fork without its key: %+v %v %v, want none", f, ok, err)
		}
		if err := reader.ForksInFlight(ctx, func(f logstore.ForkInFlight) { t.Fatalf("fork without its key: %+v", f) }); err != nil {
			t.Fatal(err)
		}
		r, err := reader.OpenForkRecords(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := r.Get(ctx, "c"); schema.CodeOf(err) != schema.CodeErased {
			t.Fatalf("fork record without its key: %v, want erased", err)
		}
	}
}

// A store seals what it writes when its Config says so, and every store
// does in a build with the tag sealforced (`make test-sealed`), but one
// that a test opens with Plain.
func TestSealForced(t *testing.T) {
	nc := natstest.Connect(t, natstest.RunServer(t))
	for _, c := range []struct {
		id   string
		cfg  logstore.Config
		want bool
	}{
		{"default", logstore.Config{}, logstore.SealForced},
		{"sealing", logstore.Config{SealBodies: true}, true},
		{"plain", logstore.Plain(logstore.Config{}), false},
	} {
		st := open(t, nc, c.cfg)
		if _, err := st.Append(context.Background(), logstore.AppendRequest{SessionID: c.id, Events: events(c.id, 1, 1, "e")}); err != nil {
			t.Fatal(err)
		}
		if got := tamper.Sealed(t, nc, "SESSIONS", logstore.SubjectPrefix+c.id); got != c.want {
			t.Errorf("%s: stored sealed %v, want %v", c.id, got, c.want)
		}
	}
}
