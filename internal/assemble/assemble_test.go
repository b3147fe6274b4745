package assemble

import (
	"testing"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/services/eraser"
	"github.com/sessionlog/sessionlog/services/forker"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/repairer"
	"github.com/sessionlog/sessionlog/services/source"
	"github.com/sessionlog/sessionlog/services/writer"
)

// The defaults are the services' own (their DefaultConfig), never zero.
func TestDefaultsAreTheServices(t *testing.T) {
	if w, d := DefaultWriter(), writer.DefaultConfig(); w.LeaseTTL != logstore.DefaultLeaseTTL || w.MaxConcurrent != d.MaxConcurrent || w.StateCacheSize != d.StateCacheSize {
		t.Errorf("writer %+v", w)
	}
	if r, d := DefaultRepairer(), repairer.DefaultConfig(); r != (Repairer{LeaseTTL: logstore.DefaultLeaseTTL, Grace: d.Grace, SweepInterval: d.SweepInterval, Concurrency: d.Concurrency}) {
		t.Errorf("repairer %+v", r)
	}
	if s, d := DefaultSource(), source.DefaultConfig(); s != (Source{MaxConcurrent: d.MaxConcurrent, SourceStates: d.SourceStates, MaxSourceBytes: d.MaxSourceBytes}) {
		t.Errorf("source %+v", s)
	}
	if e := DefaultEraser(); e.SweepInterval != eraser.DefaultConfig().SweepInterval || e.RetainClosed != 0 || e.ArchiveDir != "" {
		t.Errorf("eraser %+v", e)
	}
	if f, d := DefaultForker(), forker.DefaultConfig(); f != (Forker{BatchSize: d.BatchSize, MaxConcurrent: d.MaxConcurrent, SweepEvery: d.SweepEvery, StaleAfter: d.StaleAfter, ForkTimeout: d.ForkTimeout}) {
		t.Errorf("forker %+v", f)
	}
	if p, d := DefaultProjector("d"), projector.DefaultConfig(); p.DataDir != "d" || p.MaxBatchEvents != d.MaxBatchEvents || p.CacheSessions != d.CacheSessions || p.Watch != d.Watch {
		t.Errorf("projector %+v", p)
	}
}

func TestNoStore(t *testing.T) {
	if _, err := NewWriter(DefaultWriter(), nil, Deps{}); err == nil {
		t.Error("writer without a store")
	}
	if _, err := NewRepairer(DefaultRepairer(), nil, Deps{}); err == nil {
		t.Error("repairer without a store")
	}
	if _, err := NewSource(DefaultSource(), nil, Deps{}); err == nil {
		t.Error("source without a store")
	}
	if _, err := NewEraser(DefaultEraser(), nil, Deps{}); err == nil {
		t.Error("eraser without a store")
	}
	if _, err := NewForker(DefaultForker(), nil, Deps{}); err == nil {
		t.Error("forker without a store")
	}
	if _, err := NewProjector(DefaultProjector("d"), nil, Deps{}); err == nil {
		t.Error("projector without a store")
	}
}
