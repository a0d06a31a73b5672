package porttest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rushgate/rushgate/domain/commerce/catalog"
	"github.com/rushgate/rushgate/domain/commerce/order"
	"github.com/rushgate/rushgate/ports"
)

// TestCommerceRepositories checks ports.ProductRepository, ports.CartRepository and
// ports.OrderRepository: a product and its stock round-trip and an unknown one is
// catalog.ErrProductNotFound; the cart locks fail outside a transaction; concurrent first
// GetOrCreateForUpdate calls of one user make one cart; a read after the cart's lock sees the
// previous locker's committed writes, so concurrent locked increments lose none; PutItem inserts
// then sets a line's quantity keeping its id and time, and refuses an unknown product; Lines
// joins products and stock in added order; AddCommitted finds the addID of each of the cart's
// latest ports.RecentCartAdds committed locks, none of a rolled-back or older one, and waits for
// the transaction holding or creating the cart to end before it answers, leaving at most an
// empty cart; Clear empties the cart and rolls back with its
// transaction; an order round-trips with its items in order, an unknown one is
// order.ErrNotFound, and one naming an unknown product inserts nothing; UnitsOrdered sums the
// product's units in the user's PENDING and COMPLETED orders only, and read under the cart's
// lock it sees every order committed before, so placements that count there never overbuy.
func TestCommerceRepositories(t *testing.T, newStores func(t *testing.T) ports.Stores, caps Capabilities) {
	run(t, newStores, caps, []testCase[ports.Stores]{
		{"Product/CreateThenGetRoundTrips", testProductCreateThenGet},
		{"Product/UnknownIDIsNotFound", testProductUnknownIsNotFound},
		{"Cart/LocksOutsideTxFail", testCartLocksOutsideTxFail},
		{"Cart/GetForUpdateOfNoCartFindsNone", testCartGetForUpdateOfNone},
		{"Cart/ConcurrentFirstCallsCreateOneCart", testCartConcurrentFirstCalls},
		{"Cart/ConcurrentLockedIncrementsLoseNone", testCartConcurrentLockedIncrements},
		{"Cart/PutItemInsertsThenSetsQuantity", testCartPutItem},
		{"Cart/PutItemOfUnknownProductIsNotFound", testCartPutItemOfUnknownProduct},
		{"Cart/LinesJoinProductsInAddedOrder", testCartLines},
		{"Cart/ClearEmptiesAndRollsBackWithTx", testCartClear},
		{"Cart/AddCommittedFindsTheRecentCommittedAdds", testCartAddCommitted},
		{"Order/CreateThenGetRoundTrips", testOrderCreateThenGet},
		{"Order/UnknownIDIsNotFound", testOrderUnknownIsNotFound},
		{"Order/CreateWithUnknownProductInsertsNothing", testOrderCreateWithUnknownProduct},
		{"Order/UnitsOrderedCountsTheUsersLiveOrders", testOrderUnitsOrdered},
		{"Order/UnitsOrderedUnderTheCartLockSeesEarlierPlacements", testOrderUnitsOrderedUnderTheCartLock},
	})
}

// createProduct stores a new product with a random id, price and stock.
func createProduct(t *testing.T, s ports.Stores, price, stock int64) *catalog.Product {
	t.Helper()
	p, err := catalog.NewProduct(randomID(), "contract product", price, now())
	must(t, err, "new product")
	st, err := catalog.NewStock(p.ID(), stock)
	must(t, err, "new stock")
	must(t, s.Products.Create(context.Background(), p, st), "create product")
	return p
}

// freshCart is a new cart of userID with a random id, for GetOrCreateForUpdate.
func freshCart(t *testing.T, userID string) order.Cart {
	t.Helper()
	cart, err := order.NewCart(randomID(), userID, now())
	must(t, err, "new cart")
	return cart
}

// lockCart is GetOrCreateForUpdate in a transaction of its own, returning the cart.
func lockCart(t *testing.T, s ports.Stores, userID string) order.Cart {
	t.Helper()
	var cart order.Cart
	err := s.Tx.InTx(context.Background(), func(ctx context.Context) error {
		var err error
		cart, err = s.Carts.GetOrCreateForUpdate(ctx, freshCart(t, userID), randomID())
		return err
	})
	must(t, err, "get or create cart")
	return cart
}

