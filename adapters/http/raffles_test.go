package http_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	stdhttp "net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/adapters/memory"
)

// raffleHarness is a harness on a manual clock, so a raffle's closesAt comes when the test says.
func raffleHarness(t *testing.T) (*harness, *memory.Clock) {
	t.Helper()
	clock := memory.NewClock(time.Now().UTC())
	return newHarness(t, harnessConfig{clock: clock}), clock
}

// createRaffle creates a raffle closing in an hour and returns the creation's answer.
func (h *harness) createRaffle(clock *memory.Clock, winners int, productID string) map[string]any {
	h.t.Helper()
	body := `{"name":"launch","winners":` + strconv.Itoa(winners) + `,"closesAt":"` +
		clock.Now().Add(time.Hour).Format(time.RFC3339Nano) + `"`
	if productID != "" {
		body += `,"productId":"` + productID + `"`
	}
	return h.create("/admin/raffles", body+"}")
}

// closeAndDraw moves the clock past every raffle's closesAt and runs the draw worker's round.
func (h *harness) closeAndDraw(clock *memory.Clock) {
	h.t.Helper()
	clock.Advance(2 * time.Hour)
	_, err := h.raffles.DrawDue(context.Background())
	require.NoError(h.t, err)
}

func (h *harness) enterRaffle(raffleID, token string) (int, map[string]any) {
	h.t.Helper()
	rec := h.do(call{method: "POST", path: "/raffles/" + raffleID + "/entries", token: token})
	return rec.Code, answer(h.t, rec)
}

func (h *harness) raffleStanding(raffleID, token string) (int, map[string]any) {
	h.t.Helper()
	rec := h.do(call{method: "GET", path: "/raffles/" + raffleID + "/entries/me", token: token})
	return rec.Code, answer(h.t, rec)
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func TestCreateRaffle_AnswersTheCommitmentAndNoSeed(t *testing.T) {
	t.Parallel()
	h, clock := raffleHarness(t)
	closesAt := clock.Now().Add(time.Hour).Truncate(time.Second)

	rec := h.do(call{method: "POST", path: "/admin/raffles", token: h.admin(),
		body: `{"name":"launch","winners":2,"closesAt":"` + closesAt.Format(time.RFC3339) + `"}`})

	require.Equal(t, stdhttp.StatusCreated, rec.Code, rec.Body.String())
	created := answer(t, rec)
	id := created["id"].(string)
	assert.Equal(t, "/raffles/"+id, rec.Header().Get("Location"))
	assert.Equal(t, map[string]any{"id": id, "name": "launch", "winners": 2.0,
		"closesAt": closesAt.Format(time.RFC3339), "status": "OPEN", "seedHash": created["seedHash"]}, created)
	assert.Regexp(t, "^[0-9a-f]{64}$", created["seedHash"])

	got := h.do(call{method: "GET", path: "/raffles/" + id, token: h.token("u1", "user")})
	require.Equal(t, stdhttp.StatusOK, got.Code, got.Body.String())
	view := answer(t, got)
	assert.Equal(t, 0.0, view["entries"])
	assert.NotContains(t, view, "seed")
	assert.NotContains(t, view, "cutoffTicket")
}

func TestCreateRaffle_RejectsBadTermsAndUsers(t *testing.T) {
	t.Parallel()
	h, clock := raffleHarness(t)
	future := clock.Now().Add(time.Hour).Format(time.RFC3339)
	past := clock.Now().Add(-time.Minute).Format(time.RFC3339)
	for _, tc := range []struct{ name, body, field string }{
		{"malformed JSON", `{"name":"a","winners":`, "body"},
		{"no winners", `{"name":"a","winners":0,"closesAt":"` + future + `"}`, "winners"},
		{"negative winners", `{"name":"a","winners":-3,"closesAt":"` + future + `"}`, "winners"},
		{"winners not a number", `{"name":"a","winners":"2","closesAt":"` + future + `"}`, "winners"},
		{"no closesAt", `{"name":"a","winners":1}`, "closesAt"},
		{"closing now", `{"name":"a","winners":1,"closesAt":"` + clock.Now().Format(time.RFC3339Nano) + `"}`, "closesAt"},
		{"empty productId", `{"name":"a","winners":1,"closesAt":"` + future + `","productId":""}`, "productId"},
		{"closing in the past", `{"name":"a","winners":1,"closesAt":"` + past + `"}`, "closesAt"},
		{"closesAt not RFC 3339", `{"name":"a","winners":1,"closesAt":"tomorrow"}`, "closesAt"},
		{"empty name", `{"name":"","winners":1,"closesAt":"` + future + `"}`, "name"},
		{"productId not a UUID", `{"name":"a","winners":1,"closesAt":"` + future + `","productId":"p"}`, "productId"},
		{"unknown field", `{"name":"a","winners":1,"closesAt":"` + future + `","seed":"00"}`, "seed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := h.do(call{method: "POST", path: "/admin/raffles", token: h.admin(), body: tc.body})
			require.Equal(t, stdhttp.StatusBadRequest, rec.Code, rec.Body.String())
			body := answer(t, rec)
			assert.Equal(t, "VALIDATION_FAILED", body["error"])
			assert.Equal(t, tc.field, body["field"])
		})
	}
	user, _ := h.userToken()
	rec := h.do(call{method: "POST", path: "/admin/raffles", token: user,
		body: `{"name":"a","winners":1,"closesAt":"` + future + `"}`})
	assert.Equal(t, stdhttp.StatusForbidden, rec.Code, rec.Body.String())
}

