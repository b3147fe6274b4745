package writer

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkUsagePerAppend is the usage bookkeeping of one agent's append
// under a byte bound: the check before it and the count after it (no
// flush runs, no store is reached: the counts stay in memory).
func BenchmarkUsagePerAppend(b *testing.B) {
	u, err := newTenantUsage(Config{TenantMaxBytes: 1 << 62}, prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := u.checkBytes("acme", 100); err != nil {
			b.Fatal(err)
		}
		u.count("acme", 0, 100)
	}
}
