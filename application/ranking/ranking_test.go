package ranking_test

import (
	"context"
	"errors"
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

// TestTopProducts_AFailedOrSlowReadAnswersAnEmptyListAndItsError: a read error, and a read that
// outlasts the timeout, answer {period: 3days, products: []} within the timeout, with the error
// for the caller to log.
func TestTopProducts_AFailedOrSlowReadAnswersAnEmptyListAndItsError(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{{"error", errors.New("connection refused")}, {"timeout", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			stores := memorytest.New().Stores
			s := ranking.NewService(ranking.Deps{Orders: failingOrders{stores.Orders, tc.err}, Clock: memory.NewClock(time.Now())},
				ranking.Config{Timeout: 50 * time.Millisecond})
			start := time.Now()
			top, err := s.TopProducts(context.Background())
			if top.Period != "3days" || top.Products == nil || len(top.Products) != 0 || time.Since(start) > 5*time.Second {
				t.Fatalf("top %+v after %v", top, time.Since(start))
			}
			want := tc.err
			if want == nil {
				want = context.DeadlineExceeded
			}
			if !errors.Is(err, want) {
				t.Fatalf("error %v, want %v", err, want)
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
	errs := make([]error, len(answers))
	for i := range answers {
		wg.Go(func() { answers[i], errs[i] = s.TopProducts(context.Background()) })
	}
	// The read is held until every caller is blocked on it or on its answer, so none can be
	// served from the cache afterwards: a service that did not share the read in flight would
	// read once per caller.
	synctest.Wait()
	close(orders.release)
	wg.Wait()
	for i, a := range answers {
		if errs[i] != nil || len(a.Products) != 1 || a.Products[0].SalesCount != 3 || a.Products[0].Rank != 1 {
			t.Fatalf("caller %d: %+v, %v", i, a, errs[i])
		}
	}
	first := orders.reads.Load()
	if _, err := s.TopProducts(context.Background()); err != nil || orders.reads.Load() != first {
		t.Fatalf("a caller within FreshFor read again (%v)", err)
	}
	clock.Advance(time.Second)
	if _, err := s.TopProducts(context.Background()); err != nil || orders.reads.Load() != first+1 {
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
	if _, err := s.TopProducts(context.Background()); err != nil {
		t.Fatal(err)
	}
	clock.Advance(-time.Hour)
	if _, err := s.TopProducts(context.Background()); err != nil {
		t.Fatal(err)
	}
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

// TestTopProducts_AReadThatPanicsFailsLikeAnyOther: it answers an empty list and the panic as
// its error, and the next caller reads again instead of waiting for a read that never ends.
func TestTopProducts_AReadThatPanicsFailsLikeAnyOther(t *testing.T) {
	orders := &panickingOrders{}
	s := ranking.NewService(ranking.Deps{Orders: orders, Clock: memory.NewClock(time.Now())}, ranking.Config{FreshFor: time.Second})
	top, err := s.TopProducts(context.Background())
	if top.Products == nil || len(top.Products) != 0 {
		t.Fatalf("the read that panicked answered %+v", top)
	}
	if err == nil || !strings.Contains(err.Error(), "driver bug") {
		t.Fatalf("error %v, want the panic", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if top, err := s.TopProducts(ctx); err != nil || len(top.Products) != 1 || orders.reads.Load() != 2 {
		t.Fatalf("the next caller got %+v after %d reads; want it to read again", top, orders.reads.Load())
	}
}