// cartItem is a line of quantity units of productID in cart with a random id, added now. The
// contract stores any line it is given: the rules of a cart's lines are the domain's.
func cartItem(cart order.Cart, productID string, quantity int) order.CartItem {
	return cartItemAddedAt(cart, productID, quantity, now())
}

func cartItemAddedAt(cart order.Cart, productID string, quantity int, addedAt time.Time) order.CartItem {
	return order.RebuildCartItem(randomID(), cart.ID(), productID, quantity, addedAt)
}

// orderLine is a cart line of quantity units of p, with stock units on hand, to place orders of.
func orderLine(p *catalog.Product, quantity int, stock int64) order.CartLine {
	return order.CartLine{CartItem: order.RebuildCartItem(randomID(), randomID(), p.ID(), quantity, now()),
		Name: p.Name(), UnitPrice: p.Price(), Stock: stock}
}

func lines(t *testing.T, s ports.Stores, userID string) []order.CartLine {
	t.Helper()
	got, err := s.Carts.Lines(context.Background(), userID)
	must(t, err, "lines")
	return got
}

func testProductCreateThenGet(t *testing.T, e env[ports.Stores]) {
	p := createProduct(t, e.impl, 12345, 67)
	got, stock, err := e.impl.Products.Get(context.Background(), p.ID())
	must(t, err, "get")
	expectEqual(t, got.ID(), p.ID(), "id")
	expectEqual(t, got.Name(), p.Name(), "name")
	expectEqual(t, got.Price(), p.Price(), "price")
	expectEqual(t, got.CreatedAt(), p.CreatedAt(), "createdAt")
	expectEqual(t, stock, catalog.RebuildStock(p.ID(), 67, 0), "stock")
}

func testProductUnknownIsNotFound(t *testing.T, e env[ports.Stores]) {
	_, _, err := e.impl.Products.Get(context.Background(), randomID())
	expectIs(t, err, catalog.ErrProductNotFound, "Get")
}

func testCartLocksOutsideTxFail(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	if _, err := e.impl.Carts.GetOrCreateForUpdate(ctx, freshCart(t, newUserID()), randomID()); err == nil {
		t.Error("GetOrCreateForUpdate outside a transaction succeeded")
	}
	if _, _, err := e.impl.Carts.GetForUpdate(ctx, newUserID()); err == nil {
		t.Error("GetForUpdate outside a transaction succeeded")
	}
}

func testCartGetForUpdateOfNone(t *testing.T, e env[ports.Stores]) {
	err := e.impl.Tx.InTx(context.Background(), func(ctx context.Context) error {
		_, found, err := e.impl.Carts.GetForUpdate(ctx, newUserID())
		expectEqual(t, found, false, "found")
		return err
	})
	must(t, err, "get for update")
	expectEqual(t, len(lines(t, e.impl, newUserID())), 0, "lines of a user without a cart")
}

func testCartConcurrentFirstCalls(t *testing.T, e env[ports.Stores]) {
	const callers = 20
	userID := newUserID()
	ids := make([]string, callers)
	errs := startTogether(callers, func(i int) error {
		return e.impl.Tx.InTx(context.Background(), func(ctx context.Context) error {
			cart, err := e.impl.Carts.GetOrCreateForUpdate(ctx, freshCart(t, userID), randomID())
			ids[i] = cart.ID()
			if err == nil && cart.UserID() != userID {
				t.Errorf("cart of %q, want %q", cart.UserID(), userID)
			}
			return err
		})
	})
	for i, err := range errs {
		must(t, err, "get or create")
		expectEqual(t, ids[i], ids[0], "cart id")
	}
	expectEqual(t, lockCart(t, e.impl, userID).ID(), ids[0], "the cart read later")
}

// testCartConcurrentLockedIncrements runs the add-to-cart transaction from many goroutines: lock
// the cart first, read its lines, write the line's quantity + 1. Only if each read sees the
// previous locker's committed write does the line end at the number of adds.
func testCartConcurrentLockedIncrements(t *testing.T, e env[ports.Stores]) {
	const adds = 30
	userID := newUserID()
	p := createProduct(t, e.impl, 10, 1000)
	errs := startTogether(adds, func(int) error {
		return e.impl.Tx.InTx(context.Background(), func(ctx context.Context) error {
			cart, err := e.impl.Carts.GetOrCreateForUpdate(ctx, freshCart(t, userID), randomID())
			if err != nil {
				return err
			}
			current, err := e.impl.Carts.Lines(ctx, userID)
			if err != nil {
				return err
			}
			quantity := 1
			if len(current) == 1 {
				quantity = current[0].Quantity() + 1
			}
			return e.impl.Carts.PutItem(ctx, cartItem(cart, p.ID(), quantity))
		})
	})
	for _, err := range errs {
		must(t, err, "locked increment")
	}
	got := lines(t, e.impl, userID)
	if len(got) != 1 {
		t.Fatalf("%d lines, want 1", len(got))
	}
	expectEqual(t, got[0].Quantity(), adds, "quantity")
}

