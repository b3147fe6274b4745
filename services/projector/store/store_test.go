package store

import (
	"fmt"
	"testing"
)

// TestBatchSortsButKeepsWriteOrderPerKey: a batch hands its writes to
// Pebble sorted by key; of several writes of one key the last one made
// wins, and the kept checksum is the one a scan computes.
func TestBatchSortsButKeepsWriteOrderPerKey(t *testing.T) {
	d, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	b := d.NewBatch()
	for i := 9; i >= 0; i-- {
		b.Set(EventKey(fmt.Sprintf("s%d", i%3), uint64(i)), nil, []byte{byte(i)})
	}
	b.Set(SummaryKey("a"), nil, []byte("1"))
	b.Set(SummaryKey("a"), []byte("1"), []byte("2"))
	b.Set(SummaryKey("b"), nil, []byte("x"))
	b.Delete(SummaryKey("b"), []byte("x"))
	b.Set(SummaryKey("c"), nil, []byte("y"))
	b.Delete(SummaryKey("c"), []byte("y"))
	b.Set(SummaryKey("c"), nil, []byte("z"))
	b.SetInternal(SnapshotKey("a"), []byte("s1"))
	b.SetInternal(SnapshotKey("a"), []byte("s2"))
	if err := b.Commit(Checkpoint{Version: "t"}); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{string(SummaryKey("a")): "2", string(SummaryKey("c")): "z", string(SnapshotKey("a")): "s2", string(EventKey("s1", 4)): "\x04"} {
		if v, ok, err := d.Get([]byte(key)); err != nil || !ok || string(v) != want {
			t.Errorf("%q = %q %v %v, want %q", key, v, ok, err, want)
		}
	}
	if _, ok, _ := d.Get(SummaryKey("b")); ok {
		t.Error("deleted key is there")
	}
	sum, n, err := d.Scan()
	if err != nil {
		t.Fatal(err)
	}
	if sum != d.Checksum() || n != 12 {
		t.Fatalf("scan %016x over %d keys, kept %016x", sum, n, d.Checksum())
	}
	cp, ok, err := d.Checkpoint()
	if err != nil || !ok || cp.Checksum != sum || cp.Version != "t" {
		t.Fatalf("checkpoint %+v %v %v", cp, ok, err)
	}
}
