package porttest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rushgate/rushgate/domain/commerce/catalog"
	"github.com/rushgate/rushgate/domain/commerce/order"
	"github.com/rushgate/rushgate/domain/outbox"
	"github.com/rushgate/rushgate/ports"
)

// TestPaymentRepositories checks what a payment writes beyond Commerce I's ports:
// ports.StockRepository (Deduct applies only at the read version and while the stock covers it,
// and of concurrent deductions at one version one applies; movements round-trip oldest first),
// OrderRepository.MarkPaid (once; a second is order.ErrNotPayable), MarkCancelled (only a
// PENDING order, once; of a racing MarkPaid and MarkCancelled one wins), GetForUpdate (the
// status as committed, also after the transaction read other rows), TopSelling (exactly the
// aggregate of the orders paid since a time, from any time, also under concurrent payments) and
// ports.OutboxRepository (messages round-trip; a claim takes due PENDING messages, oldest first,
// and leases them; concurrent claims never take one message twice; Record needs the claim's
// token; Retry turns only a FAILED message PENDING).
func TestPaymentRepositories(t *testing.T, newStores func(t *testing.T) ports.Stores, caps Capabilities) {
	run(t, newStores, caps, []testCase[ports.Stores]{
		{"Stock/DeductAppliesAtTheReadVersionWhileTheStockCovers", testStockDeduct},
		{"Stock/ConcurrentDeductsAtOneVersionApplyOnce", testStockConcurrentDeducts},
		{"Stock/MovementsRoundTripOldestFirst", testStockMovements},
		{"Order/MarkPaidOnce", testOrderMarkPaidOnce},
		{"Order/MarkCancelledOnlyAPendingOrder", testOrderMarkCancelled},
		{"Order/RacingMarkPaidAndMarkCancelledOneWins", testOrderPaidOrCancelled},
		{"Order/GetForUpdateSeesTheCommittedStatus", testOrderGetForUpdateSeesCommitted},
		{"Order/TopSellingIsTheLiveAggregateAroundHours", testTopSellingAroundHours},
		{"Order/ConcurrentPaymentsRollUpEveryLine", testConcurrentPaymentsRollUpEveryLine},
		{"Outbox/AddThenGetRoundTrips", testOutboxRoundTrip},
		{"Outbox/ClaimLeasesUntilItsEnd", testOutboxClaimLeases},
		{"Outbox/ClaimTakesDueMessagesOldestFirst", testOutboxClaimOrder},
		{"Outbox/ConcurrentClaimsNeverShareAMessage", testOutboxConcurrentClaims},
		{"Outbox/RecordNeedsTheClaimsToken", testOutboxRecordNeedsToken},
		{"Outbox/RetryTurnsOnlyFailedPending", testOutboxRetry},
	})
}

func testStockDeduct(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	p := createProduct(t, e.impl, 100, 5)
	_, st, err := e.impl.Products.Get(ctx, p.ID())
	must(t, err, "get")
	expectIs(t, e.impl.Stock.Deduct(ctx, p.ID(), st.Version()+1, 1), ports.ErrVersionConflict, "a stale version")
	expectIs(t, e.impl.Stock.Deduct(ctx, p.ID(), st.Version(), 6), ports.ErrVersionConflict, "more than the stock")
	must(t, e.impl.Stock.Deduct(ctx, p.ID(), st.Version(), 5), "deduct all")
	_, after, err := e.impl.Products.Get(ctx, p.ID())
	must(t, err, "get after")
	expectEqual(t, after.Quantity(), int64(0), "quantity")
	expectEqual(t, after.Version(), st.Version()+1, "version")
	expectIs(t, e.impl.Stock.Deduct(ctx, p.ID(), after.Version(), 1), ports.ErrVersionConflict, "an empty stock")
}

func testStockConcurrentDeducts(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	p := createProduct(t, e.impl, 100, 1000)
	_, st, err := e.impl.Products.Get(ctx, p.ID())
	must(t, err, "get")
	errs := startTogether(20, func(int) error { return e.impl.Stock.Deduct(ctx, p.ID(), st.Version(), 1) })
	expectOneWinner(t, errs, ports.ErrVersionConflict)
	_, after, err := e.impl.Products.Get(ctx, p.ID())
	must(t, err, "get after")
	expectEqual(t, after.Quantity(), int64(999), "quantity")
}

