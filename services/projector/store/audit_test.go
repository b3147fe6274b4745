package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sessionlog/sessionlog/pkg/api"
)

// TestSnapshotAudit: the audit index reads back its cursors (0 when
// unset), the number of a tenant's last record, the records of a tenant
// after a number in number order (of that tenant alone, until told to
// stop) and those a token of agents sees by their own numbers; a record
// that does not decode, or that the agents' index names and the
// tenant's does not hold, is an error.
func TestSnapshotAudit(t *testing.T) {
	d := openStore(t)
	be := func(ns ...uint64) []byte {
		var v []byte
		for _, n := range ns {
			v = binary.BigEndian.AppendUint64(v, n)
		}
		return v
	}
	rec := func(id string) []byte { v, _ := json.Marshal(api.AuditRecord{SessionID: id, By: "op"}); return v }
	x, z := []string{"x"}, []string{"x", "z"}
	kvs := [][2][]byte{
		{AuditCursorKey(), be(42)},
		{AgentsAuditCursorKey("t", x), be(4, 2)},
		{AgentsAuditCursorKey("t", z), be(7)}, // not two numbers: none
		{AgentsAuditKey("t", x, 1), be(2)},
		{AgentsAuditKey("t", x, 2), be(4)},
		{AgentsAuditKey("t", x, 3), []byte{1}}, // not a number: passed over
		{AgentsAuditKey("t", z, 1), be(3)},
		{AgentsAuditKey("t", z, 2), be(9)}, // not in the tenant's index
		{TenantAuditKey("tt", 1), rec("_Ttt_a")},
		{TenantAuditKey("bad", 1), rec("_Tbad_a")},
		{TenantAuditKey("bad", 2), []byte(`{"sessionId":`)},
	}
	for n := uint64(1); n <= 4; n++ {
		kvs = append(kvs, [2][]byte{TenantAuditKey("t", n), rec(fmt.Sprintf("_Tt_s%d", n))})
	}
	if err := d.SetInternals(kvs); err != nil {
		t.Fatal(err)
	}
	snap := d.NewSnapshot()
	defer snap.Close()

	if c, err := snap.AuditCursor(); err != nil || c != 42 {
		t.Errorf("audit cursor = %d, %v; want 42", c, err)
	}
	for _, c := range []struct {
		agents  []string
		n, last uint64
	}{{x, 4, 2}, {z, 0, 0}, {[]string{"y"}, 0, 0}} {
		if n, last, err := snap.AgentsAuditCursor("t", c.agents); err != nil || n != c.n || last != c.last {
			t.Errorf("audit cursor of %v = %d %d, %v; want %d %d", c.agents, n, last, err, c.n, c.last)
		}
	}
	for tenant, want := range map[string]uint64{"t": 4, "tt": 1, "u": 0, "bad": 2} {
		if n, err := snap.LastAudit(tenant); err != nil || n != want {
			t.Errorf("last audit of %s = %d, %v; want %d", tenant, n, err, want)
		}
	}

	walk := func(read func(fn func(n uint64, a *api.AuditRecord) bool) error, stop int) ([]string, error) {
		var got []string
		err := read(func(n uint64, a *api.AuditRecord) bool {
			got = append(got, fmt.Sprintf("%d:%s", n, a.SessionID))
			return len(got) != stop
		})
		return got, err
	}
	for _, c := range []struct {
		tenant      string
		after       uint64
		stop        int
		want        []string
		errContains string
	}{
		{"t", 0, 0, []string{"1:_Tt_s1", "2:_Tt_s2", "3:_Tt_s3", "4:_Tt_s4"}, ""},
		{"t", 2, 0, []string{"3:_Tt_s3", "4:_Tt_s4"}, ""},
		{"t", 0, 2, []string{"1:_Tt_s1", "2:_Tt_s2"}, ""},
		{"t", 4, 0, nil, ""},
		{"tt", 0, 0, []string{"1:_Ttt_a"}, ""},
		{"bad", 0, 0, []string{"1:_Tbad_a"}, "audit record 2 of bad"},
		{"bad", 0, 1, []string{"1:_Tbad_a"}, ""},
	} {
		got, err := walk(func(fn func(uint64, *api.AuditRecord) bool) error { return snap.TenantAudit(c.tenant, c.after, fn) }, c.stop)
		if !slices.Equal(got, c.want) || (c.errContains == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.errContains) {
			t.Errorf("audit of %s after %d = %v, %v; want %v, error %q", c.tenant, c.after, got, err, c.want, c.errContains)
		}
	}
	for _, c := range []struct {
		agents      []string
		after       uint64
		want        []string
		errContains string
	}{
		{x, 0, []string{"1:_Tt_s2", "2:_Tt_s4"}, ""},
		{x, 1, []string{"2:_Tt_s4"}, ""},
		{z, 0, []string{"1:_Tt_s3"}, "audit record 9 of t (2 of x,z): not indexed"},
		{[]string{"y"}, 0, nil, ""},
	} {
		got, err := walk(func(fn func(uint64, *api.AuditRecord) bool) error {
			return snap.AgentsAudit("t", c.agents, c.after, fn)
		}, 0)
		if !slices.Equal(got, c.want) || (c.errContains == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.errContains) {
			t.Errorf("audit of t seen by %v after %d = %v, %v; want %v, error %q", c.agents, c.after, got, err, c.want, c.errContains)
		}
	}
}
