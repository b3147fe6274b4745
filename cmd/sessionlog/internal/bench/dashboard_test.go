package bench

import (
	"context"
	"testing"
)

// The dashboard benchmark on a small session: every load draws every row
// (RunDashboard checks the count) and is timed beside the API's.
func TestRunDashboard(t *testing.T) {
	res, err := RunDashboard(context.Background(), DashboardConfig{Events: 300, Loads: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Events < 300 || len(res.Page) != 2 || len(res.API) != 2 || len(res.Draw) != 2 {
		t.Fatalf("%+v", res)
	}
	for i, d := range res.Page {
		if d <= 0 || res.First[i] <= 0 || res.First[i] > d {
			t.Fatalf("load %d: first row after %v, last after %v", i, res.First[i], d)
		}
	}
}
