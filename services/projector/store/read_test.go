package store

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// openStore opens a store in a temporary directory, closed when the
// test ends.
func openStore(tb testing.TB) *DB {
	tb.Helper()
	d, err := Open(tb.TempDir(), Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.Close() })
	return d
}

// commitEvents commits values "<id>/<seq>" at the event keys of sessions
// ids, seqs 1..n.
func commitEvents(tb testing.TB, d *DB, ids []string, n int) {
	tb.Helper()
	b := d.NewBatch()
	for _, id := range ids {
		for seq := 1; seq <= n; seq++ {
			b.Set(EventKey(id, uint64(seq)), nil, fmt.Appendf(nil, "%s/%d", id, seq))
		}
	}
	if err := b.Commit(Checkpoint{Version: "t"}); err != nil {
		tb.Fatal(err)
	}
}

// TestSnapshotReads: a snapshot reads the store as it was when taken,
// whatever is committed after; Get tells a missing key by ok, not by an
// error; Iter walks one prefix only (a longer id sharing the prefix's
// bytes included), both ways and by seeks, and a nil prefix every key.
func TestSnapshotReads(t *testing.T) {
	d, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	commitEvents(t, d, []string{"a", "ab", "b"}, 3)
	snap := d.NewSnapshot()
	defer snap.Close()

	b := d.NewBatch()
	b.Set(EventKey("a", 4), nil, []byte("late"))
	b.Delete(EventKey("a", 1), []byte("a/1"))
	if err := b.Commit(Checkpoint{Version: "t2"}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := d.Get(EventKey("a", 1)); ok {
		t.Fatal("the committed delete is not seen by the store")
	}

	if v, ok, err := snap.Get(EventKey("a", 1)); err != nil || !ok || string(v) != "a/1" {
		t.Errorf("snapshot get a/1 = %q %v %v, want the value before the delete", v, ok, err)
	}
	if v, ok, err := snap.Get(EventKey("a", 4)); err != nil || ok || v != nil {
		t.Errorf("snapshot get a/4 = %q %v %v, want no value and no error (written after the snapshot)", v, ok, err)
	}

	walk := func(it Iterator, from func() bool, step func() bool) []string {
		var got []string
		for ok := from(); ok; ok = step() {
			if !it.Valid() {
				t.Fatal("a positioned iterator is not valid")
			}
			got = append(got, string(it.Value()))
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		return got
	}
	it, err := snap.Iter(EventPrefix("a"))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(walk(it, it.First, it.Next)); got != "[a/1 a/2 a/3]" {
		t.Errorf("forward walk of a = %s", got)
	}
	it, _ = snap.Iter(EventPrefix("a"))
	if got := fmt.Sprint(walk(it, it.Last, it.Prev)); got != "[a/3 a/2 a/1]" {
		t.Errorf("backward walk of a = %s", got)
	}
	it, _ = snap.Iter(EventPrefix("a"))
	if got := fmt.Sprint(walk(it, func() bool { return it.SeekGE(EventKey("a", 2)) }, it.Next)); got != "[a/2 a/3]" {
		t.Errorf("walk of a from seq 2 = %s", got)
	}
	it, _ = snap.Iter(EventPrefix("a"))
	if got := fmt.Sprint(walk(it, func() bool { return it.SeekLT(EventKey("a", 3)) }, it.Prev)); got != "[a/2 a/1]" {
		t.Errorf("walk of a back from before seq 3 = %s", got)
	}
	it, _ = snap.Iter(nil)
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	if err := it.Close(); err != nil || n != 10 {
		t.Errorf("nil prefix walked %d keys (%v), want 9 events and the checkpoint", n, err)
	}

	// The committed store (DB.Iter) sees the later batch.
	it, _ = d.Iter(EventPrefix("a"))
	if got := fmt.Sprint(walk(it, it.First, it.Next)); got != "[a/2 a/3 late]" {
		t.Errorf("store walk of a = %s", got)
	}
}

// BenchmarkSnapshotRead compares the read API with the Pebble calls it
// wraps, on a store of 1,000 sessions of 100 events: a get of one event,
// and a walk of one session's events from a seek (a snapshot taken per
// operation, as the HTTP side takes one per request). The two must not
// differ by more than noise.
func BenchmarkSnapshotRead(b *testing.B) {
	d, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = fmt.Sprintf("s-%04d", i)
	}
	commitEvents(b, d, ids, 100)
	if err := d.db.Flush(); err != nil {
		b.Fatal(err)
	}
	keys := make([][]byte, 0, 1024)
	prefixes := make([][]byte, 0, 1024)
	for i := range 1024 {
		keys = append(keys, EventKey(ids[(i*7919)%len(ids)], uint64(i%100+1)))
		prefixes = append(prefixes, EventPrefix(ids[(i*7919)%len(ids)]))
	}
	var sink int
	// run times read(i) for i = 0, 1, ...; read returns the bytes read.
	run := func(name string, read func(i int) (int, error)) {
		b.Run(name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				n, err := read(i)
				if err != nil {
					b.Fatal(err)
				}
				sink += n
				i++
			}
		})
	}
	run("Get/store", func(i int) (int, error) {
		s := d.NewSnapshot()
		defer s.Close()
		v, ok, err := s.Get(keys[i%len(keys)])
		if !ok && err == nil {
			err = errors.New("no value")
		}
		return len(v), err
	})
	run("Get/pebble", func(i int) (int, error) {
		s := d.db.NewSnapshot()
		defer s.Close()
		v, closer, err := s.Get(keys[i%len(keys)])
		if errors.Is(err, pebble.ErrNotFound) || err != nil {
			return 0, err
		}
		out := append([]byte(nil), v...)
		return len(out), closer.Close()
	})
	run("Walk/store", func(i int) (n int, err error) {
		s := d.NewSnapshot()
		defer s.Close()
		p := prefixes[i%len(prefixes)]
		it, err := s.Iter(p)
		if err != nil {
			return 0, err
		}
		for ok := it.SeekGE(p); ok; ok = it.Next() {
			n += len(it.Key()) + len(it.Value())
		}
		return n, it.Close()
	})
	run("Walk/pebble", func(i int) (n int, err error) {
		s := d.db.NewSnapshot()
		defer s.Close()
		p := prefixes[i%len(prefixes)]
		it, err := s.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: PrefixEnd(p)})
		if err != nil {
			return 0, err
		}
		for ok := it.SeekGE(p); ok; ok = it.Next() {
			n += len(it.Key()) + len(it.Value())
		}
		return n, it.Close()
	})
	if sink == 0 {
		b.Fatal("nothing read")
	}
}
