package assemble

import (
	"reflect"
	"testing"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/services/eraser"
	"github.com/sessionlog/sessionlog/services/forker"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/repairer"
	"github.com/sessionlog/sessionlog/services/source"
	"github.com/sessionlog/sessionlog/services/writer"
)

// The defaults are the services' own (their DefaultConfig), field for
// field, but for what assemble states itself: the writer's and the
// repairer's lease TTL is the store's default, and the repairer's
// GroupInflight is left to New (1 on a store of one replica).
func TestDefaultsAreTheServices(t *testing.T) {
	w := writer.DefaultConfig()
	w.LeaseTTL = logstore.DefaultLeaseTTL
	r := repairer.DefaultConfig()
	r.LeaseTTL, r.GroupInflight = logstore.DefaultLeaseTTL, 0
	p := projector.DefaultConfig()
	p.DataDir = "d"
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"writer", DefaultWriter(), w},
		{"repairer", DefaultRepairer(), r},
		{"source", DefaultSource(), source.DefaultConfig()},
		{"eraser", DefaultEraser(), eraser.DefaultConfig()},
		{"forker", DefaultForker(), forker.DefaultConfig()},
		{"projector", DefaultProjector("d"), Projector{Config: p}},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: %+v, want %+v", c.name, c.got, c.want)
		}
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
