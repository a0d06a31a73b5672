package ranking_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/adapters/memory/memorytest"
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
			stores := memorytest.New().Stores
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

// countingOrders counts the ranking's reads and holds each until released.
type countingOrders struct {
	ports.OrderRepository
	reads   atomic.Int32
	release chan struct{}
}

func (c *countingOrders) TopSelling(ctx context.Context, since time.Time, limit int) ([]order.Sales, error) {
	c.reads.Add(1)
	<-c.release
	return []order.Sales{{ProductID: "p", Name: "n", Units: 3, Revenue: 30}}, nil
}

// TestTopProducts_ConcurrentCallersShareOneRead: callers arriving while a read runs wait for it
// and get its answer; one within FreshFor of it too; one after FreshFor reads again.
func TestTopProducts_ConcurrentCallersShareOneRead(t *testing.T) {
	synctest.Test(t, testConcurrentCallersShareOneRead)
}

func testConcurrentCallersShareOneRead(t *testing.T) {
	clock := memory.NewClock(time.Now())
	orders := &countingOrders{release: make(chan struct{})}
	s := ranking.NewService(ranking.Deps{Orders: orders, Clock: clock}, ranking.Config{FreshFor: time.Second})
	var wg sync.WaitGroup
	answers := make([]ranking.Top, 50)
	for i := range answers {
		wg.Go(func() { answers[i] = s.TopProducts(context.Background()) })
	}
	// The read is held until every caller is blocked on it or on its answer, so none can be
	// served from the cache afterwards: a service that did not share the read in flight would
	// read once per caller.
	synctest.Wait()
	close(orders.release)
	wg.Wait()
	for i, a := range answers {
		if len(a.Products) != 1 || a.Products[0].SalesCount != 3 || a.Products[0].Rank != 1 {
			t.Fatalf("caller %d: %+v", i, a)
		}
	}
	first := orders.reads.Load()
	s.TopProducts(context.Background())
	if orders.reads.Load() != first {
		t.Fatal("a caller within FreshFor read again")
	}
	clock.Advance(time.Second)
	s.TopProducts(context.Background())
	if orders.reads.Load() != first+1 {
		t.Fatal("a caller after FreshFor did not read")
	}
	if first != 1 {
		t.Fatalf("%d reads for 50 concurrent callers", first)
	}
}

// TestTopProducts_AClockSteppedBackReadsAgain: a read stamped after now (the wall clock was
// stepped back, as NTP may) is not fresh, or it would be served for as long as the step.
func TestTopProducts_AClockSteppedBackReadsAgain(t *testing.T) {
	clock := memory.NewClock(time.Now())
	orders := &countingOrders{release: make(chan struct{})}
	close(orders.release)
	s := ranking.NewService(ranking.Deps{Orders: orders, Clock: clock}, ranking.Config{FreshFor: time.Second})
	s.TopProducts(context.Background())
	clock.Advance(-time.Hour)
	s.TopProducts(context.Background())
	if reads := orders.reads.Load(); reads != 2 {
		t.Fatalf("%d reads; want the one after the step back to read again", reads)
	}
}

// panickingOrders panics on the ranking's first read, as a driver bug would, then answers.
type panickingOrders struct {
	ports.OrderRepository
	reads atomic.Int32
}

func (p *panickingOrders) TopSelling(context.Context, time.Time, int) ([]order.Sales, error) {
	if p.reads.Add(1) == 1 {
		panic("driver bug")
	}
	return []order.Sales{{ProductID: "p", Name: "n", Units: 3, Revenue: 30}}, nil
}

// TestTopProducts_AReadThatPanicsFailsLikeAnyOther: it answers an empty list and logs, and the
// next caller reads again instead of waiting for a read that never ends.
func TestTopProducts_AReadThatPanicsFailsLikeAnyOther(t *testing.T) {
	var logs bytes.Buffer
	orders := &panickingOrders{}
	s := ranking.NewService(ranking.Deps{Orders: orders, Clock: memory.NewClock(time.Now()),
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))}, ranking.Config{FreshFor: time.Second})
	if top := s.TopProducts(context.Background()); top.Products == nil || len(top.Products) != 0 {
		t.Fatalf("the read that panicked answered %+v", top)
	}
	if !strings.Contains(logs.String(), `"level":"ERROR"`) || !strings.Contains(logs.String(), "driver bug") {
		t.Fatalf("logs: %s", logs.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if top := s.TopProducts(ctx); len(top.Products) != 1 || orders.reads.Load() != 2 {
		t.Fatalf("the next caller got %+v after %d reads; want it to read again", top, orders.reads.Load())
	}
}
