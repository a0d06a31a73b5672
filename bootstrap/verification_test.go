package bootstrap

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/fx"
)

// A data directory that cannot be made stops the start with one line naming
// RUSHGATE_DATA_DIR, not the local store's own words alone.
func TestDataDir_UnusableStopsTheStartNamingIt(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Storage.DataDir = filepath.Join(file, "uploads") // under a file: no directory can be made

	app := fx.New(Modules(cfg), fx.NopLogger, fx.Replace(Console{Writer: io.Discard}),
		fx.Decorate(func(*slog.Logger) *slog.Logger { return slog.New(slog.DiscardHandler) }))

	err := RootCause(app.Err())
	if err == nil || !strings.HasPrefix(err.Error(), "RUSHGATE_DATA_DIR: ") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("want one line naming RUSHGATE_DATA_DIR, got %q", err)
	}
}
