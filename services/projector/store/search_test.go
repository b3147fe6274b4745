package store

import (
	"fmt"
	"slices"
	"testing"
)

// TestSnapshotSearch: a search walks the sessions holding its first term
// in id order, once each with the first event holding it, from after a
// session, within an id prefix or skipping one, until told to stop; a
// session holds all the terms when the index holds each other term in
// it.
func TestSnapshotSearch(t *testing.T) {
	d := openStore(t)
	b := d.NewBatch()
	for _, k := range []struct {
		term, id string
		seq      uint64
	}{
		{"foo", "a", 3}, {"foo", "a", 5}, {"foo", "b", 1}, {"foo", "_Tx_c", 2}, {"foo", "_Tx_d", 4},
		{"foo", "_Ty_e", 1}, {"foo", "z", 7}, {"fo", "y", 1}, {"fooo", "y", 1},
		{"bar", "b", 2}, {"bar", "_Tx_d", 9}, {"bar", "z", 1}, {"bar", "a-1", 1},
	} {
		b.Set(SearchKey(nil, k.term, k.id, k.seq), nil, []byte{})
	}
	if err := b.Commit(Checkpoint{Version: "t"}); err != nil {
		t.Fatal(err)
	}
	snap := d.NewSnapshot()
	defer snap.Close()
	for _, c := range []struct {
		name                string
		terms               []string
		within, skip, after string
		stopAt              int
		want                []string
	}{
		{"foo", []string{"foo"}, "", "", "", 0, []string{"_Tx_c/2 true", "_Tx_d/4 true", "_Ty_e/1 true", "a/3 true", "b/1 true", "z/7 true"}},
		{"foo bar", []string{"foo", "bar"}, "", "", "", 0, []string{"_Tx_c/2 false", "_Tx_d/4 true", "_Ty_e/1 false", "a/3 false", "b/1 true", "z/7 true"}},
		{"within _Tx_", []string{"foo"}, "_Tx_", "", "", 0, []string{"_Tx_c/2 true", "_Tx_d/4 true"}},
		{"within _Tx_ after c", []string{"foo", "bar"}, "_Tx_", "", "_Tx_c", 0, []string{"_Tx_d/4 true"}},
		{"skip _T", []string{"foo"}, "", "_T", "", 0, []string{"a/3 true", "b/1 true", "z/7 true"}},
		{"after a", []string{"foo"}, "", "", "a", 0, []string{"b/1 true", "z/7 true"}},
		{"stop at 2", []string{"foo"}, "", "", "", 2, []string{"_Tx_c/2 true", "_Tx_d/4 true"}},
		{"none", []string{"baz"}, "", "", "", 0, nil},
	} {
		var got []string
		err := snap.Search(c.terms, c.within, c.skip, c.after, func(s SearchSession) bool {
			got = append(got, fmt.Sprintf("%s/%d %v", s.ID, s.Seq, s.HoldsAll()))
			return len(got) != c.stopAt
		})
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%s: search = %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}
