package contract_test

import (
	"log/slog"
	"os"
	"testing"

	"github.com/gin-gonic/gin"

	rgredis "github.com/rushgate/rushgate/adapters/redis"
)

// TestMain keeps the output to the failures: gin's route listing is for development, and
// go-redis's own lines (failed dials, which the dead-Redis cases cause on purpose) also come
// back as errors the tests check, so they go to a logger that drops go-redis's debug level.
func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	rgredis.RouteClientLogs(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	os.Exit(m.Run())
}
