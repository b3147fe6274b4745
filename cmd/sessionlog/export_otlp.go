package main

// `sessionlog export --to otlp --endpoint URL [--session ID]` sends every
// ended turn of the sessions as an OpenTelemetry trace (DESIGN.md section
// 15, package otelexport). Ids are derived from the events, so running it
// again sends the same spans, with the same ids.

func checkExportOTLP(to, endpoint string) error {
	switch {
	case to == "" && endpoint != "":
		return usageErrorf("--endpoint goes with --to otlp")
	case to == "otlp" && endpoint == "":
		return usageErrorf("--to otlp needs --endpoint (the OTLP/HTTP collector, http://host:4318)")
	}
	return nil
}
