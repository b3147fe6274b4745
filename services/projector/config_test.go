package projector

import (
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/defaultstest"
)

// A projector built from a zero Config commits batches of 20,000 events
// and bounds its watches as it did before DefaultConfig held its defaults,
// and a watch hub built on partial limits gets the rest of them.
func TestDefaultConfig(t *testing.T) {
	d, filled := DefaultConfig(), Config{}.withDefaults()
	dw, fw := d.Watch, filled.Watch
	defaultstest.Check(t,
		defaultstest.F("MaxBatchEvents", d.MaxBatchEvents, filled.MaxBatchEvents, 20_000),
		defaultstest.F("MaxBatchBytes", d.MaxBatchBytes, filled.MaxBatchBytes, 16<<20),
		defaultstest.F("CacheSessions", d.CacheSessions, filled.CacheSessions, 4096),
		defaultstest.F("SnapshotEvery", d.SnapshotEvery, filled.SnapshotEvery, 64),
		defaultstest.F("FetchBatch", d.FetchBatch, filled.FetchBatch, 2000),
		defaultstest.F("Heartbeat", d.Heartbeat, filled.Heartbeat, 15*time.Second),
		defaultstest.F("Watch.QueueBytes", dw.QueueBytes, fw.QueueBytes, 2<<20),
		defaultstest.F("Watch.TotalBytes", dw.TotalBytes, fw.TotalBytes, 256<<20),
		defaultstest.F("Watch.PageBytes", dw.PageBytes, fw.PageBytes, 1<<20),
		defaultstest.F("Watch.MaxTransientBytes", dw.MaxTransientBytes, fw.MaxTransientBytes, 64<<10),
		defaultstest.F("Watch.WriteTimeout", dw.WriteTimeout, fw.WriteTimeout, 30*time.Second),
		defaultstest.F("DataDir", d.DataDir, filled.DataDir, ""),
	)
}
