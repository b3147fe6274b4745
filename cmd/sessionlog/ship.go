package main

import (
	"context"
	"io"
	"os"

	"github.com/sessionlog/sessionlog/internal/ship"
)

// ship --from FORMAT DIR...: follow the directories an agent writes its
// session files to, and append each complete new line's events as it
// comes (DESIGN.md section 13; internal/ship).

func runShip(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs, nf := sreFlags("ship", stderr)
	from := fs.String("from", "", "the agent's format: claude-code, ...")
	hostDefault, _ := os.Hostname()
	host := fs.String("host", hostDefault, "host name in the holder of each file's sessions")
	batch := fs.Int("batch", 500, "events per atomic append (at most 1000)")
	idle := fs.Duration("idle", ship.IdleDefault, "how long a file no process holds open may go unwritten while its agent counts as alive: "+
		"until then ship renews its sessions' leases, after that it lets them lapse and the repairer closes what the agent left open")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *idle < 0 {
		return usageErrorf("--idle must not be negative")
	}
	f, err := lookupFormat(*from)
	if err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageErrorf("ship --from %s needs directories to follow", *from)
	}
	v, err := openAgentVerb(ctx, "ship", fs, nf, stderr)
	if err != nil {
		return err
	}
	defer v.close()
	sh := ship.New(v.ctx, ship.Config{Client: v.cl, Format: f, Host: *host, Batch: *batch, Idle: *idle, Stdout: stdout, Stderr: stderr})
	return sh.Follow(fs.Args())
}
