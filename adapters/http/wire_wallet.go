package http

import (
	"time"

	appwallet "github.com/rushgate/rushgate/application/wallet"
)

type userJSON struct {
	ID      string `json:"id"`
	Balance int64  `json:"balance"`
}

func wireUser(v appwallet.User) userJSON { return userJSON(v) }

type balanceJSON struct {
	UserID  string `json:"userId"`
	Balance int64  `json:"balance"`
}

func wireBalance(v appwallet.Balance) balanceJSON { return balanceJSON(v) }

type chargeJSON struct {
	UserID        string    `json:"userId"`
	Balance       int64     `json:"balance"`
	ChargedAmount int64     `json:"chargedAmount"`
	ChargedAt     time.Time `json:"chargedAt"`
}

func wireCharge(v appwallet.ChargeResult) chargeJSON { return chargeJSON(v) }
