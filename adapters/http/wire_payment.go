package http

import (
	"encoding/json"
	"time"

	"github.com/rushgate/rushgate/application/payment"
	"github.com/rushgate/rushgate/application/ranking"
	"github.com/rushgate/rushgate/application/relay"
)

type paymentJSON struct {
	OrderID          string    `json:"orderId"`
	PaidAmount       int64     `json:"paidAmount"`
	RemainingBalance int64     `json:"remainingBalance"`
	Status           string    `json:"status"`
	PaidAt           time.Time `json:"paidAt"`
}

// wirePayment maps every field of v but the unexported one, which stays in the core.
func wirePayment(v payment.Result) paymentJSON {
	return paymentJSON{OrderID: v.OrderID, PaidAmount: v.PaidAmount, RemainingBalance: v.RemainingBalance,
		Status: v.Status, PaidAt: v.PaidAt}
}

// outboxMessageJSON carries the stored payload, JSON itself, as is.
type outboxMessageJSON struct {
	MessageID     string          `json:"messageId"`
	Status        string          `json:"status"`
	Attempts      int             `json:"attempts"`
	NextAttemptAt time.Time       `json:"nextAttemptAt"`
	LastError     *string         `json:"lastError"`
	CreatedAt     time.Time       `json:"createdAt"`
	SentAt        *time.Time      `json:"sentAt"`
	Payload       json.RawMessage `json:"payload"`
}

func wireOutboxMessage(v relay.View) outboxMessageJSON {
	return outboxMessageJSON{MessageID: v.MessageID, Status: v.Status, Attempts: v.Attempts,
		NextAttemptAt: v.NextAttemptAt, LastError: v.LastError, CreatedAt: v.CreatedAt, SentAt: v.SentAt,
		Payload: v.Payload}
}

func wireOutboxPage(p relay.Page) pageJSON[outboxMessageJSON] {
	return wirePage(p.Items, p.NextCursor, wireOutboxMessage)
}

type rankedJSON struct {
	Rank       int    `json:"rank"`
	ProductID  string `json:"productId"`
	Name       string `json:"name"`
	SalesCount int64  `json:"salesCount"`
	Revenue    int64  `json:"revenue"`
}

func wireRanked(v ranking.Ranked) rankedJSON { return rankedJSON(v) }

type topProductsJSON struct {
	Period   string       `json:"period"`
	Products []rankedJSON `json:"products"`
}

func wireTopProducts(v ranking.Top) topProductsJSON {
	return topProductsJSON{Period: v.Period, Products: wireEach(v.Products, wireRanked)}
}
