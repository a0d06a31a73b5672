// Package payment pays an order from the user's points in one database transaction: the order,
// the balance and its ledger, the stock and its history, the coupon, and the outbox message
// that announces the payment to the data platform all commit together or not at all. It
// depends on ports only.
//
// A simpler design would deduct points in one transaction and stock in another, refunding the
// points when the stock fails, and write the outbox row only after an async send failed. Here
// nothing commits early, so there is nothing to compensate, and the message cannot be lost
// between the payment and its send.
package payment

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/commerce/catalog"
	"github.com/rushgate/rushgate/domain/commerce/coupon"
	"github.com/rushgate/rushgate/domain/commerce/order"
	"github.com/rushgate/rushgate/domain/commerce/wallet"
	"github.com/rushgate/rushgate/domain/outbox"
	"github.com/rushgate/rushgate/ports"
)

// DefaultMaxBatch bounds a batch of payments when Config.MaxBatch is zero, and caps a larger
// one: a payment is some eight statements, and a batch must commit well within the database's
// transaction timeout.
const DefaultMaxBatch = 16

// DefaultConflictRetries is how many times a payment batch whose stock changed under it is
// re-run when Config.ConflictRetries is zero.
const DefaultConflictRetries = 3

// StatusSuccess is the status of a successful payment's answer.
const StatusSuccess = "SUCCESS"

// Delivery sends a committed outbox message soon, without blocking its caller; a message it
// cannot take now is left to the relay's next round.
type Delivery interface {
	SendSoon(messageID string)
}

// MessageEncoder writes the body of the outbox message that announces a paid order. The format
// is the data platform's, so its adapter owns it (dataplatform.Encoder).
type MessageEncoder interface {
	Encode(d Delivered) ([]byte, error)
}

// Config tunes payments.
type Config struct {
	// MaxBatch bounds how many payments of one lock key a lock hold applies in one transaction;
	// DefaultMaxBatch when zero, and at most DefaultMaxBatch.
	MaxBatch int
	// ConflictRetries bounds the re-runs of a batch whose optimistic stock deduction conflicted
	// before its payments hear STOCK_DEDUCTION_FAILED; DefaultConflictRetries when zero.
	ConflictRetries int
	// Timeout, the database's timeout, bounds a payment's database work in all: its read of the
	// order, then its batch's transaction with the transaction's retries, but not its wait for
	// the lock (guard.Budget). Alone, each would take a timeout of its own, and a slow database
	// would hold the payment for their sum. Zero: no bound of its own.
	Timeout time.Duration
}

// Deps are the ports and the guard payments run on. The guard needs Deps.Tx and Deps.Markers:
// payments commit their idempotency markers with the money. Delivery may be nil: the relay then
// sends every message on its rounds.
type Deps struct {
	Tx          ports.TxRunner
	Orders      ports.OrderRepository
	Products    ports.ProductRepository
	Stock       ports.StockRepository
	Wallets     ports.WalletRepository
	UserCoupons ports.UserCouponRepository
	Outbox      ports.OutboxRepository
	Guard       *guard.Guard
	Delivery    Delivery
	Messages    MessageEncoder
	Clock       ports.Clock
	IDs         ports.IDGenerator
	// Tracer names each payment's span in its outbox message, for its delivery to link to; nil
	// means tracing is off.
	Tracer ports.Tracer
}

// Service runs payments.
type Service struct {
	d        Deps
	timeout  time.Duration
	payments *guard.Lane[payInput, Result]
}

// NewService wires payments to their ports. Deps.Messages is required: without it no paid
// order could reach the outbox, so a wiring that forgot it fails here, not at the first payment.
func NewService(d Deps, cfg Config) *Service {
	if d.Messages == nil {
		panic("payment: Deps.Messages is required")
	}
	if cfg.ConflictRetries <= 0 {
		cfg.ConflictRetries = DefaultConflictRetries
	}
	if cfg.MaxBatch <= 0 || cfg.MaxBatch > DefaultMaxBatch {
		cfg.MaxBatch = DefaultMaxBatch
	}
	if d.Tracer == nil {
		d.Tracer = ports.NoTracer{}
	}
	s := &Service{d: d, timeout: cfg.Timeout}
	s.payments = guard.NewLane(d.Guard, guard.LaneConfig{MaxBatch: cfg.MaxBatch, Markers: true,
		ConflictRetries: cfg.ConflictRetries}, s.payBatch)
	return s
}