func testStockMovements(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	p := createProduct(t, e.impl, 100, 10)
	at := now()
	second := catalog.Movement{ID: randomID(), ProductID: p.ID(), Type: catalog.MovementOut, Before: 8, After: 5,
		RefType: catalog.RefOrder, RefID: randomID(), CreatedAt: at.Add(time.Second)}
	first := catalog.Movement{ID: randomID(), ProductID: p.ID(), Type: catalog.MovementOut, Before: 10, After: 8,
		RefType: catalog.RefOrder, RefID: randomID(), CreatedAt: at}
	must(t, e.impl.Stock.AddMovements(ctx, second, first), "add movements")
	got, err := e.impl.Stock.Movements(ctx, p.ID())
	must(t, err, "movements")
	if len(got) != 2 || got[0] != first || got[1] != second {
		t.Fatalf("movements %+v, want %+v then %+v", got, first, second)
	}
}

func testOrderMarkPaidOnce(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	o := placeOrder(t, newUserID(), order.Discount{}, createProduct(t, e.impl, 100, 10))
	must(t, e.impl.Orders.Create(ctx, o), "create order")
	errs := startTogether(10, func(int) error { return e.impl.Orders.MarkPaid(ctx, o.ID(), now()) })
	expectOneWinner(t, errs, order.ErrNotPayable)
	got, err := e.impl.Orders.Get(ctx, o.ID())
	must(t, err, "get")
	expectEqual(t, string(got.Status()), "COMPLETED", "status")
	if got.PaidAt() == nil {
		t.Error("paidAt not set")
	}
}

func testOrderMarkCancelled(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	p := createProduct(t, e.impl, 100, 10)
	o := placeOrder(t, newUserID(), order.Discount{}, p)
	must(t, e.impl.Orders.Create(ctx, o), "create order")
	must(t, e.impl.Orders.MarkCancelled(ctx, o.ID()), "cancel")
	got, err := e.impl.Orders.Get(ctx, o.ID())
	must(t, err, "get")
	expectEqual(t, got.Status(), order.StatusCancelled, "status")
	if got.PaidAt() != nil {
		t.Errorf("paidAt %v on a cancelled order", got.PaidAt())
	}
	expectIs(t, e.impl.Orders.MarkCancelled(ctx, o.ID()), order.ErrNotCancellable, "a second MarkCancelled")
	expectIs(t, e.impl.Orders.MarkPaid(ctx, o.ID(), now()), order.ErrNotPayable, "MarkPaid of a cancelled order")

	paid := placeOrder(t, newUserID(), order.Discount{}, p)
	must(t, e.impl.Orders.Create(ctx, paid), "create order")
	must(t, e.impl.Orders.MarkPaid(ctx, paid.ID(), now()), "pay")
	expectIs(t, e.impl.Orders.MarkCancelled(ctx, paid.ID()), order.ErrNotCancellable, "MarkCancelled of a paid order")
	got, err = e.impl.Orders.Get(ctx, paid.ID())
	must(t, err, "get paid")
	expectEqual(t, got.Status(), order.StatusCompleted, "status of the paid order")
	expectIs(t, e.impl.Orders.MarkCancelled(ctx, randomID()), order.ErrNotCancellable, "MarkCancelled of an unknown order")
}

func testOrderPaidOrCancelled(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	o := placeOrder(t, newUserID(), order.Discount{}, createProduct(t, e.impl, 100, 10))
	must(t, e.impl.Orders.Create(ctx, o), "create order")
	errs := startTogether(10, func(i int) error {
		if i%2 == 0 {
			return e.impl.Orders.MarkPaid(ctx, o.ID(), now())
		}
		return e.impl.Orders.MarkCancelled(ctx, o.ID())
	})
	winner := expectOneWinnerOf(t, errs, order.ErrNotPayable, order.ErrNotCancellable)
	got, err := e.impl.Orders.Get(ctx, o.ID())
	must(t, err, "get")
	want := order.StatusCancelled
	if winner%2 == 0 {
		want = order.StatusCompleted
	}
	expectEqual(t, got.Status(), want, "status")
}

