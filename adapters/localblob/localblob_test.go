package localblob_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rushgate/rushgate/ports"
)

func TestPing_PassesOnAWritableDirectoryAndLeavesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	store := newFixture(t, dir).store

	if err := store.Ping(context.Background()); err != nil {
		t.Fatalf("Ping on a writable directory: %v", err)
	}
	entries, err := os.ReadDir(filepath.Join(dir, ".incoming"))
	if err != nil || len(entries) != 0 {
		t.Fatalf("after Ping the incoming directory holds %v (%v), want nothing", entries, err)
	}
}

// The data directory replaced by a regular file: no file can be created under it, even by
// root, whom a read-only mode would not stop.
func TestPing_FailsUnavailableWhenTheDataDirectoryTakesNoFiles(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	store := newFixture(t, dir).store
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}

	err := store.Ping(context.Background())
	if !errors.Is(err, ports.ErrUnavailable) {
		t.Fatalf("Ping on a data directory that is a file: %v, want ports.ErrUnavailable", err)
	}
}
