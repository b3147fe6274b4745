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
			// Every value its own random text: one text repeated in 100
			// values lets the block compressor write its later copies,
			// and even parts of its first, as references, which a search
			// of the files' bytes does not find.
			random := func() string {
				r := make([]byte, 32)
				rand.Read(r)
				return hex.EncodeToString(r)
			}
			var goneVals, keptVals [100]string
			b := d.NewBatch()
			for i := range goneVals {
				goneVals[i], keptVals[i] = random(), random()
				b.Set(EventKey("erased", uint64(i)), nil, []byte(goneVals[i]))
				b.Set(EventKey("kept", uint64(i)), nil, []byte(keptVals[i]))
			}
			gone, kept := random(), keptVals[7]
			b.Set(SummaryKey("erased"), nil, []byte(gone))
			if err := b.Commit(Checkpoint{Version: "t"}); err != nil {
				t.Fatal(err)
			}
			// In an SSTable, as after a restart.
			if err := d.db.Flush(); err != nil {
				t.Fatal(err)
			}
			if hits := filesHolding(t, dir, []byte(gone)); len(hits) == 0 {
				t.Fatal("the value is in no file before the delete")
			}
			b = d.NewBatch()
			var ranges [][2][]byte
			for i := range goneVals {
				b.Delete(EventKey("erased", uint64(i)), []byte(goneVals[i]))
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
			for _, v := range goneVals {
				hits = append(hits, filesHolding(t, dir, []byte(v))...)
			}
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
