package http

import (
	"time"

	appcatalog "github.com/rushgate/rushgate/application/catalog"
)

type productJSON struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Price     int64     `json:"price"`
	Stock     int64     `json:"stock"`
	CreatedAt time.Time `json:"createdAt"`
}

func wireProduct(v appcatalog.View) productJSON { return productJSON(v) }
