package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/sessionlog/sessionlog/cmd/sessionlog/internal/bench"
)

// `sessionlog bench dashboard`: open a 10,000-event session in the
// dashboard in headless Chromium, from navigating to its last row drawn,
// p50 of 5 loads, beside fetching the same pages of events from the HTTP
// API alone (its floor).
func runBenchDashboard(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("bench dashboard")
	fs.SetOutput(stdout)
	events := fs.Int("events", 10_000, "events of the session")
	loads := fs.Int("loads", 5, "timed page loads, after one to warm up")
	chromium := fs.String("chromium", "", "the Chromium binary (default: $SESSIONLOG_CHROMIUM, else chromium on the PATH)")
	jsProfile := fs.String("js-profile", "", "write the last load's JavaScript CPU profile (.cpuprofile JSON, for the browser's performance panel) to this `file`")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected arguments %q", fs.Args())
	}
	if *events < 1 || *loads < 1 {
		return usageErrorf("--events and --loads must be >= 1")
	}
	res, err := bench.RunDashboard(ctx, bench.DashboardConfig{Events: *events, Loads: *loads, Chromium: *chromium, JSProfile: *jsProfile})
	if err != nil {
		return fmt.Errorf("bench dashboard: %w", err)
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	page, first, api := bench.Quantile(res.Page, 0.5), bench.Quantile(res.First, 0.5), bench.Quantile(res.API, 0.5)
	fmt.Fprintf(stdout, "BENCH name=dashboard-load value=%.0f unit=ms baseline=%.0f ratio=%.2f first_row_ms=%.0f max_ms=%.0f fetch_ms=%.0f draw_ms=%.0f events=%d loads=%d\n",
		ms(page), ms(api), ms(page)/ms(api), ms(first), ms(bench.Quantile(res.Page, 1)), ms(bench.Quantile(res.Fetch, 0.5)), ms(bench.Quantile(res.Draw, 0.5)), res.Events, len(res.Page))
	fmt.Fprintf(stdout, "BENCH name=dashboard-api value=%.0f unit=ms events=%d loads=%d\n", ms(api), res.Events, len(res.API))
	return nil
}
