package store

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// filesHolding lists the files under dir that contain needle.
func filesHolding(t *testing.T, dir string, needle []byte) []string {
	t.Helper()
	var hits []string
	if err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err == nil && bytes.Contains(b, needle) {
			hits = append(hits, filepath.Base(path))
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return hits
}

// TestScrubLeavesNoCopy: values deleted and scrubbed are in no file of
// the store, neither in an SSTable written before the delete nor in a WAL,
// while the open store goes on (the other session's value is still
// there, so the search can find what it looks for). Without Scrub the
// old SSTable keeps the values.
func TestScrubLeavesNoCopy(t *testing.T) {
	for _, scrub := range []bool{true, false} {
		t.Run(fmt.Sprintf("scrub=%v", scrub), func(t *testing.T) {
			dir := t.TempDir()
			d, err := Open(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			r := make([]byte, 64)
			rand.Read(r)
			gone, kept := hex.EncodeToString(r[:32]), hex.EncodeToString(r[32:])
			b := d.NewBatch()
			for i := 0; i < 100; i++ {
				b.Set(EventKey("erased", uint64(i)), nil, []byte(fmt.Sprintf("%d %s", i, gone)))
				b.Set(EventKey("kept", uint64(i)), nil, []byte(fmt.Sprintf("%d %s", i, kept)))
			}
			b.Set(SummaryKey("erased"), nil, []byte(gone))
			if err := b.Commit(Checkpoint{Version: "t"}); err != nil {
				t.Fatal(err)
			}
			// In an SSTable, as after a restart.
			if err := d.Pebble().Flush(); err != nil {
				t.Fatal(err)
			}
			if hits := filesHolding(t, dir, []byte(gone)); len(hits) == 0 {
				t.Fatal("the value is in no file before the delete")
			}
			b = d.NewBatch()
			var ranges [][2][]byte
			for i := 0; i < 100; i++ {
				b.Delete(EventKey("erased", uint64(i)), []byte(fmt.Sprintf("%d %s", i, gone)))
			}
			b.Delete(SummaryKey("erased"), []byte(gone))
			for _, k := range b.Keys() {
				ranges = append(ranges, [2][]byte{k, append(bytes.Clone(k), 0)})
			}
			if err := b.Commit(Checkpoint{Version: "t"}); err != nil {
				t.Fatal(err)
			}
			if scrub {
				if err := d.Scrub(ranges); err != nil {
					t.Fatal(err)
				}
			}
			sum, _, err := d.Scan()
			if err != nil || sum != d.Checksum() {
				t.Fatalf("checksum %x, scan %x, %v", d.Checksum(), sum, err)
			}
			if v, ok, err := d.Get(EventKey("kept", 7)); err != nil || !ok || !bytes.Contains(v, []byte(kept)) {
				t.Fatalf("kept value: %q %v %v", v, ok, err)
			}
			// Closed: Pebble deletes obsolete files in the background and a
			// close waits for it.
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			hits := filesHolding(t, dir, []byte(gone))
			if scrub && len(hits) > 0 {
				t.Fatalf("deleted values still in %v", hits)
			}
			if !scrub && len(hits) == 0 {
				t.Fatal("without a scrub the deleted values are gone too: the test proves nothing")
			}
			if len(filesHolding(t, dir, []byte(kept))) == 0 {
				t.Fatal("the kept values are in no file")
			}
		})
	}
}
