package store

import (
	"bytes"
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// sortOpsByKeys is the order Batch.sorted must give: by key, and of two
// writes of one key the later one last, comparing keys on equal prefixes
// (how commit sorted the ops before).
func sortOpsByKeys(b *Batch, ops []batchOp) {
	slices.SortFunc(ops, func(x, y batchOp) int {
		if c := cmp.Compare(x.pre[0], y.pre[0]); c != 0 {
			return c
		}
		if c := cmp.Compare(x.pre[1], y.pre[1]); c != 0 {
			return c
		}
		if c := bytes.Compare(b.opKey(&x), b.opKey(&y)); c != 0 {
			return c
		}
		return cmp.Compare(x.key, y.key)
	})
}

// catchupBatch is a batch as a catch-up makes it: the event keys of
// sessions interleaved, search keys, summaries written and deleted more
// than once, and keys shorter than a prefix. Session ids of idFormat:
// short ones put the event keys of a session in a run of equal prefixes;
// long ones with a common start put all event keys in one. shuffled: the
// writes of a session's events are made out of key order.
func catchupBatch(idFormat string, sessions, events int, seed uint64, shuffled bool) *Batch {
	r := rand.New(rand.NewPCG(seed, 1))
	b := &Batch{}
	seq := make([]uint64, sessions)
	for range events {
		s := r.IntN(sessions)
		id := fmt.Sprintf(idFormat, s)
		seq[s]++
		n := seq[s]
		if shuffled {
			n = r.Uint64N(64)
		}
		b.add(EventKey(id, n), []byte("v"), false)
		switch r.IntN(4) {
		case 0:
			b.add(AppendSearchKey(nil, fmt.Appendf(nil, "term%d", r.IntN(50)), id, n), nil, false)
		case 1:
			b.add(SummaryKey(id), fmt.Append(nil, n), r.IntN(8) == 0)
		case 2:
			b.add([]byte{byte('a' + r.IntN(3))}, fmt.Append(nil, n), false)
		}
	}
	// The index keys a flush writes, sessions in the order they were
	// made dirty: of a few times, so that many sessions' keys share a
	// prefix out of key order; the tenant's agree in their first 32
	// bytes too; a session moved twice writes one key twice.
	for _, s := range r.Perm(sessions) {
		id := fmt.Sprintf(idFormat, s)
		ns := uint64(r.IntN(4)) << 40
		b.add(ActivityKey(ns, id), nil, false)
		b.add(IndexKey(TenantStatusPrefix("tenant-of-a-long-name", "active"), ns, id), nil, r.IntN(3) == 0)
		if r.IntN(4) == 0 {
			b.add(ActivityKey(ns, id), nil, true)
		}
	}
	return b
}

func TestBatchSortedByKeyThenWriteOrder(t *testing.T) {
	for _, shuffled := range []bool{false, true} {
		for seed := range uint64(20) {
			format := []string{"bench-%d", "session-%012d"}[seed%2]
			b := catchupBatch(format, 1+int(seed)*7, 2000, seed, shuffled)
			want := slices.Clone(b.ops)
			sortOpsByKeys(b, want)
			var got []batchOp
			order, _ := b.sorted(nil, nil)
			for _, it := range order {
				got = append(got, b.ops[it.op])
			}
			if !slices.Equal(got, want) {
				t.Fatalf("seed %d, ids %q, shuffled %t: the writes are sorted otherwise than by key and write order", seed, format, shuffled)
			}
		}
	}
}

// BenchmarkBatchSort: a catch-up batch's writes (20,000 events of 1,000
// sessions, ids as the catch-up benchmark's) put in commit order by
// Batch.sorted, and by sorting the ops comparing keys on equal prefixes.
func BenchmarkBatchSort(b *testing.B) {
	batch := catchupBatch("bench-%d", 1000, 20_000, 1, false)
	b.Run("sorted", func(b *testing.B) {
		var order, spare []sortItem
		for b.Loop() {
			order, spare = batch.sorted(order, spare)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch.ops)), "ns/write")
	})
	b.Run("ops-by-keys", func(b *testing.B) {
		ops := make([]batchOp, len(batch.ops))
		for b.Loop() {
			copy(ops, batch.ops)
			sortOpsByKeys(batch, ops)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch.ops)), "ns/write")
	})
}
