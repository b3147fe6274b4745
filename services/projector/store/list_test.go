package store

import (
	"fmt"
	"slices"
	"testing"
)

// listStore is a store holding sessions s1..s5, active at 1..5, as the
// fold indexes them: every one in the activity index, s1, s3 and s5
// active and s2 and s4 closed, s2, s4 and s5 of tenant "t" (its
// activity index, and its closed index s2 and s4), s2 and s5 readable by
// its agent "x" and s4 and s5 by its agent "y" (their activity indexes,
// and x's closed index s2); every session but s3 has a summary.
func listStore(t *testing.T) *DB {
	t.Helper()
	d := openStore(t)
	b := d.NewBatch()
	status := map[uint64]string{1: "active", 2: "closed", 3: "active", 4: "closed", 5: "active"}
	for ns := uint64(1); ns <= 5; ns++ {
		id := fmt.Sprintf("s%d", ns)
		b.Set(ActivityKey(ns, id), nil, []byte{})
		b.Set(StatusKey(status[ns], ns, id), nil, []byte{})
		if ns != 3 {
			v, err := AppendSummary(nil, &Summary{SessionID: id, Status: status[ns]})
			if err != nil {
				t.Fatal(err)
			}
			b.Set(SummaryKey(id), nil, v)
		}
	}
	for _, c := range []struct {
		prefix []byte
		ns     uint64
	}{
		{TenantActivityPrefix("t"), 2}, {TenantActivityPrefix("t"), 4}, {TenantActivityPrefix("t"), 5},
		{TenantStatusPrefix("t", "closed"), 2}, {TenantStatusPrefix("t", "closed"), 4},
		{AgentActivityPrefix("t", "x"), 2}, {AgentActivityPrefix("t", "x"), 5},
		{AgentActivityPrefix("t", "y"), 4}, {AgentActivityPrefix("t", "y"), 5},
		{AgentStatusPrefix("t", "x", "closed"), 2},
	} {
		b.Set(IndexKey(c.prefix, c.ns, fmt.Sprintf("s%d", c.ns)), nil, []byte{})
	}
	if err := b.Commit(Checkpoint{Version: "t"}); err != nil {
		t.Fatal(err)
	}
	return d
}

func summaryIDs(sums []Summary) []string {
	var ids []string
	for _, s := range sums {
		ids = append(ids, s.SessionID)
	}
	return ids
}

// TestSnapshotList: a list reads its index (the activity index, a
// status's, a tenant's) newest first, from before a place, up to a limit
// of summaries of the sessions keep allows (a session without a summary
// left out), says whether entries follow, and counts every entry and
// summary it read.
func TestSnapshotList(t *testing.T) {
	snap := listStore(t).NewSnapshot()
	defer snap.Close()
	not5 := func(id string) bool { return id != "s5" }
	for _, c := range []struct {
		name           string
		tenant, status string
		from           *IndexPos
		limit          int
		keep           func(string) bool
		want           []string
		more           bool
		reads          ListReads
	}{
		{"all", "", "", nil, 10, nil, []string{"s5", "s4", "s2", "s1"}, false, ListReads{5, 5}},
		{"page", "", "", nil, 2, nil, []string{"s5", "s4"}, true, ListReads{2, 2}},
		{"after s4", "", "", &IndexPos{4, "s4"}, 10, nil, []string{"s2", "s1"}, false, ListReads{3, 3}},
		{"active but s5", "", "active", nil, 10, not5, []string{"s1"}, false, ListReads{3, 2}},
		{"tenant", "t", "", nil, 10, nil, []string{"s5", "s4", "s2"}, false, ListReads{3, 3}},
		{"tenant closed", "t", "closed", &IndexPos{4, "s4"}, 10, nil, []string{"s2"}, false, ListReads{1, 1}},
		{"closed", "", "closed", nil, 1, nil, []string{"s4"}, true, ListReads{1, 1}},
	} {
		sums, more, reads, err := snap.List(c.tenant, c.status, c.from, c.limit, c.keep)
		if err != nil || !slices.Equal(summaryIDs(sums), c.want) || more != c.more || reads != c.reads {
			t.Errorf("%s: list = %v more %v reads %+v, %v; want %v more %v reads %+v", c.name, summaryIDs(sums), more, reads, err, c.want, c.more, c.reads)
		}
	}
}

// TestSnapshotAgentsList: the list of agents merges their indexes newest
// first, a session in two read once, from before a place, up to a limit,
// leaving out what sees refuses; more says an agent's index has entries
// after the page; it counts the entries and summaries it read.
func TestSnapshotAgentsList(t *testing.T) {
	snap := listStore(t).NewSnapshot()
	defer snap.Close()
	all := func(string, *Summary) bool { return true }
	not4 := func(id string, sum *Summary) bool { return sum.SessionID != "s4" }
	for _, c := range []struct {
		name   string
		agents []string
		status string
		from   *IndexPos
		limit  int
		sees   func(string, *Summary) bool
		want   []string
		more   bool
		reads  ListReads
	}{
		{"x and y", []string{"x", "y"}, "", nil, 10, all, []string{"s5", "s4", "s2"}, false, ListReads{4, 3}},
		{"page", []string{"x", "y"}, "", nil, 1, all, []string{"s5"}, true, ListReads{4, 1}},
		{"not s4", []string{"x", "y"}, "", nil, 10, not4, []string{"s5", "s2"}, false, ListReads{4, 3}},
		{"after s5", []string{"x", "y"}, "", &IndexPos{5, "s5"}, 10, all, []string{"s4", "s2"}, false, ListReads{2, 2}},
		{"y", []string{"y"}, "", nil, 10, all, []string{"s5", "s4"}, false, ListReads{2, 2}},
		{"x closed", []string{"x"}, "closed", nil, 10, all, []string{"s2"}, false, ListReads{1, 1}},
		{"none", []string{"z"}, "", nil, 10, all, nil, false, ListReads{}},
	} {
		sums, more, reads, err := snap.AgentsList("t", c.agents, c.status, c.from, c.limit, c.sees)
		if err != nil || !slices.Equal(summaryIDs(sums), c.want) || more != c.more || reads != c.reads {
			t.Errorf("%s: list = %v more %v reads %+v, %v; want %v more %v reads %+v", c.name, summaryIDs(sums), more, reads, err, c.want, c.more, c.reads)
		}
	}
}
