package bench

import (
	"context"
	"testing"
)

// TestRunForkSmall runs the fork benchmark's code path on small sizes, so
// the bench command cannot rot; it asserts no speed.
func TestRunForkSmall(t *testing.T) {
	res, err := RunFork(context.Background(), ForkConfig{Sizes: []int{10, 1200}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].Fork <= 0 || res[1].Raw <= 0 {
		t.Fatalf("%+v", res)
	}
	for _, r := range res {
		t.Log(r.Line())
	}
}
