package store

import (
	"bytes"
	"cmp"
	"fmt"
	"math/rand/v2"
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

// TestKeyPrefixOrdersAsBytes: where two keys' 16-byte prefixes differ,
// they order the keys as bytes.Compare does (the batch sorts by them
// first), keys that are prefixes of others and zero bytes included.
func TestKeyPrefixOrdersAsBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	key := func() []byte {
		k := make([]byte, r.IntN(24))
		for i := range k {
			k[i] = []byte{0, 1, 'a', 'b', 0xff}[r.IntN(5)]
		}
		return k
	}
	for range 200_000 {
		x, y := key(), key()
		px, py := keyPrefix(x), keyPrefix(y)
		c := cmp.Compare(px[0], py[0])
		if c == 0 {
			c = cmp.Compare(px[1], py[1])
		}
		if c != 0 && c != bytes.Compare(x, y) {
			t.Fatalf("%q %q: prefixes say %d, bytes.Compare %d", x, y, c, bytes.Compare(x, y))
		}
	}
}

// TestBatchesReuseOneBuffer: the store commits batch after batch through
// one Pebble batch, and each commit holds exactly its own writes.
func TestBatchesReuseOneBuffer(t *testing.T) {
	d, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for n := range 3 {
		b := d.NewBatch()
		b.Set(SummaryKey(fmt.Sprint(n)), nil, []byte{byte(n)})
		if err := b.Commit(Checkpoint{Version: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	sum, keys, err := d.Scan()
	if err != nil {
		t.Fatal(err)
	}
	if keys != 3 || sum != d.Checksum() {
		t.Fatalf("%d view keys, checksum %x, kept %x; want 3 keys and equal checksums", keys, sum, d.Checksum())
	}
}

// TestCommitAsyncChainsBatches: a batch started while the one before it
// is still in flight starts from that one's checksum (not the committed
// one), the batches land in order, and once they have the kept checksum,
// the scanned one and the stored checkpoint agree.
func TestCommitAsyncChainsBatches(t *testing.T) {
	d, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	hold := make(chan struct{})
	d.SetCommitGate(func() { <-hold })
	b1 := d.NewBatch()
	b1.Set(SummaryKey("a"), nil, []byte("1"))
	p1, err := b1.CommitAsync(Checkpoint{Version: "t", Streams: []StreamPos{{Name: "s", Seq: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	// b1 is held in flight: b2 replaces its value.
	b2 := d.NewBatch()
	b2.Set(SummaryKey("a"), []byte("1"), []byte("2"))
	b2.Set(SummaryKey("b"), nil, []byte("x"))
	close(hold)
	p2, err := b2.CommitAsync(Checkpoint{Version: "t", Streams: []StreamPos{{Name: "s", Seq: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p1.Wait(); err != nil {
		t.Fatal(err)
	}
	cp, err := p2.Wait()
	if err != nil {
		t.Fatal(err)
	}
	scan, _, err := d.Scan()
	if err != nil {
		t.Fatal(err)
	}
	stored, ok, err := d.Checkpoint()
	if err != nil || !ok {
		t.Fatalf("checkpoint: %v %v", ok, err)
	}
	if d.Checksum() != scan || cp.Checksum != scan || stored.Checksum != scan || stored.Stream("s").Seq != 2 {
		t.Fatalf("kept %016x, landed %016x, stored %016x at %d, scanned %016x", d.Checksum(), cp.Checksum, stored.Checksum, stored.Stream("s").Seq, scan)
	}
}

// TestAgentsAuditKeysApart: the audit keys of one set of agents lie under
// its own prefix alone, not under another set's that begins the same
// (alice, alice and bob, alice-x) nor another tenant's, the cursor key
// under none, and the number is read back from the key.
func TestAgentsAuditKeysApart(t *testing.T) {
	sets := []struct {
		tenant string
		agents []string
	}{
		{"acme", []string{"alice"}}, {"acme", []string{"alice", "bob"}}, {"acme", []string{"alice-x"}},
		{"acme-x", []string{"alice"}}, {"acme", []string{"bob"}},
	}
	for i, a := range sets {
		for _, m := range []uint64{1, 255, 256, 1 << 40} {
			k := AgentsAuditKey(a.tenant, a.agents, m)
			for j, b := range sets {
				p := AgentsAuditPrefix(b.tenant, b.agents)
				if under := bytes.HasPrefix(k, p); under != (i == j) {
					t.Errorf("key %d of %s %v under the prefix of %s %v: %v", m, a.tenant, a.agents, b.tenant, b.agents, under)
				}
				if bytes.HasPrefix(AgentsAuditCursorKey(a.tenant, a.agents), p) {
					t.Errorf("the cursor key of %s %v is under the prefix of %s %v", a.tenant, a.agents, b.tenant, b.agents)
				}
			}
			if got := TenantAuditN(AgentsAuditPrefix(a.tenant, a.agents), k); got != m {
				t.Errorf("key %d of %s %v reads back as %d", m, a.tenant, a.agents, got)
			}
		}
	}
}
