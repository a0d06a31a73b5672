package dataplatform_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/rushgate/rushgate/adapters/dataplatform"
)

// TestLogged_PayloadOnlyAtDebug: the stand-in platform accepts every message and writes its
// payload only when debug logging is on.
func TestLogged_PayloadOnlyAtDebug(t *testing.T) {
	payload := []byte(`{"orderId":"o-1","userId":"u-7","totalAmount":1200}`)
	for _, tc := range []struct {
		level  slog.Level
		logged bool
	}{{slog.LevelInfo, false}, {slog.LevelDebug, true}} {
		t.Run(tc.level.String(), func(t *testing.T) {
			var out bytes.Buffer
			platform := dataplatform.Logged{Logger: slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: tc.level}))}
			if err := platform.Send(context.Background(), "m-1", payload); err != nil {
				t.Fatalf("Send: %v", err)
			}
			if got := strings.Contains(out.String(), "u-7") && strings.Contains(out.String(), "m-1"); got != tc.logged {
				t.Fatalf("at %v the payload logged = %v, want %v: %q", tc.level, got, tc.logged, out.String())
			}
		})
	}
}