// expectOneWinnerOf checks that exactly one of errs is nil and every other is one of lost,
// and returns the winner's index.
func expectOneWinnerOf(t *testing.T, errs []error, lost ...error) int {
	t.Helper()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("calls %d and %d both succeeded", winner, i)
		case err == nil:
			winner = i
		case !slices.ContainsFunc(lost, func(l error) bool { return errors.Is(err, l) }):
			t.Fatalf("call %d: %v, want one of %v", i, err, lost)
		}
	}
	if winner < 0 {
		t.Fatal("no call succeeded")
	}
	return winner
}

// A transaction that read one order and then locks another sees the second's status as
// committed after its first read: a plain read on MySQL would return the snapshot of the first.
func testOrderGetForUpdateSeesCommitted(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	p := createProduct(t, e.impl, 100, 10)
	first, second := placeOrder(t, newUserID(), order.Discount{}, p), placeOrder(t, newUserID(), order.Discount{}, p)
	must(t, e.impl.Orders.Create(ctx, first), "create first")
	must(t, e.impl.Orders.Create(ctx, second), "create second")
	must(t, e.impl.Tx.InTx(ctx, func(ctx context.Context) error {
		if _, err := e.impl.Orders.GetForUpdate(ctx, first.ID()); err != nil {
			return err
		}
		if _, err := e.impl.Orders.Get(ctx, second.ID()); err != nil {
			return err
		}
		// Another transaction cancels the second order meanwhile.
		if err := e.impl.Orders.MarkCancelled(context.Background(), second.ID()); err != nil {
			return err
		}
		locked, err := e.impl.Orders.GetForUpdate(ctx, second.ID())
		if err != nil {
			return err
		}
		expectEqual(t, locked.Status(), order.StatusCancelled, "status read under the lock")
		return nil
	}), "transaction")
}

func newMessage(at time.Time) outbox.Message {
	return outbox.New(randomID(), []byte(`{"k":"`+randomID()+`"}`), at)
}

func testOutboxRoundTrip(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	m, untraced := newMessage(now()), newMessage(now())
	m.Origin = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	must(t, e.impl.Outbox.Add(ctx, m, untraced), "add")
	got, err := e.impl.Outbox.Get(ctx, m.ID)
	must(t, err, "get")
	if got.ID != m.ID || string(got.Payload) != string(m.Payload) || got.Status != outbox.Pending ||
		!got.NextAttemptAt.Equal(m.NextAttemptAt) || !got.CreatedAt.Equal(m.CreatedAt) || got.SentAt != nil ||
		got.Origin != m.Origin {
		t.Fatalf("got %+v, want %+v", got, m)
	}
	claimed, _ := claimOne(t, e, m, m.CreatedAt)
	expectEqual(t, claimed.Origin, m.Origin, "a claimed message's origin")
	got, err = e.impl.Outbox.Get(ctx, untraced.ID)
	must(t, err, "get")
	expectEqual(t, got.Origin, "", "an untraced message's origin")
	_, err = e.impl.Outbox.Get(ctx, randomID())
	expectIs(t, err, outbox.ErrNotFound, "an unknown message")
}

// claimOne claims message m, due at at, alone for a minute, and answers it with the claim's token.
func claimOne(t *testing.T, e env[ports.Stores], m outbox.Message, at time.Time) (outbox.Message, string) {
	t.Helper()
	token := randomID()
	got, err := e.impl.Outbox.Claim(context.Background(), ports.OutboxClaim{Token: token, Now: at, Until: at.Add(time.Minute), Limit: 1, ID: m.ID})
	must(t, err, "claim")
	expectEqual(t, len(got), 1, "claimed")
	return got[0], token
}

func testOutboxClaimLeases(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	at := now()
	m := newMessage(at)
	must(t, e.impl.Outbox.Add(ctx, m), "add")
	claimOne(t, e, m, at)
	again, err := e.impl.Outbox.Claim(ctx, ports.OutboxClaim{Token: randomID(), Now: at.Add(59 * time.Second),
		Until: at.Add(2 * time.Minute), Limit: 1, ID: m.ID})
	must(t, err, "claim during the lease")
	expectEqual(t, len(again), 0, "claimed during the lease")
	after, err := e.impl.Outbox.Claim(ctx, ports.OutboxClaim{Token: randomID(), Now: at.Add(time.Minute),
		Until: at.Add(2 * time.Minute), Limit: 1, ID: m.ID})
	must(t, err, "claim after the lease")
	expectEqual(t, len(after), 1, "claimed after the lease")
}

