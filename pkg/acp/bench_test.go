package acp_test

import (
	"encoding/json"
	"io"
	"testing"

	"github.com/sessionlog/sessionlog/internal/sessionfixture"
	"github.com/sessionlog/sessionlog/pkg/acp"
)

// BenchmarkMap: mapping and encoding the fixture session's notifications
// (what GET /acp does per event after reading it), per event.
func BenchmarkMap(b *testing.B) {
	evs := sessionfixture.Events("bench")
	enc := json.NewEncoder(io.Discard)
	b.ReportAllocs()
	for b.Loop() {
		for i := range evs {
			for _, u := range acp.Map(&evs[i]) {
				if err := enc.Encode(acp.Notify("bench", u)); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
}