func TestEnterRaffle_OncePerUserThenClosed(t *testing.T) {
	t.Parallel()
	h, clock := raffleHarness(t)
	id := h.createRaffle(clock, 1, "")["id"].(string)
	token, user := h.userToken()

	status, first := h.enterRaffle(id, token)
	require.Equal(t, stdhttp.StatusCreated, status, first)
	assert.Equal(t, id, first["raffleId"])
	assert.Equal(t, user, first["userId"])
	status, again := h.enterRaffle(id, token)
	require.Equal(t, stdhttp.StatusOK, status, again)
	assert.Equal(t, first, again, "a second entry answers the same entry")

	status, standing := h.raffleStanding(id, token)
	require.Equal(t, stdhttp.StatusOK, status, standing)
	assert.Equal(t, map[string]any{"status": "entered"}, standing)
	other, _ := h.userToken()
	status, body := h.raffleStanding(id, other)
	assert.Equal(t, stdhttp.StatusNotFound, status)
	assert.Equal(t, "NOT_ENTERED", body["error"])

	clock.Advance(time.Hour)
	status, body = h.enterRaffle(id, other)
	assert.Equal(t, stdhttp.StatusConflict, status)
	assert.Equal(t, "RAFFLE_CLOSED", body["error"])
	status, again = h.enterRaffle(id, token)
	assert.Equal(t, stdhttp.StatusOK, status, "entering is idempotent after the close too")
	assert.Equal(t, first, again)

	got := answer(t, h.do(call{method: "GET", path: "/raffles/" + id, token: token}))
	assert.Equal(t, 1.0, got["entries"], "the refused entry left nothing")
}

// TestEnterRaffle_RejectsBadBodiesAndStoresNothing: the entry's optional body may only name
// the caller; anything else is refused and enters nobody.
func TestEnterRaffle_RejectsBadBodiesAndStoresNothing(t *testing.T) {
	t.Parallel()
	h, clock := raffleHarness(t)
	id := h.createRaffle(clock, 1, "")["id"].(string)
	token, user := h.userToken()
	for _, tc := range []struct {
		name, body string
		status     int
		code       string
	}{
		{"malformed JSON", `{"userId":`, stdhttp.StatusBadRequest, "VALIDATION_FAILED"},
		{"unknown field", `{"ticket":"00"}`, stdhttp.StatusBadRequest, "VALIDATION_FAILED"},
		{"userId not a string", `{"userId":7}`, stdhttp.StatusBadRequest, "VALIDATION_FAILED"},
		{"another user's id", `{"userId":"someone-else"}`, stdhttp.StatusForbidden, "FORBIDDEN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := h.do(call{method: "POST", path: "/raffles/" + id + "/entries", token: token, body: tc.body})
			require.Equal(t, tc.status, rec.Code, rec.Body.String())
			body := answer(t, rec)
			assert.Equal(t, tc.code, body["error"])
			assert.NotEmpty(t, body["message"])
		})
	}
	got := answer(t, h.do(call{method: "GET", path: "/raffles/" + id, token: token}))
	assert.Equal(t, 0.0, got["entries"], "a refused entry entered someone")
	status, _ := h.raffleStanding(id, token)
	assert.Equal(t, stdhttp.StatusNotFound, status)
	rec := h.do(call{method: "POST", path: "/raffles/" + id + "/entries", token: token, body: `{"userId":"` + user + `"}`})
	assert.Equal(t, stdhttp.StatusCreated, rec.Code, "the caller's own id: %s", rec.Body.String())
}

