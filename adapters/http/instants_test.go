package http_test

import (
	"context"
	"fmt"
	stdhttp "net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/fx"

	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/ports"
)

// recordedIDs is the ID generator recording every id it hands out.
type recordedIDs struct {
	ports.IDGenerator
	mu  sync.Mutex
	ids []string
}

func (r *recordedIDs) NewID() string {
	id := r.IDGenerator.NewID()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids = append(r.ids, id)
	return id
}

func (r *recordedIDs) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ids...)
}

// RFC 3339 allows offsets that move an instant out of the years the stores and the JSON encoder
// hold: such an instant is refused before anything is stored, never stored and then answered
// with an empty 500 (as every later read of it would be). So is a time RFC 3339 does not allow.
func TestInstantOutOfRange_IsValidationFailedAndStoresNothing(t *testing.T) {
	t.Parallel()
	ids := &recordedIDs{}
	var (
		verification ports.VerificationStores
		commerce     ports.CommerceStores
		raffles      ports.RaffleStores
		waiting      ports.WaitingStores
	)
	h := newHarness(t, harnessConfig{options: []fx.Option{
		fx.Decorate(func(g ports.IDGenerator) ports.IDGenerator { ids.IDGenerator = g; return ids }),
		fx.Populate(&verification, &commerce, &raffles, &waiting),
	}})
	creates := []struct{ path, field, body string }{
		{"/admin/challenges", "deadline", `{"title":"t","deadline":%q}`},
		{"/admin/coupons", "expiresAt", `{"name":"c","discountRate":10,"totalQuantity":1,"expiresAt":%q}`},
		{"/admin/raffles", "closesAt", `{"name":"r","winners":1,"closesAt":%q}`},
		{"/admin/events", "opensAt", `{"name":"e","seats":1,"mode":"pull","opensAt":%q}`},
	}
	instants := []string{
		"9999-12-31T23:59:59-23:59",    // year 10000 in UTC
		"9999-12-31T23:59:59.9999999Z", // rounds to year 10000 at the databases' microseconds
		"0000-01-01T00:00:00+00:01",    // year -1 in UTC
		"0999-12-31T23:59:59.999999Z",  // before MySQL's DATETIME holds
		"2030-01-01T00:00:00,5Z",       // not RFC 3339 (a comma before the fraction), which Go's parser takes
	}
	for _, c := range creates {
		for _, instant := range instants {
			t.Run(c.field+"="+instant, func(t *testing.T) {
				rec := h.do(call{method: "POST", path: c.path, token: h.admin(), body: fmt.Sprintf(c.body, instant)})
				body := assertError(t, rec, stdhttp.StatusBadRequest, "VALIDATION_FAILED")
				assert.Equal(t, c.field, body.Field)
			})
		}
	}

	ctx := context.Background()
	for _, id := range ids.all() {
		_, challengeErr := verification.Challenges.Get(ctx, id)
		_, couponErr := commerce.Coupons.Get(ctx, id)
		_, raffleErr := raffles.Raffles.Get(ctx, id)
		_, eventErr := waiting.Events.Get(ctx, id)
		for _, err := range []error{challengeErr, couponErr, raffleErr, eventErr} {
			de, ok := domain.AsError(err)
			assert.True(t, ok && de.Kind == domain.KindNotFound, "%s was stored: %v", id, err)
		}
	}
}
