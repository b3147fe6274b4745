package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/sre"
)

// partitionsFlag is --partitions of up and every service command: the
// store's partition count (DESIGN.md section 11). A process started with
// another count than the store recorded refuses to start.
func partitionsFlag(fs *flag.FlagSet) *int {
	return fs.Int("partitions", 1, "session streams the store holds (recorded when first provisioned; another count than the store's refuses to start)")
}

func checkPartitions(p int) error {
	if p < 1 || p > logstore.MaxPartitions {
		return usageErrorf("--partitions %d: want 1 to %d", p, logstore.MaxPartitions)
	}
	return nil
}

// runLocate prints where a session lives in the store: its stream and
// subject, by the partition count the store recorded. A session with no
// events is not found (exit 1).
func runLocate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, nf := sreFlags("locate", stderr)
	asJSON := fs.Bool("json", false, "print JSON (sessionId, stream, subject, partition, partitions) instead of a line")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	id, err := oneID(fs, "locate")
	if err != nil {
		return err
	}
	c, err := openSRE(ctx, "locate", fs, nf, stderr)
	if err != nil {
		return err
	}
	defer c.close()
	loc, err := c.store.Locate(id)
	if err != nil {
		return err
	}
	tail, err := c.store.Tail(c.ctx, id)
	if err != nil {
		return err
	}
	if !tail.Exists() {
		// A subject printed for a session that is not there reads as a
		// place to look: say it is missing, and where it would be.
		return fmt.Errorf("%w (it would be stream %s subject %s)", sre.Missing(c.ctx, c.store, id), loc.Stream, loc.Subject)
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(struct {
			SessionID  string `json:"sessionId"`
			Stream     string `json:"stream"`
			Subject    string `json:"subject"`
			Partition  int    `json:"partition"`
			Partitions int    `json:"partitions"`
		}{id, loc.Stream, loc.Subject, loc.Partition, c.store.Layout().Partitions()})
	}
	_, err = fmt.Fprintf(stdout, "stream %s subject %s partition %d of %d\n", loc.Stream, loc.Subject, loc.Partition, c.store.Layout().Partitions())
	return err
}