func TestRaffle_UnknownAndMalformedIDs(t *testing.T) {
	t.Parallel()
	h, _ := raffleHarness(t)
	token, _ := h.userToken()
	unknown := uuid.NewString()
	for _, c := range []call{
		{method: "GET", path: "/raffles/" + unknown},
		{method: "POST", path: "/raffles/" + unknown + "/entries"},
		{method: "GET", path: "/raffles/" + unknown + "/entries/me"},
	} {
		c.token = token
		rec := h.do(c)
		assert.Equal(t, stdhttp.StatusNotFound, rec.Code, c.path)
		assert.Equal(t, "RAFFLE_NOT_FOUND", answer(t, rec)["error"], c.path)
		c.path = strings.Replace(c.path, unknown, "not-a-uuid", 1)
		rec = h.do(c)
		assert.Equal(t, stdhttp.StatusBadRequest, rec.Code, c.path)
		assert.Equal(t, "raffleId", answer(t, rec)["field"], c.path)
	}
}

// TestRaffleDraw_PublishesWhatAnyoneCanCheck: after the close the worker draws once; the raffle
// shows the seed matching the committed hash and the cutoff; each user's ticket is
// SHA-256(seed ‖ ":" ‖ userId), exactly `winners` users won (those at or below the cutoff), and
// nothing showed the seed before.
func TestRaffleDraw_PublishesWhatAnyoneCanCheck(t *testing.T) {
	t.Parallel()
	h, clock := raffleHarness(t)
	created := h.createRaffle(clock, 3, "")
	id := created["id"].(string)
	tokens := map[string]string{}
	for range 10 {
		token, user := h.userToken()
		tokens[user] = token
		status, body := h.enterRaffle(id, token)
		require.Equal(t, stdhttp.StatusCreated, status, body)
	}
	shownBefore := fmt.Sprint(h.logs.lines(t)) + h.scrape()

	h.closeAndDraw(clock)

	drawn := answer(t, h.do(call{method: "GET", path: "/raffles/" + id, token: h.admin()}))
	assert.Equal(t, "DRAWN", drawn["status"])
	assert.Equal(t, 10.0, drawn["entries"])
	assert.Equal(t, created["seedHash"], drawn["seedHash"])
	seed, err := hex.DecodeString(drawn["seed"].(string))
	require.NoError(t, err)
	require.Len(t, seed, 32)
	assert.Equal(t, drawn["seedHash"], sha256Hex(seed), "the seed is the one committed to")
	assert.NotContains(t, shownBefore, drawn["seed"], "the seed was shown before the draw")
	cutoff := drawn["cutoffTicket"].(string)

	won := 0
	for user, token := range tokens {
		status, standing := h.raffleStanding(id, token)
		require.Equal(t, stdhttp.StatusOK, status, standing)
		ticket := sha256Hex(append(append(seed, ':'), user...))
		assert.Equal(t, ticket, standing["ticket"], user)
		want := "lost"
		if ticket <= cutoff {
			want, won = "won", won+1
		}
		assert.Equal(t, want, standing["status"], user)
	}
	assert.Equal(t, 3, won)

	drawnAgain, err := h.raffles.DrawDue(context.Background())
	require.NoError(t, err)
	assert.Zero(t, drawnAgain, "a drawn raffle is not drawn again")
	assert.Equal(t, drawn, answer(t, h.do(call{method: "GET", path: "/raffles/" + id, token: h.admin()})))
}

// TestRaffleDraw_FewerEntriesThanWinnersAllWin: and a raffle nobody entered has no cutoff.
func TestRaffleDraw_FewerEntriesThanWinnersAllWin(t *testing.T) {
	t.Parallel()
	h, clock := raffleHarness(t)
	id := h.createRaffle(clock, 5, "")["id"].(string)
	empty := h.createRaffle(clock, 5, "")["id"].(string)
	token, _ := h.userToken()
	status, _ := h.enterRaffle(id, token)
	require.Equal(t, stdhttp.StatusCreated, status)

	h.closeAndDraw(clock)

	_, standing := h.raffleStanding(id, token)
	assert.Equal(t, "won", standing["status"])
	view := answer(t, h.do(call{method: "GET", path: "/raffles/" + empty, token: token}))
	assert.Equal(t, "DRAWN", view["status"])
	assert.Contains(t, view, "seed")
	assert.NotContains(t, view, "cutoffTicket")
}

