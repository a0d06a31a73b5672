package catalog_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/rushgate/rushgate/adapters/memory/memorytest"
	"github.com/rushgate/rushgate/adapters/system"
	appcatalog "github.com/rushgate/rushgate/application/catalog"
	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/commerce"
	"github.com/rushgate/rushgate/domain/commerce/catalog"
)

// issuedIDs hands out fresh UUIDs and remembers them, so a test can look for what a refused
// create would have stored.
type issuedIDs struct {
	mu  sync.Mutex
	ids []string
}

func (g *issuedIDs) NewID() string {
	id := system.UUIDs{}.NewID()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ids = append(g.ids, id)
	return id
}

func (g *issuedIDs) issued() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.ids...)
}

// fixture is the product use cases on memory (memorytest.Env).
type fixture struct {
	*memorytest.Env
	ids *issuedIDs
	svc *appcatalog.Service
}

func newFixture() *fixture {
	env := memorytest.New()
	ids := &issuedIDs{}
	return &fixture{Env: env, ids: ids,
		svc: appcatalog.NewService(appcatalog.Deps{Products: env.Stores.Products, Clock: env.Clock, IDs: ids})}
}

// A product is stored with its stock, and Get answers it as Create did: its id, name, price,
// stock and creation time.
func TestCreate_StoresTheProductAndItsStock(t *testing.T) {
	f := newFixture()
	created, err := f.svc.Create(context.Background(), appcatalog.CreateCommand{Name: "상품A", Price: 10_000, Stock: 7})
	if err != nil {
		t.Fatal(err)
	}
	want := appcatalog.View{ID: created.ID, Name: "상품A", Price: 10_000, Stock: 7, CreatedAt: f.Clock.Now()}
	if created != want {
		t.Fatalf("created %+v, want %+v", created, want)
	}
	got, err := f.svc.Get(context.Background(), created.ID)
	if err != nil || got != want {
		t.Fatalf("get: %+v, %v; want %+v", got, err, want)
	}
}

// The bounds of every field are accepted, including a free product and one with no stock.
func TestCreate_AcceptsTheBoundsOfEachField(t *testing.T) {
	f := newFixture()
	for _, cmd := range []appcatalog.CreateCommand{
		{Name: "x", Price: 0, Stock: 0},
		{Name: strings.Repeat("가", catalog.MaxNameLength), Price: commerce.MaxAmount, Stock: catalog.MaxStock},
	} {
		created, err := f.svc.Create(context.Background(), cmd)
		if err != nil {
			t.Fatalf("%+v: %v", cmd, err)
		}
		if got, err := f.svc.Get(context.Background(), created.ID); err != nil || got != created {
			t.Fatalf("get: %+v, %v; want %+v", got, err, created)
		}
	}
}

// Each invalid field is refused VALIDATION_FAILED naming the field, and nothing is stored under
// the id the refused product was given.
func TestCreate_RefusesAnInvalidFieldAndStoresNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cmd   appcatalog.CreateCommand
		field string
	}{
		{"empty name", appcatalog.CreateCommand{Name: "", Price: 1, Stock: 1}, "name"},
		{"name too long", appcatalog.CreateCommand{Name: strings.Repeat("가", catalog.MaxNameLength+1), Price: 1, Stock: 1}, "name"},
		{"control character", appcatalog.CreateCommand{Name: "a\nb", Price: 1, Stock: 1}, "name"},
		{"negative price", appcatalog.CreateCommand{Name: "x", Price: -1, Stock: 1}, "price"},
		{"price past the maximum", appcatalog.CreateCommand{Name: "x", Price: commerce.MaxAmount + 1, Stock: 1}, "price"},
		{"negative stock", appcatalog.CreateCommand{Name: "x", Price: 1, Stock: -1}, "stock"},
		{"stock past the maximum", appcatalog.CreateCommand{Name: "x", Price: 1, Stock: catalog.MaxStock + 1}, "stock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture()
			_, err := f.svc.Create(context.Background(), tc.cmd)
			if de, ok := domain.AsError(err); !ok || !errors.Is(err, domain.ErrValidation) || de.Details["field"] != tc.field {
				t.Fatalf("%v, want VALIDATION_FAILED naming %s", err, tc.field)
			}
			issued := f.ids.issued()
			if len(issued) == 0 {
				t.Fatal("no id was issued: the check below would prove nothing")
			}
			for _, id := range issued {
				if _, _, err := f.Stores.Products.Get(context.Background(), id); !errors.Is(err, catalog.ErrProductNotFound) {
					t.Fatalf("product %s after a refused create: %v", id, err)
				}
			}
		})
	}
}

// Get refuses an id that is not a lower-case UUID VALIDATION_FAILED, and answers
// PRODUCT_NOT_FOUND for a well-formed id nothing is stored under.
func TestGet_ValidatesTheIDAndAnswersNotFound(t *testing.T) {
	f := newFixture()
	created, err := f.svc.Create(context.Background(), appcatalog.CreateCommand{Name: "x", Price: 1, Stock: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"", "not-a-uuid", strings.ToUpper(created.ID), created.ID + "0"} {
		if _, err := f.svc.Get(context.Background(), id); !errors.Is(err, domain.ErrValidation) {
			t.Errorf("id %q: %v, want VALIDATION_FAILED", id, err)
		}
	}
	if _, err := f.svc.Get(context.Background(), system.UUIDs{}.NewID()); !errors.Is(err, catalog.ErrProductNotFound) {
		t.Fatalf("unknown id: %v, want PRODUCT_NOT_FOUND", err)
	}
}