func testCartPutItem(t *testing.T, e env[ports.Stores]) {
	userID := newUserID()
	p := createProduct(t, e.impl, 10, 100)
	cart := lockCart(t, e.impl, userID)
	first := cartItem(cart, p.ID(), 2)
	must(t, e.impl.Carts.PutItem(context.Background(), first), "insert")
	again := cartItemAddedAt(cart, p.ID(), 7, first.AddedAt().Add(time.Hour))
	must(t, e.impl.Carts.PutItem(context.Background(), again), "set quantity")

	got := lines(t, e.impl, userID)
	if len(got) != 1 {
		t.Fatalf("%d lines, want 1", len(got))
	}
	want := order.RebuildCartItem(first.ID(), first.CartID(), first.ProductID(), 7, first.AddedAt())
	expectEqual(t, got[0].CartItem, want, "the line keeps its id and time")
}

func testCartPutItemOfUnknownProduct(t *testing.T, e env[ports.Stores]) {
	userID := newUserID()
	cart := lockCart(t, e.impl, userID)
	err := e.impl.Carts.PutItem(context.Background(), cartItem(cart, randomID(), 1))
	expectIs(t, err, catalog.ErrProductNotFound, "PutItem")
	expectEqual(t, len(lines(t, e.impl, userID)), 0, "lines")
}

func testCartLines(t *testing.T, e env[ports.Stores]) {
	userID := newUserID()
	p, q := createProduct(t, e.impl, 500, 3), createProduct(t, e.impl, 20, 40)
	cart := lockCart(t, e.impl, userID)
	later := cartItem(cart, p.ID(), 5)
	earlier := cartItemAddedAt(cart, q.ID(), 2, later.AddedAt().Add(-time.Second))
	must(t, e.impl.Carts.PutItem(context.Background(), later), "put")
	must(t, e.impl.Carts.PutItem(context.Background(), earlier), "put")
	lockCart(t, e.impl, newUserID()) // another user's cart shows nowhere

	got := lines(t, e.impl, userID)
	if len(got) != 2 {
		t.Fatalf("%d lines, want 2", len(got))
	}
	expectEqual(t, got[0], order.CartLine{CartItem: earlier, Name: q.Name(), UnitPrice: 20, Stock: 40}, "first line")
	expectEqual(t, got[1], order.CartLine{CartItem: later, Name: p.Name(), UnitPrice: 500, Stock: 3}, "second line")
}

func testCartClear(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	userID := newUserID()
	p, q := createProduct(t, e.impl, 1, 10), createProduct(t, e.impl, 1, 10)
	cart := lockCart(t, e.impl, userID)
	must(t, e.impl.Carts.PutItem(ctx, cartItem(cart, p.ID(), 1)), "put")
	must(t, e.impl.Carts.PutItem(ctx, cartItem(cart, q.ID(), 1)), "put")

	rollback := errors.New("roll back")
	err := e.impl.Tx.InTx(ctx, func(ctx context.Context) error {
		must(t, e.impl.Carts.Clear(ctx, cart.ID()), "clear")
		if got, err := e.impl.Carts.Lines(ctx, userID); err != nil || len(got) != 0 {
			t.Errorf("lines inside the clearing transaction: %d, %v", len(got), err)
		}
		return rollback
	})
	expectIs(t, err, rollback, "InTx")
	expectEqual(t, len(lines(t, e.impl, userID)), 2, "lines after a rolled-back clear")

	must(t, e.impl.Carts.Clear(ctx, cart.ID()), "clear")
	expectEqual(t, len(lines(t, e.impl, userID)), 0, "lines after clear")
	expectEqual(t, lockCart(t, e.impl, userID).ID(), cart.ID(), "the emptied cart remains")
}

// heldCartWait is how long testCartAddCommitted lets AddCommitted wait for the transaction
// holding or creating the cart before that transaction ends: one that does not wait answers
// within it.
const heldCartWait = 200 * time.Millisecond