// TestRafflePurchase_OnlyAWinnerBuysOneUnit: a raffle's product answers RAFFLE_NOT_WON to
// anyone who did not win, on the cart and on an order already holding it; its winner may hold
// one unit and order it.
func TestRafflePurchase_OnlyAWinnerBuysOneUnit(t *testing.T) {
	t.Parallel()
	h, clock := raffleHarness(t)
	productID := h.create("/admin/products", `{"name":"sneaker","price":100,"stock":10}`)["id"].(string)
	free := h.create("/admin/products", `{"name":"socks","price":5,"stock":10}`)["id"].(string)
	bystander, _ := h.userToken()
	addItem := func(token, product string, quantity int) *struct {
		code int
		body map[string]any
	} {
		rec := h.do(call{method: "POST", path: "/api/cart/items", token: token,
			body: `{"productId":"` + product + `","quantity":` + strconv.Itoa(quantity) + `}`})
		return &struct {
			code int
			body map[string]any
		}{rec.Code, answer(t, rec)}
	}
	// The bystander's cart took the product before any raffle restricted it.
	require.Equal(t, stdhttp.StatusCreated, addItem(bystander, productID, 1).code)

	id := h.createRaffle(clock, 1, productID)["id"].(string)
	first, _ := h.userToken()
	second, _ := h.userToken()
	for _, token := range []string{first, second} {
		status, _ := h.enterRaffle(id, token)
		require.Equal(t, stdhttp.StatusCreated, status)
	}
	before := addItem(first, productID, 1)
	assert.Equal(t, stdhttp.StatusForbidden, before.code, "nobody has won before the draw")
	assert.Equal(t, "RAFFLE_NOT_WON", before.body["error"])

	h.closeAndDraw(clock)
	winner, loser := first, second
	if _, standing := h.raffleStanding(id, first); standing["status"] != "won" {
		winner, loser = second, first
	}

	for _, token := range []string{loser, bystander} {
		added := addItem(token, productID, 1)
		assert.Equal(t, stdhttp.StatusForbidden, added.code, added.body)
		assert.Equal(t, "RAFFLE_NOT_WON", added.body["error"])
	}
	assert.Equal(t, stdhttp.StatusCreated, addItem(loser, free, 3).code, "other products stay anyone's")
	rec := h.do(call{method: "POST", path: "/api/orders", token: bystander})
	assert.Equal(t, stdhttp.StatusForbidden, rec.Code, rec.Body.String())
	assert.Equal(t, "RAFFLE_NOT_WON", answer(t, rec)["error"])

	tooMany := addItem(winner, productID, 2)
	assert.Equal(t, stdhttp.StatusBadRequest, tooMany.code, tooMany.body)
	assert.Equal(t, "VALIDATION_FAILED", tooMany.body["error"])
	require.Equal(t, stdhttp.StatusCreated, addItem(winner, productID, 1).code)
	again := addItem(winner, productID, 1)
	assert.Equal(t, stdhttp.StatusBadRequest, again.code, "the line's total counts: %v", again.body)
	rec = h.do(call{method: "POST", path: "/api/orders", token: winner})
	require.Equal(t, stdhttp.StatusCreated, rec.Code, rec.Body.String())
}

func (h *harness) addToCart(token, productID string, quantity int) *httptest.ResponseRecorder {
	h.t.Helper()
	return h.do(call{method: "POST", path: "/api/cart/items", token: token,
		body: `{"productId":"` + productID + `","quantity":` + strconv.Itoa(quantity) + `}`})
}

