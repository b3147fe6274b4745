package sessionfixture

import (
	"testing"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

func TestFixtureFolds(t *testing.T) {
	if err := Check(ParentEvents()); err != nil {
		t.Fatal(err)
	}
	if err := Check(Events("fx")); err != nil {
		t.Fatal(err)
	}
	if err := Check(append(Events("fx"), Finish("fx")...)); err != nil {
		t.Fatal(err)
	}
}

// The bridges' tests say the fixture holds every event type: a type the
// registry gains and the fixture lacks would go untested by them.
func TestFixtureHasEveryType(t *testing.T) {
	have := map[string]bool{}
	for _, e := range append(Events("fx"), Finish("fx")...) {
		have[e.Type] = true
	}
	for _, typ := range append(schema.Types(), "source/line") {
		if !have[typ] {
			t.Errorf("the fixture has no %s event", typ)
		}
	}
}
