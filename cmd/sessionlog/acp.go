package main

import (
	"context"
	"io"
	"net/url"
	"os"

	"github.com/sessionlog/sessionlog/internal/acpagent"
)

// runACP is sessionlog acp: the Agent Client Protocol agent of
// internal/acpagent on stdio, for an editor (DESIGN.md section 15,
// docs/acp.md).
func runACP(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("acp")
	base := fs.String("http-url", acpagent.DefaultHTTPURL, "the projector's HTTP API (sessionlog up's --http-listen, or a projector's)")
	token := fs.String("http-token", "", "the projector's bearer token, when it requires one (--http-token there)")
	page := fs.Int("page-size", acpagent.DefaultPageSize, "sessions per session/list page (1 to 1000)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("acp takes no arguments: an editor runs it and speaks ACP on its stdin and stdout")
	}
	if *page < 1 || *page > 1000 {
		return usageErrorf("--page-size must be from 1 to 1000")
	}
	u, err := url.Parse(*base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageErrorf("--http-url must be an http(s) URL, got %q", *base)
	}
	log, err := newLogger(fs, stderr)
	if err != nil {
		return err
	}
	return acpagent.Serve(ctx, acpagent.Config{BaseURL: *base, Token: *token, PageSize: *page, Logger: log}, os.Stdin, stdout)
}