// TestRafflePurchase_AWinnersOneUnitCountsTheirLiveOrders: a winner's one unit is one in all,
// not one per cart: while a PENDING or a paid order holds it, adding or ordering another is
// 400 VALIDATION_FAILED on quantity; a cancelled order gives it back; and a unit ordered before
// the raffle restricted the product counts too.
func TestRafflePurchase_AWinnersOneUnitCountsTheirLiveOrders(t *testing.T) {
	t.Parallel()
	h, clock := raffleHarness(t)
	productID := h.create("/admin/products", `{"name":"sneaker","price":100,"stock":10}`)["id"].(string)
	// The early bird ordered a unit, and put another in the cart, before any raffle restricted
	// the product.
	early, _ := h.userToken()
	earlyOrder := h.placeOrder(early, productID, 1)
	require.Equal(t, stdhttp.StatusCreated, h.addToCart(early, productID, 1).Code)

	id := h.createRaffle(clock, 5, productID)["id"].(string)
	winner, winnerID := h.userToken()
	for _, token := range []string{winner, early} {
		status, body := h.enterRaffle(id, token)
		require.Equal(t, stdhttp.StatusCreated, status, body)
	}
	h.closeAndDraw(clock) // fewer entrants than winners: both win
	refusedQuantity := func(rec *httptest.ResponseRecorder, why string) {
		t.Helper()
		body := assertError(t, rec, stdhttp.StatusBadRequest, "VALIDATION_FAILED")
		assert.Equal(t, "quantity", body.Field, why)
		assert.Contains(t, body.Message, "ordered 1 already", why)
	}

	pending := h.placeOrder(winner, productID, 1)
	refusedQuantity(h.addToCart(winner, productID, 1), "a PENDING order holds the unit")
	cancelled := h.do(call{method: "POST", path: "/api/orders/" + pending + "/cancel", token: winner})
	require.Equal(t, stdhttp.StatusOK, cancelled.Code, cancelled.Body.String())
	paid := h.placeOrder(winner, productID, 1) // the cancelled order gave the unit back
	h.create("/admin/users", `{"id":"`+winnerID+`","balance":1000}`)
	payment := h.do(call{method: "POST", path: "/api/orders/" + paid + "/payment", token: winner, idempotencyKey: "pay"})
	require.Equal(t, stdhttp.StatusOK, payment.Code, payment.Body.String())
	refusedQuantity(h.addToCart(winner, productID, 1), "a paid order holds the unit")

	refusedQuantity(h.do(call{method: "POST", path: "/api/orders", token: early}), "the order placed before the raffle holds the unit")
	cart := answer(t, h.do(call{method: "GET", path: "/api/cart", token: early}))
	assert.Len(t, cart["items"], 1, "the refused order kept the cart")
	cancelled = h.do(call{method: "POST", path: "/api/orders/" + earlyOrder + "/cancel", token: early})
	require.Equal(t, stdhttp.StatusOK, cancelled.Code, cancelled.Body.String())
	placed := h.do(call{method: "POST", path: "/api/orders", token: early})
	assert.Equal(t, stdhttp.StatusCreated, placed.Code, placed.Body.String())
}

// TestRafflePurchase_PermissionComesBeforeTheStock: whoever did not win the product is told so
// (403 RAFFLE_NOT_WON) whatever quantity they ask and whatever stock is left, never
// INSUFFICIENT_STOCK, which would tell them the stock; its winner asking for more than one unit
// is told that, not the stock either.
func TestRafflePurchase_PermissionComesBeforeTheStock(t *testing.T) {
	t.Parallel()
	h, clock := raffleHarness(t)
	productID := h.create("/admin/products", `{"name":"sneaker","price":100,"stock":1}`)["id"].(string)
	// The bystander's cart took the last unit before the raffle restricted the product.
	bystander, _ := h.userToken()
	require.Equal(t, stdhttp.StatusCreated, h.addToCart(bystander, productID, 1).Code)
	id := h.createRaffle(clock, 1, productID)["id"].(string)
	winner, winnerID := h.userToken()
	status, body := h.enterRaffle(id, winner)
	require.Equal(t, stdhttp.StatusCreated, status, body)
	h.closeAndDraw(clock)
	stranger, _ := h.userToken()

	assertError(t, h.addToCart(stranger, productID, 2), stdhttp.StatusForbidden, "RAFFLE_NOT_WON")
	tooMany := assertError(t, h.addToCart(winner, productID, 2), stdhttp.StatusBadRequest, "VALIDATION_FAILED")
	assert.Equal(t, "quantity", tooMany.Field)

	// The winner buys the last unit: the stock is gone.
	h.create("/admin/users", `{"id":"`+winnerID+`","balance":1000}`)
	paid := h.do(call{method: "POST", path: "/api/orders/" + h.placeOrder(winner, productID, 1) + "/payment",
		token: winner, idempotencyKey: "pay"})
	require.Equal(t, stdhttp.StatusOK, paid.Code, paid.Body.String())
	assertError(t, h.addToCart(stranger, productID, 1), stdhttp.StatusForbidden, "RAFFLE_NOT_WON")
	assertError(t, h.do(call{method: "POST", path: "/api/orders", token: bystander}), stdhttp.StatusForbidden, "RAFFLE_NOT_WON")
}