// PayCommand pays OrderID as UserID, the authenticated user; IdempotencyKey is required.
type PayCommand struct {
	OrderID        string
	UserID         string
	IdempotencyKey string
}

// Result is the answer to a successful payment.
type Result struct {
	OrderID          string
	PaidAmount       int64
	RemainingBalance int64
	Status           string
	PaidAt           time.Time
	// messageID is the payment's outbox message, known only to the request that paid (a replay
	// has none): that request asks Delivery to send it.
	messageID string
}

// Delivered is what the data platform receives for a paid order, encoded by
// Deps.Messages.
type Delivered struct {
	MessageID   string
	OrderID     string
	UserID      string
	Items       []DeliveredItem
	TotalAmount int64
	PaidAt      time.Time
}

// DeliveredItem is one line of a delivered order.
type DeliveredItem struct {
	ProductID string
	Name      string
	Quantity  int
	UnitPrice int64
	Subtotal  int64
}

// payInput is one payment waiting in its lane.
type payInput struct {
	orderID, userID string
	origin          ports.SpanRef // the payment request's span
}

// Pay pays the order through the guard: idempotency, then the lock of the order's
// scarcest contention point, its first product (stock:{productId}), whose holder applies every
// payment queued behind it in one transaction (payBatch), so a herd paying for one product
// costs one stock update per batch instead of a conflict per payment. Fails with
// order.ErrNotFound (also for another user's order), order.ErrNotPayable (paid or cancelled),
// wallet.InsufficientBalance, catalog.DeductionFailed, coupon.ErrInvalid (the order's coupon is
// no longer the user's AVAILABLE coupon at payment time: used meanwhile, or expired by the
// clock's now), wallet.ErrUserNotFound, or the guard's errors.
func (s *Service) Pay(ctx context.Context, cmd PayCommand) (guard.Result[Result], error) {
	if err := domain.ValidateUUID("orderId", cmd.OrderID); err != nil {
		return guard.Result[Result]{}, err
	}
	if err := domain.ValidateUserID("userId", cmd.UserID); err != nil {
		return guard.Result[Result]{}, err
	}
	// The guard checks the key too, but only after the order is read for its lock key.
	if err := guard.ValidateKey(cmd.IdempotencyKey); err != nil {
		return guard.Result[Result]{}, err
	}
	budget := guard.NewBudget(s.timeout)
	readCtx, spent := budget.Spend(ctx)
	o, err := s.d.Orders.Get(readCtx, cmd.OrderID)
	spent()
	if err != nil {
		return guard.Result[Result]{}, err
	}
	if o.UserID() != cmd.UserID {
		return guard.Result[Result]{}, order.ErrNotFound
	}
	res, err := s.payments.Run(ctx, guard.Request{
		UserID:         cmd.UserID,
		IdempotencyKey: cmd.IdempotencyKey,
		Fingerprint:    guard.Fingerprint("order.pay", []string{cmd.OrderID}, nil),
		LockKey:        LockKey(o),
		Outcome:        guard.OutcomeDone,
		Budget:         budget,
	}, payInput{orderID: cmd.OrderID, userID: cmd.UserID, origin: s.d.Tracer.Ref(ctx)})
	if err == nil && res.Value.messageID != "" && s.d.Delivery != nil {
		s.d.Delivery.SendSoon(res.Value.messageID)
	}
	return res, err
}

// LockKey is the lock a payment of o takes: stock:{its smallest product id}. Every payment of
// one order takes the same key, and payments for one scarce product queue behind one holder.
func LockKey(o *order.Order) string {
	items := o.Items()
	first := items[0].ProductID
	for _, item := range items[1:] {
		first = min(first, item.ProductID)
	}
	return "stock:" + first
}

// payBatch applies a batch of payments in one transaction (the guard's, which commits their
// markers too). A stock whose version moved since it was read fails the whole batch with a
// version conflict: the guard re-runs it in a fresh transaction, and after the last retry its
// payments hear STOCK_DEDUCTION_FAILED.
func (s *Service) payBatch(ctx context.Context, batch []payInput) ([]guard.Answer[Result], error) {
	answers := make([]guard.Answer[Result], len(batch))
	err := s.d.Tx.InTx(ctx, func(ctx context.Context) error {
		clear(answers)
		return s.payOnce(ctx, batch, answers)
	})
	if err != nil {
		return nil, err
	}
	return answers, nil
}