// emptyStores returns stores on storage of their own, or skips the case.
func emptyStores(t *testing.T, e env[ports.Stores]) ports.Stores {
	t.Helper()
	if e.caps.NewEmptyStores == nil {
		t.Skip("the backend offers no empty storage (Capabilities.NewEmptyStores)")
	}
	return e.caps.NewEmptyStores(t)
}

func testOutboxClaimOrder(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	stores := emptyStores(t, e)
	at := now()
	messages := make([]outbox.Message, 4)
	for i := range messages {
		messages[i] = newMessage(at.Add(time.Duration(i-len(messages)) * time.Minute))
	}
	messages[1].NextAttemptAt = at.Add(time.Hour) // waiting for a retry: not due
	must(t, stores.Outbox.Add(ctx, messages[2], messages[0], messages[3], messages[1]), "add")
	got, err := stores.Outbox.Claim(ctx, ports.OutboxClaim{Token: randomID(), Now: at, Until: at.Add(time.Minute), Limit: 2})
	must(t, err, "claim")
	var ids []string
	for _, m := range got {
		ids = append(ids, m.ID)
	}
	expectEqual(t, strings.Join(ids, ","), messages[0].ID+","+messages[2].ID, "claimed, oldest due first")
}

func testOutboxConcurrentClaims(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	stores := emptyStores(t, e)
	at := now()
	messages := make([]outbox.Message, 60)
	for i := range messages {
		messages[i] = newMessage(at.Add(time.Duration(i-len(messages)) * time.Millisecond))
	}
	must(t, stores.Outbox.Add(ctx, messages...), "add")
	var (
		mu      sync.Mutex
		claimed = map[string]int{}
	)
	for round := 0; round < 20 && len(claimed) < len(messages); round++ {
		errs := startTogether(6, func(int) error {
			got, err := stores.Outbox.Claim(ctx, ports.OutboxClaim{Token: randomID(), Now: at, Until: at.Add(time.Hour), Limit: 7})
			mu.Lock()
			defer mu.Unlock()
			for _, m := range got {
				claimed[m.ID]++
			}
			return err
		})
		for _, err := range errs {
			must(t, err, "claim")
		}
	}
	for id, n := range claimed {
		if n > 1 {
			t.Fatalf("message %s claimed %d times within its lease", id, n)
		}
	}
	expectEqual(t, len(claimed), len(messages), "messages claimed")
}

func testOutboxRecordNeedsToken(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	at := now()
	m := newMessage(at)
	must(t, e.impl.Outbox.Add(ctx, m), "add")
	sent, token := claimOne(t, e, m, at)
	sent.MarkSent(at)
	ok, err := e.impl.Outbox.Record(ctx, sent, randomID())
	must(t, err, "record with another token")
	expectEqual(t, ok, false, "recorded with another token")
	ok, err = e.impl.Outbox.Record(ctx, sent, token)
	must(t, err, "record")
	expectEqual(t, ok, true, "recorded")
	stored, err := e.impl.Outbox.Get(ctx, m.ID)
	must(t, err, "get")
	expectEqual(t, stored.Status, outbox.Sent, "status")
	ok, err = e.impl.Outbox.Record(ctx, sent, token)
	must(t, err, "record again")
	expectEqual(t, ok, false, "recorded a SENT message again")
}

func testOutboxRetry(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	at := now()
	m := newMessage(at)
	must(t, e.impl.Outbox.Add(ctx, m), "add")
	expectIs(t, e.impl.Outbox.Retry(ctx, m.ID, at), outbox.ErrNotFailed, "retry of a PENDING message")
	expectIs(t, e.impl.Outbox.Retry(ctx, randomID(), at), outbox.ErrNotFound, "retry of an unknown message")
	failed, token := claimOne(t, e, m, at)
	failed.MarkFailed("boom", at, outbox.Schedule{})
	_, err := e.impl.Outbox.Record(ctx, failed, token)
	must(t, err, "record")
	must(t, e.impl.Outbox.Retry(ctx, m.ID, at.Add(time.Hour)), "retry")
	stored, err := e.impl.Outbox.Get(ctx, m.ID)
	must(t, err, "get")
	if stored.Status != outbox.Pending || stored.Attempts != 0 || !stored.NextAttemptAt.Equal(at.Add(time.Hour)) || stored.LastError != "boom" {
		t.Fatalf("after retry: %+v", stored)
	}
}
