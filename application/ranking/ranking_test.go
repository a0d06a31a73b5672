package ranking_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/application/ranking"
	"github.com/rushgate/rushgate/domain/commerce/order"
	"github.com/rushgate/rushgate/ports"
)

// failingOrders fails the ranking's read, as a database that is down or too slow does.
type failingOrders struct {
	ports.OrderRepository
	err error
}

func (f failingOrders) TopSelling(ctx context.Context, _ time.Time, _ int) ([]order.Sales, error) {
	if f.err == nil {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return nil, f.err
}

// TestTopProducts_AFailedOrSlowReadAnswersAnEmptyListAndLogs: a read error, and a read that
// outlasts the timeout, answer {period: 3days, products: []} within the timeout and log at error
// level.
func TestTopProducts_AFailedOrSlowReadAnswersAnEmptyListAndLogs(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{{"error", errors.New("connection refused")}, {"timeout", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			stores := memory.NewStores(memory.NewDatabase())
			s := ranking.NewService(ranking.Deps{Orders: failingOrders{stores.Orders, tc.err}, Clock: memory.NewClock(time.Now()),
				Logger: slog.New(slog.NewJSONHandler(&logs, nil))}, ranking.Config{Timeout: 50 * time.Millisecond})
			start := time.Now()
			top := s.TopProducts(context.Background())
			if top.Period != "3days" || top.Products == nil || len(top.Products) != 0 || time.Since(start) > 5*time.Second {
				t.Fatalf("top %+v after %v", top, time.Since(start))
			}
			if !strings.Contains(logs.String(), `"level":"ERROR"`) || !strings.Contains(logs.String(), "popular products") {
				t.Fatalf("logs: %s", logs.String())
			}
		})
	}
}