// batchState is what one attempt of a batch has read and decided, before it writes.
type batchState struct {
	orders   map[string]*order.Order // nil: unknown
	accounts map[string]*wallet.Account
	stocks   map[string]*catalog.Stock // as the batch leaves them
	original map[string]catalog.Stock  // as read: the version Deduct checks
	redeemed map[string]bool           // user coupon ids used by this batch
	now      time.Time

	entries   map[string][]wallet.Entry // by user
	movements []catalog.Movement
	coupons   []string // user coupon ids to mark used
	paid      []*order.Order
	messages  []outbox.Message
}

// payOnce is one attempt of payBatch in ctx's transaction. Locks are taken in one global
// order, orders then accounts (each by id) then the orders' user coupons, then stock by product
// id, so batches of different lanes never deadlock. Each payment is checked against what the
// batch has decided so far before anything of it is applied, so a refused one leaves no trace;
// the writes follow in one statement per kind where the ports allow.
func (s *Service) payOnce(ctx context.Context, batch []payInput, answers []guard.Answer[Result]) error {
	st, err := s.read(ctx, batch)
	if err != nil {
		return err
	}
	st.now = s.d.Clock.Now()
	for i, in := range batch {
		answers[i], err = s.decide(ctx, st, in, st.now)
		if err != nil {
			return err
		}
	}
	return s.write(ctx, st)
}

// read locks the batch's orders and their payers' accounts and reads the stock of their products.
func (s *Service) read(ctx context.Context, batch []payInput) (*batchState, error) {
	st := &batchState{orders: map[string]*order.Order{}, accounts: map[string]*wallet.Account{},
		stocks: map[string]*catalog.Stock{}, original: map[string]catalog.Stock{}, redeemed: map[string]bool{},
		entries: map[string][]wallet.Entry{}}
	orderIDs, userIDs := make([]string, 0, len(batch)), make([]string, 0, len(batch))
	for _, in := range batch {
		orderIDs, userIDs = append(orderIDs, in.orderID), append(userIDs, in.userID)
	}
	for _, id := range sortedUnique(orderIDs) {
		o, err := s.d.Orders.GetForUpdate(ctx, id)
		if err != nil && !errors.Is(err, order.ErrNotFound) {
			return nil, fmt.Errorf("lock order: %w", err)
		}
		st.orders[id] = o
	}
	var productIDs []string
	for _, id := range sortedUnique(userIDs) {
		a, err := s.d.Wallets.GetForUpdate(ctx, id)
		if err != nil && !errors.Is(err, wallet.ErrUserNotFound) {
			return nil, fmt.Errorf("lock account: %w", err)
		}
		st.accounts[id] = a
	}
	for _, o := range st.orders {
		if o == nil {
			continue
		}
		for _, item := range o.Items() {
			productIDs = append(productIDs, item.ProductID)
		}
	}
	for _, id := range sortedUnique(productIDs) {
		_, stock, err := s.d.Products.Get(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("read stock: %w", err)
		}
		st.original[id] = stock
		st.stocks[id] = &stock
	}
	return st, nil
}

