// Package web holds the projector's dashboard: one HTML page with its
// script and styles inline, embedded in the binary, so running it needs no
// build step. It reads the projector's HTTP API and follows a session
// live through its watch stream. assets/ holds the files it loads besides:
// uPlot 1.6.32 (MIT, its licence beside it), the charts of the fleet
// overview, vendored as published on npm so no network is needed.
package web

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed index.html
var index []byte

//go:embed assets
var assets embed.FS

// csp lets the page run its inline script and the vendored assets, and
// talk to its own origin only.
const csp = "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// Handler serves the dashboard page.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Content-Security-Policy", csp)
		w.Write(index)
	})
}

// Assets serves /assets/: the vendored files the page loads.
func Assets() http.Handler {
	sub, _ := fs.Sub(assets, ".")
	fsrv := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "public, max-age=86400")
		fsrv.ServeHTTP(w, r)
	})
}
