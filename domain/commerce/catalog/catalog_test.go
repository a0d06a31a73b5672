package catalog_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/commerce"
	"github.com/rushgate/rushgate/domain/commerce/catalog"
)

func TestNewProduct_ValidatesNameAndPrice(t *testing.T) {
	now := time.Now()
	cases := []struct {
		name, productName string
		price             int64
		field             string // "" when valid
	}{
		{"valid", "상품A", 10000, ""},
		{"free", "sample", 0, ""},
		{"the largest price", "gold", commerce.MaxAmount, ""},
		{"negative price", "x", -1, "price"},
		{"price past the maximum", "x", commerce.MaxAmount + 1, "price"},
		{"empty name", "", 1, "name"},
		{"name too long", strings.Repeat("가", catalog.MaxNameLength+1), 1, "name"},
		{"control character", "a\x00b", 1, "name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := catalog.NewProduct("p1", tc.productName, tc.price, now)
			if tc.field == "" {
				if err != nil || p.Price() != tc.price || p.Name() != tc.productName {
					t.Fatalf("got %v, %v", p, err)
				}
				return
			}
			if de, ok := domain.AsError(err); !ok || de.Details["field"] != tc.field {
				t.Fatalf("want VALIDATION_FAILED naming %s, got %v", tc.field, err)
			}
		})
	}
}

func TestNewStock_RefusesNegativeOrAbsurdQuantities(t *testing.T) {
	for _, q := range []int64{-1, catalog.MaxStock + 1} {
		if _, err := catalog.NewStock("p1", q); !errors.Is(err, domain.ErrValidation) {
			t.Errorf("stock %d: %v", q, err)
		}
	}
	s, err := catalog.NewStock("p1", 5)
	if err != nil || !s.Covers(5) || s.Covers(6) {
		t.Fatalf("stock of 5: %+v, %v", s, err)
	}
}

func TestInsufficientStock_NamesTheProduct(t *testing.T) {
	err := catalog.InsufficientStock("p9")
	de, ok := domain.AsError(err)
	if !ok || !errors.Is(err, catalog.ErrInsufficientStock) || de.Details["productId"] != "p9" {
		t.Fatalf("got %#v", err)
	}
}