// decide checks one payment against the batch's state (order, balance, stock, coupon, in that
// order) and, when all pass, applies it to that state and answers it. An error is a
// failure of the attempt, not a refusal.
func (s *Service) decide(ctx context.Context, st *batchState, in payInput, now time.Time) (guard.Answer[Result], error) {
	refuse := func(err error) (guard.Answer[Result], error) { return guard.Answer[Result]{Err: err}, nil }
	o := st.orders[in.orderID]
	if o == nil || o.UserID() != in.userID {
		return refuse(order.ErrNotFound)
	}
	if o.Status() != order.StatusPending {
		return refuse(order.ErrNotPayable)
	}
	a := st.accounts[in.userID]
	if a == nil {
		return refuse(wallet.ErrUserNotFound)
	}
	if o.Total() > a.Balance() {
		return refuse(wallet.InsufficientBalance(a.Balance(), o.Total()))
	}
	items := o.Items()
	for _, item := range items {
		if !st.stocks[item.ProductID].Covers(int64(item.Quantity)) {
			return refuse(catalog.DeductionFailed(item.ProductID, "not enough stock"))
		}
	}
	var userCouponID string
	if o.CouponID() != "" {
		held, err := s.d.UserCoupons.GetForUpdate(ctx, in.userID, o.CouponID())
		if errors.Is(err, coupon.ErrInvalid) {
			return refuse(err)
		}
		if err != nil {
			return guard.Answer[Result]{}, fmt.Errorf("lock user coupon: %w", err)
		}
		// Placing the order checked the coupon, but reserved nothing: it may have expired since,
		// or another order (of this batch too) may have used it.
		if held.CheckUsable(now) != nil || st.redeemed[held.ID()] {
			return refuse(coupon.ErrInvalid)
		}
		userCouponID = held.ID()
	}

	// Every check passed: apply. Nothing below can refuse.
	entry, err := a.Pay(o.Total(), s.d.IDs.NewID(), "order:"+o.ID(), now)
	if err != nil {
		return guard.Answer[Result]{}, err
	}
	st.entries[a.UserID()] = append(st.entries[a.UserID()], entry)
	for _, item := range items {
		m, _ := st.stocks[item.ProductID].Take(int64(item.Quantity), s.d.IDs.NewID(), catalog.RefOrder, o.ID(), now)
		st.movements = append(st.movements, m)
	}
	if userCouponID != "" {
		st.redeemed[userCouponID] = true
		st.coupons = append(st.coupons, userCouponID)
	}
	if err := o.Pay(now); err != nil {
		return guard.Answer[Result]{}, err
	}
	st.paid = append(st.paid, o)
	message, err := s.message(o, now, in.origin)
	if err != nil {
		return guard.Answer[Result]{}, err
	}
	st.messages = append(st.messages, message)
	return guard.Answer[Result]{Value: Result{OrderID: o.ID(), PaidAmount: o.Total(), RemainingBalance: a.Balance(),
		Status: StatusSuccess, PaidAt: now, messageID: message.ID}}, nil
}

// message is the outbox message announcing the paid order o.
func (s *Service) message(o *order.Order, now time.Time, origin ports.SpanRef) (outbox.Message, error) {
	d := Delivered{MessageID: s.d.IDs.NewID(), OrderID: o.ID(), UserID: o.UserID(), TotalAmount: o.Total(), PaidAt: now}
	for _, item := range o.Items() {
		d.Items = append(d.Items, DeliveredItem{ProductID: item.ProductID, Name: item.Name, Quantity: item.Quantity,
			UnitPrice: item.UnitPrice, Subtotal: item.Subtotal})
	}
	payload, err := s.d.Messages.Encode(d)
	if err != nil {
		return outbox.Message{}, fmt.Errorf("encode delivery: %w", err)
	}
	m := outbox.New(d.MessageID, payload, now)
	m.Origin = string(origin)
	return m, nil
}

// write stores what the batch decided: one optimistic deduction per product, then the history,
// coupons, orders, balances with their ledger, and the outbox messages.
func (s *Service) write(ctx context.Context, st *batchState) error {
	if len(st.paid) == 0 {
		return nil
	}
	products := make([]string, 0, len(st.stocks))
	for id := range st.stocks {
		products = append(products, id)
	}
	slices.Sort(products)
	for _, id := range products {
		read := st.original[id]
		deducted := read.Quantity() - st.stocks[id].Quantity()
		if deducted == 0 {
			continue
		}
		if err := s.d.Stock.Deduct(ctx, id, read.Version(), deducted); err != nil {
			if errors.Is(err, ports.ErrVersionConflict) {
				return fmt.Errorf("%w: %w", err, catalog.DeductionFailed(id, "concurrent payments kept changing it; retry"))
			}
			return fmt.Errorf("deduct stock: %w", err)
		}
	}
	if err := s.d.Stock.AddMovements(ctx, st.movements...); err != nil {
		return fmt.Errorf("record stock history: %w", err)
	}
	for _, id := range st.coupons {
		if err := s.d.UserCoupons.MarkUsed(ctx, id, st.now); err != nil {
			return fmt.Errorf("mark coupon used: %w", err)
		}
	}
	for _, o := range st.paid {
		if err := s.d.Orders.MarkPaid(ctx, o.ID(), st.now); err != nil {
			return fmt.Errorf("mark order paid: %w", err)
		}
	}
	for userID, entries := range st.entries {
		if err := s.d.Wallets.Apply(ctx, st.accounts[userID], entries...); err != nil {
			return fmt.Errorf("apply payments: %w", err)
		}
	}
	if err := s.d.Outbox.Add(ctx, st.messages...); err != nil {
		return fmt.Errorf("add outbox messages: %w", err)
	}
	return nil
}

func sortedUnique(ids []string) []string {
	slices.Sort(ids)
	return slices.Compact(ids)
}
