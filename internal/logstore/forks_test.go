package logstore_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
)

// The fork bucket: a record is created once, read with its revision,
// replaced only at that revision, listed, and dropped; a store opened with
// NoProvision finds the bucket another one provisioned.
func TestForkRecords(t *testing.T) {
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	ctx := context.Background()
	recs, err := open(t, nc, logstore.Config{}).OpenForkRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := recs.Get(ctx, "c1"); ok || err != nil {
		t.Fatalf("Get of no record: ok %v, %v", ok, err)
	}
	if err := recs.Create(ctx, "c1", []byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := recs.Create(ctx, "c1", []byte("b")); !errors.Is(err, logstore.ErrForkRecordExists) {
		t.Fatalf("second Create: %v, want ErrForkRecordExists", err)
	}
	rec, ok, err := recs.Get(ctx, "c1")
	if err != nil || !ok || string(rec.Value) != "a" || rec.Revision == 0 {
		t.Fatalf("Get = %+v %v %v", rec, ok, err)
	}
	if err := recs.Replace(ctx, "c1", []byte("c"), rec.Revision); err != nil {
		t.Fatal(err)
	}
	if err := recs.Replace(ctx, "c1", []byte("d"), rec.Revision); err == nil {
		t.Fatal("Replace at an old revision succeeded")
	}
	if err := recs.Put(ctx, "c2", []byte("e")); err != nil {
		t.Fatal(err)
	}
	kids, err := recs.Children(ctx)
	slices.Sort(kids)
	if err != nil || !slices.Equal(kids, []string{"c1", "c2"}) {
		t.Fatalf("Children = %v, %v", kids, err)
	}
	if err := recs.Drop(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := recs.Get(ctx, "c1"); ok || err != nil {
		t.Fatalf("Get after Drop: ok %v, %v", ok, err)
	}
	// Dropped, the child id can be created again.
	if err := recs.Create(ctx, "c1", []byte("f")); err != nil {
		t.Fatal(err)
	}
	// A store that may not provision opens the bucket that exists.
	other, err := open(t, nc, logstore.Config{NoProvision: true}).OpenForkRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rec, ok, err := other.Get(ctx, "c2"); err != nil || !ok || string(rec.Value) != "e" {
		t.Fatalf("NoProvision Get = %+v %v %v", rec, ok, err)
	}
}
