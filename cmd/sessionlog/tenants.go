package main

import (
	"context"
	"io"

	"github.com/sessionlog/sessionlog/internal/sre"
)

func runTenants(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, nf := sreFlags("tenants", stderr)
	asJSON := fs.Bool("json", false, "print JSON lines instead of a table (the limits first, as {\"limits\":...})")
	recount := fs.Bool("recount", false, "first set each tenant's counted sessions and bytes in TENANT_USAGE to what the streams hold (sessions stored before it was kept, a bucket deleted or emptied); the writers' counts meanwhile are kept; refused while another recount runs")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("tenants takes no arguments")
	}
	c, err := openSRE(ctx, "tenants", fs, nf, stderr)
	if err != nil {
		return err
	}
	defer c.close()
	return sre.Tenants(c.ctx, c.store, *asJSON, *recount, stdout, stderr)
}
