package main

import (
	"context"
	"io"
	"net/url"

	"github.com/sessionlog/sessionlog/internal/sre"
)

// `sessionlog verify`: check every stored session.

func runVerify(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs, nf := sreFlags("verify", stderr)
	only := fs.String("session", "", "verify only this session")
	asJSON := fs.Bool("json", false, "print problems as JSON lines")
	base := fs.String("http-url", "", "also hold the log to what the projector at this URL shows (sessionlog up's --http-listen, or a projector's): a session it shows with more events than the log holds, or that the log no longer holds, is a problem of kind lost (events gone from the log after they were folded, which the hash chain cannot see when a session's last events or all of it went)")
	ackLost := fs.Bool("ack-lost", false, "after the check, acknowledge every loss kept in SESSION_LOST (what nats-server said it lost of a stream when it recovered its files, which it forgets when it restarts): the projector and verify no longer report it; prints an ACKED line each")
	token := fs.String("http-token", "", "the projector's bearer token, when it requires one (a tenant's sees only that tenant's sessions)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("verify takes no arguments (use --session)")
	}
	if *base != "" {
		if u, err := url.Parse(*base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usageErrorf("--http-url must be an http(s) URL, got %q", *base)
		}
	}
	c, err := openSRE(ctx, "verify", fs, nf, stderr)
	if err != nil {
		return err
	}
	defer c.close()
	defer func() { err = c.explain(err) }()
	ctx = c.ctx
	err = sre.Verify(ctx, c.store, *only, *asJSON, *base, *token, stdout, stderr)
	if *ackLost {
		if aerr := sre.AckLost(ctx, c.store, *asJSON, stdout); aerr != nil {
			return aerr
		}
	}
	return err
}
