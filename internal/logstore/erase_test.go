package logstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/api"
)

// A log made before erasure denies message deletes, which no update can
// lift: Open keeps it (instead of failing on every start) and erase is
// refused up front.
func TestStreamThatDeniesDeletesIsKeptAndNotErasable(t *testing.T) {
	s := natstest.RunServer(t)
	nc := natstest.Connect(t, s)
	ctx := context.Background()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	one, err := logstore.NewLayout(1)
	if err != nil {
		t.Fatal(err)
	}
	old := logstore.StreamConfig(logstore.Config{}, one, logstore.StreamName)
	old.DenyDelete = true
	if _, err := js.CreateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	st := open(t, nc, logstore.Config{})
	if err := st.CheckErasable(ctx, "s-1"); !errors.Is(err, logstore.ErrDeletesDenied) {
		t.Fatalf("CheckErasable: %v, want ErrDeletesDenied", err)
	}

	s2 := natstest.RunServer(t)
	st2 := open(t, natstest.Connect(t, s2), logstore.Config{})
	if err := st2.CheckErasable(ctx, "s-1"); err != nil {
		t.Fatalf("a new log: %v", err)
	}
}

// TestErasedRightAfterMarkOnR3: on a 3-node cluster, a session marked
// erased through one node reads as erased at once through every other
// one. Read by Direct Get, a replica that had not yet applied the record
// answered "never erased" (a read right after an erase served its events).
func TestErasedRightAfterMarkOnR3(t *testing.T) {
	c := natstest.RunCluster(t, 3)
	var stores []*logstore.Store
	for i := range c.Servers {
		stores = append(stores, open(t, natstest.Connect(t, c.Servers[i]), logstore.Config{Replicas: 3}))
	}
	ctx := context.Background()
	natstest.CheckFor(t, 20*time.Second, 100*time.Millisecond, func() error {
		_, err := stores[0].Writable(ctx)
		return err
	})
	for i := range 200 {
		id := fmt.Sprintf("gone-%d", i)
		if erased, err := stores[1+i%2].Erased(ctx, id); err != nil || erased {
			t.Fatalf("%s before the mark: erased %v, %v", id, erased, err)
		}
		if _, _, err := stores[0].MarkErased(ctx, logstore.Erasure{SessionID: id, By: "test", Reason: "test"}); err != nil {
			t.Fatal(err)
		}
		for _, st := range stores[1:] {
			if erased, err := st.Erased(ctx, id); err != nil || !erased {
				t.Fatalf("%s read through another node right after the mark: erased %v, %v", id, erased, err)
			}
		}
	}
}

// StoredPage and SecureDelete erase a session among another's messages of
// the same stream, page by page, oldest first: every page starts with the
// oldest event left, the other session is untouched, and deleting a
// message twice (a resumed erase) is no error.
func TestEraseErasePagesOfOneSession(t *testing.T) {
	const sid = "er-pages"
	_, st, want, _ := interleavedOnOneNode(t, sid, 6, 5) // 30 events among 6 others
	ctx := context.Background()
	other := samePartition(t, st, sid)
	otherBefore, _ := leaderBodies(t, st, other)
	var got [][]byte
	var prev []uint64
	for {
		page, err := st.StoredPage(ctx, sid, 7)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		seqs := make([]uint64, len(page))
		for i, m := range page {
			seqs[i] = m.StreamSeq
			got = append(got, m.Data)
		}
		// The page before, deleted again: nothing to do.
		if err := st.SecureDelete(ctx, sid, prev, 2, nil); err != nil {
			t.Fatalf("repeat: %v", err)
		}
		if err := st.SecureDelete(ctx, sid, seqs, 2, nil); err != nil {
			t.Fatal(err)
		}
		prev = seqs
	}
	checkBodies(t, got, want, 0, len(want))
	if m, err := st.NextAfter(ctx, sid, 0); err != nil || m != nil {
		t.Fatalf("left: %v %v", m, err)
	}
	otherAfter, _ := leaderBodies(t, st, other)
	checkBodies(t, otherAfter, otherBefore, 0, len(otherBefore))
}

// DropSessionRecords deletes every stored message of the session's
// lease, claim, snapshot and source index keys (securely: the buckets allow
// deletes), and leaves another session's.
func TestEraseDropSessionRecords(t *testing.T) {
	nc := natstest.Connect(t, natstest.RunServer(t))
	st := open(t, nc, logstore.Config{})
	ctx := context.Background()
	now := time.Now()
	for _, id := range []string{"dr-1", "dr-2"} {
		if err := st.TakeLease(ctx, id, "holder-of-"+id, now, false); err != nil {
			t.Fatal(err)
		}
		if err := st.RenewLease(ctx, id, "holder-of-"+id, now); err != nil {
			t.Fatal(err)
		}
		if err := st.EnsureClaim(ctx, id, "holder-of-"+id, now); err != nil {
			t.Fatal(err)
		}
		k := api.SourceKey{Format: "claude-code", ProjectKey: "/home/" + id, SessionKey: "key-" + id}
		b, _ := json.Marshal(map[string]any{"format": k.Format, "projectKey": k.ProjectKey, "sessionKey": k.SessionKey, "sessionId": id})
		if err := st.SourceCreate(ctx, logstore.SourceOwnerKey(id), b); err != nil {
			t.Fatal(err)
		}
		if err := st.SourcePut(ctx, logstore.SourceListKey(k), b); err != nil {
			t.Fatal(err)
		}
		// A snapshot of two generations: a state part (of more than one
		// chunk) and an id part each.
		for _, gen := range []string{"5", "9"} {
			sp, err := st.PutSnapshotPart(ctx, id, "s"+gen, bytes.Repeat([]byte("state of "+id+" "), 100_000))
			if err != nil {
				t.Fatal(err)
			}
			ip, err := st.PutSnapshotPart(ctx, id, "i"+gen, []byte("ids of "+id))
			if err != nil {
				t.Fatal(err)
			}
			if err := st.PutSnapshotHead(ctx, id, logstore.SnapshotHead{Seq: 9, StreamSeq: 9, State: sp, IDs: []logstore.SnapshotPart{ip}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := st.DropSessionRecords(ctx, "dr-1"); err != nil {
		t.Fatal(err)
	}
	// Twice: a resumed erase.
	if err := st.DropSessionRecords(ctx, "dr-1"); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	count := func(bucket, key string) uint64 {
		t.Helper()
		s, err := js.Stream(ctx, "KV_"+bucket)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx, jetstream.WithSubjectFilter("$KV."+bucket+"."+key))
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Subjects["$KV."+bucket+"."+key]
	}
	for id, want := range map[string]uint64{"dr-1": 0, "dr-2": 1} {
		k := api.SourceKey{Format: "claude-code", ProjectKey: "/home/" + id, SessionKey: "key-" + id}
		for _, c := range []struct{ bucket, key string }{{logstore.LeaseBucket, id}, {logstore.ClaimBucket, id},
			{logstore.SourceBucket, logstore.SourceOwnerKey(id)}, {logstore.SourceBucket, logstore.SourceListKey(k)},
			{logstore.SnapshotBucket, id}, {logstore.SnapshotBucket, id + ".s5.0"}, {logstore.SnapshotBucket, id + ".s9.1"},
			{logstore.SnapshotBucket, id + ".i5.0"}, {logstore.SnapshotBucket, id + ".i9.0"}} {
			if got := count(c.bucket, c.key); got != want {
				t.Errorf("%s %s: %d messages, want %d", c.bucket, c.key, got, want)
			}
		}
	}
}
