package sessionfixture

import "testing"

func TestFixtureFolds(t *testing.T) {
	if err := Check(ParentEvents()); err != nil {
		t.Fatal(err)
	}
	if err := Check(Events("fx")); err != nil {
		t.Fatal(err)
	}
}