func testCartAddCommitted(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	userID := newUserID()
	committed := func(userID, addID string) bool {
		t.Helper()
		ok, err := e.impl.Carts.AddCommitted(ctx, freshCart(t, userID), addID)
		must(t, err, "AddCommitted")
		return ok
	}
	lockAs := func(userID, addID string, fn func(ctx context.Context) error) error {
		return e.impl.Tx.InTx(ctx, func(ctx context.Context) error {
			if _, err := e.impl.Carts.GetOrCreateForUpdate(ctx, freshCart(t, userID), addID); err != nil {
				return err
			}
			return fn(ctx)
		})
	}
	commit := func(context.Context) error { return nil }
	expectEqual(t, committed(userID, randomID()), false, "an add to a user without a cart")
	expectEqual(t, len(lines(t, e.impl, userID)), 0, "lines of the cart AddCommitted may leave")

	first := randomID()
	must(t, lockAs(userID, first, commit), "the first add")
	expectEqual(t, committed(userID, first), true, "the add that created the cart")
	lockCart(t, e.impl, newUserID()) // another user's add changes nothing here

	rollback := errors.New("roll back")
	rolledBack := randomID()
	expectIs(t, lockAs(userID, rolledBack, func(context.Context) error { return rollback }), rollback, "InTx")
	expectEqual(t, committed(userID, rolledBack), false, "a rolled-back add")
	for range ports.RecentCartAdds - 1 {
		must(t, lockAs(userID, randomID(), commit), "a later add")
	}
	expectEqual(t, committed(userID, first), true, "an add with RecentCartAdds-1 adds after it")
	must(t, lockAs(userID, randomID(), commit), "a later add")
	expectEqual(t, committed(userID, first), false, "an add with RecentCartAdds adds after it")

	expectWaits := func(what, userID string, end error) {
		t.Helper()
		addID, read := randomID(), make(chan bool, 1)
		err := lockAs(userID, addID, func(context.Context) error {
			go func() {
				ok, err := e.impl.Carts.AddCommitted(ctx, freshCart(t, userID), addID)
				if err != nil {
					t.Errorf("AddCommitted while a transaction %s: %v", what, err)
				}
				read <- ok
			}()
			select {
			case ok := <-read:
				t.Fatalf("AddCommitted answered %v while a transaction %s", ok, what)
			case <-time.After(heldCartWait):
			}
			return end
		})
		expectIs(t, err, end, "the transaction that "+what)
		select {
		case ok := <-read:
			expectEqual(t, ok, end == nil, "AddCommitted once the transaction that "+what+" ended")
		case <-time.After(10 * time.Second):
			t.Errorf("AddCommitted still waits after the transaction that %s ended", what)
		}
	}
	expectWaits("holds the cart", userID, nil)
	expectWaits("holds the cart, rolled back", userID, rollback)
	expectWaits("creates the cart", newUserID(), nil)
	creator := newUserID()
	expectWaits("creates the cart, rolled back", creator, rollback)
	expectEqual(t, len(lines(t, e.impl, creator)), 0, "lines of the cart AddCommitted may leave")
}

// placeOrder builds a PENDING order of one unit of each product.
func placeOrder(t *testing.T, userID string, discount order.Discount, products ...*catalog.Product) *order.Order {
	t.Helper()
	var placed []order.CartLine
	for _, p := range products {
		placed = append(placed, orderLine(p, 2, 10))
	}
	o, err := order.Place(randomID(), userID, placed, discount, now())
	must(t, err, "place order")
	return o
}

func testOrderCreateThenGet(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	p, q := createProduct(t, e.impl, 300, 10), createProduct(t, e.impl, 45, 10)
	for _, discount := range []order.Discount{{}, {CouponID: randomID(), Rate: 25}} {
		o := placeOrder(t, newUserID(), discount, q, p)
		must(t, e.impl.Orders.Create(ctx, o), "create")
		got, err := e.impl.Orders.Get(ctx, o.ID())
		must(t, err, "get")
		expectEqual(t, got.UserID(), o.UserID(), "user")
		expectEqual(t, got.CouponID(), o.CouponID(), "coupon")
		expectEqual(t, got.Subtotal(), o.Subtotal(), "subtotal")
		expectEqual(t, got.Discount(), o.Discount(), "discount")
		expectEqual(t, got.Total(), o.Total(), "total")
		expectEqual(t, got.Status(), order.StatusPending, "status")
		expectEqual(t, got.CreatedAt(), o.CreatedAt(), "createdAt")
		if got.PaidAt() != nil {
			t.Errorf("paidAt %v, want nil", got.PaidAt())
		}
		gotItems, wantItems := got.Items(), o.Items()
		if len(gotItems) != len(wantItems) {
			t.Fatalf("%d items, want %d", len(gotItems), len(wantItems))
		}
		for i := range wantItems {
			expectEqual(t, gotItems[i], wantItems[i], "item")
		}
	}
}

