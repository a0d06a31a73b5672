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
	for _, q := range []int64{0, catalog.MaxStock} {
		if s, err := catalog.NewStock("p1", q); err != nil || s.Quantity() != q || s.Version() != 0 || s.ProductID() != "p1" {
			t.Errorf("stock %d: %+v, %v", q, s, err)
		}
	}
	s, err := catalog.NewStock("p1", 5)
	if err != nil || !s.Covers(5) || s.Covers(6) {
		t.Fatalf("stock of 5: %+v, %v", s, err)
	}
}

func TestStock_TakeOneToAllOnHand(t *testing.T) {
	now := time.Now()
	s := catalog.RebuildStock("p1", 5, 7)
	for _, n := range []int64{0, -1, 6} {
		if _, ok := s.Take(n, "m", catalog.RefOrder, "o1", now); ok || s.Quantity() != 5 {
			t.Fatalf("taking %d of 5: %v, left %d", n, ok, s.Quantity())
		}
	}
	m, ok := s.Take(5, "m1", catalog.RefOrder, "o1", now)
	want := catalog.Movement{ID: "m1", ProductID: "p1", Type: catalog.MovementOut, Before: 5, After: 0,
		RefType: catalog.RefOrder, RefID: "o1", CreatedAt: now}
	if !ok || m != want || s.Quantity() != 0 || s.Version() != 7 {
		t.Fatalf("taking all 5: %+v %v, stock %+v", m, ok, s)
	}
}

func TestInsufficientStock_NamesTheProduct(t *testing.T) {
	err := catalog.InsufficientStock("p9")
	de, ok := domain.AsError(err)
	if !ok || !errors.Is(err, catalog.ErrInsufficientStock) || de.Details["productId"] != "p9" {
		t.Fatalf("got %#v", err)
	}
}
