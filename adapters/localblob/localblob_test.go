package localblob_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rushgate/rushgate/adapters/localblob"
	"github.com/rushgate/rushgate/domain"
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

// dotKeys each have a segment starting with a dot: not only "..", which would climb out of the
// data directory, but any hidden name, such as the directory uploads are received in.
var dotKeys = []string{".hidden", ".incoming/upload-1", "uploads/.u/a.png", "uploads/u/.a.png", "..", "uploads/../a.png", "."}

func TestPresignPut_RefusesAKeyWithASegmentStartingWithADot(t *testing.T) {
	t.Parallel()
	store := newFixture(t, t.TempDir()).store
	for _, key := range dotKeys {
		_, err := store.PresignPut(context.Background(), ports.UploadGrant{Key: key, ContentType: "image/png", ContentLength: 4, Expiry: time.Minute})
		if !errors.Is(err, domain.ErrValidation) {
			t.Errorf("sign %q: %v, want VALIDATION_FAILED", key, err)
		}
	}
	if _, err := store.PresignPut(context.Background(), ports.UploadGrant{Key: "uploads/u/a.b.png", ContentType: "image/png",
		ContentLength: 4, Expiry: time.Minute}); err != nil {
		t.Errorf("a dot inside a segment: %v", err)
	}
}

// The upload route refuses such a key before it looks at the signature, and writes nothing.
func TestReceive_RefusesAKeyWithASegmentStartingWithADot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	store := newFixture(t, dir).store
	body := []byte("\x89PNG")
	signed, err := store.PresignPut(context.Background(), ports.UploadGrant{Key: "uploads/u/a.png", ContentType: "image/png",
		ContentLength: int64(len(body)), Expiry: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(signed.URL)
	if err != nil {
		t.Fatal(err)
	}
	upload := func(key string) error {
		return store.Receive(localblob.Upload{Key: key, ContentType: "image/png", ContentLength: int64(len(body)),
			Expires: u.Query().Get("expires"), Signature: u.Query().Get("signature"), Body: bytes.NewReader(body)})
	}
	for _, key := range dotKeys {
		if err := upload(key); !errors.Is(err, domain.ErrValidation) {
			t.Errorf("upload to %q: %v, want VALIDATION_FAILED", key, err)
		}
	}
	var files []string
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, path)
		}
		return err
	})
	if err != nil || len(files) != 0 {
		t.Fatalf("refused uploads left %v (%v)", files, err)
	}

	// The URL's own key is stored and read back.
	if err := upload("uploads/u/a.png"); err != nil {
		t.Fatalf("the signed upload: %v", err)
	}
	if size, err := store.Stat(context.Background(), "uploads/u/a.png"); err != nil || size != int64(len(body)) {
		t.Fatalf("stat: %d, %v", size, err)
	}
	if head, err := store.ReadHead(context.Background(), "uploads/u/a.png", 16); err != nil || !bytes.Equal(head, body) {
		t.Fatalf("head: %q, %v", head, err)
	}
}