func testOrderUnknownIsNotFound(t *testing.T, e env[ports.Stores]) {
	_, err := e.impl.Orders.Get(context.Background(), randomID())
	expectIs(t, err, order.ErrNotFound, "Get")
}

func testOrderCreateWithUnknownProduct(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	known := createProduct(t, e.impl, 10, 10)
	unknown := catalog.RebuildProduct(randomID(), "ghost", 10, now())
	o := placeOrder(t, newUserID(), order.Discount{}, known, unknown)
	expectIs(t, e.impl.Orders.Create(ctx, o), catalog.ErrProductNotFound, "Create")
	_, err := e.impl.Orders.Get(ctx, o.ID())
	expectIs(t, err, order.ErrNotFound, "Get after a failed Create")
}

func testOrderUnitsOrdered(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	userID := newUserID()
	p, q := createProduct(t, e.impl, 10, 100), createProduct(t, e.impl, 10, 100)
	pending, paid, cancelled := placeOrder(t, userID, order.Discount{}, p, q), placeOrder(t, userID, order.Discount{}, p),
		placeOrder(t, userID, order.Discount{}, p)
	for _, o := range []*order.Order{pending, paid, cancelled, placeOrder(t, newUserID(), order.Discount{}, p)} {
		must(t, e.impl.Orders.Create(ctx, o), "create")
	}
	must(t, e.impl.Orders.MarkPaid(ctx, paid.ID(), now()), "mark paid")
	must(t, e.impl.Orders.MarkCancelled(ctx, cancelled.ID()), "mark cancelled")

	units, err := e.impl.Orders.UnitsOrdered(ctx, userID, p.ID())
	must(t, err, "units ordered")
	expectEqual(t, units, 4, "units of p in the PENDING and the COMPLETED order") // placeOrder puts 2 units a line
	units, err = e.impl.Orders.UnitsOrdered(ctx, userID, createProduct(t, e.impl, 10, 100).ID())
	must(t, err, "units ordered")
	expectEqual(t, units, 0, "units of a product never ordered")
	units, err = e.impl.Orders.UnitsOrdered(ctx, newUserID(), p.ID())
	must(t, err, "units ordered")
	expectEqual(t, units, 0, "units of a user who never ordered")
}

// testOrderUnitsOrderedUnderTheCartLock runs the placement of a product limited to one order
// from many goroutines: lock the user's cart, count the units ordered, place an order only when
// there is none. Only if each count sees the orders committed before the lock does exactly one
// order hold the product.
func testOrderUnitsOrderedUnderTheCartLock(t *testing.T, e env[ports.Stores]) {
	const placements = 20
	userID := newUserID()
	p := createProduct(t, e.impl, 10, 100)
	errs := startTogether(placements, func(int) error {
		return e.impl.Tx.InTx(context.Background(), func(ctx context.Context) error {
			// A read before the lock, as a caller's own transaction may make: on MySQL it fixes
			// the snapshot of plain reads, which the count must not be.
			if _, err := e.impl.Orders.TopSelling(ctx, time.Time{}, 1); err != nil {
				return err
			}
			if _, err := e.impl.Carts.GetOrCreateForUpdate(ctx, freshCart(t, userID), randomID()); err != nil {
				return err
			}
			units, err := e.impl.Orders.UnitsOrdered(ctx, userID, p.ID())
			if err != nil || units > 0 {
				return err
			}
			return e.impl.Orders.Create(ctx, placeOrder(t, userID, order.Discount{}, p))
		})
	})
	for _, err := range errs {
		must(t, err, "locked placement")
	}
	units, err := e.impl.Orders.UnitsOrdered(context.Background(), userID, p.ID())
	must(t, err, "units ordered")
	expectEqual(t, units, 2, "units ordered: one order of 2 units")
}
