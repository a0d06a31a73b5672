package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/fx"

	"github.com/rushgate/rushgate/adapters/gormdb"
	"github.com/rushgate/rushgate/bootstrap"
	"github.com/rushgate/rushgate/domain/raffle"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testenv"
	"github.com/rushgate/rushgate/test/testkit"
)

// drawInterval is how often the raffle tests' servers look for a raffle to draw.
const drawInterval = 50 * time.Millisecond

// raffleServers starts the raffle tests' instances on one shifted clock, drawing every
// drawInterval: two sharing b's storage, or one on memory, which cannot share.
func raffleServers(t *testing.T, b backend) (*shiftedClock, []*server) {
	t.Helper()
	b.shareStorage(t)
	clock := &shiftedClock{}
	fastDraws := func(c *bootstrap.Config) { c.Raffle.DrawInterval = drawInterval }
	instances := []*server{startServerOnClock(t, b, clock, fastDraws)}
	if b.databaseURL != "" {
		instances = append(instances, startServerOnClock(t, b, clock, fastDraws))
	}
	return clock, instances
}

// TestRaffle_StampedeDrawAndPurchase: on every backend, two instances (one on memory, which
// cannot share) take a stampede of entries with duplicates, refuse every entry after closesAt,
// both run the draw worker and the raffle is drawn once with exactly `winners` winners whose
// tickets anyone can recompute from the published seed; then only a winner may buy the
// raffle's product, one unit. A raffle for a product that does not exist is refused.
func TestRaffle_StampedeDrawAndPurchase(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			clock, instances := raffleServers(t, b)
			first := instances[0]
			admin := first.adminToken()

			assertError(t, first.do("POST", "/admin/raffles", admin, fmt.Sprintf(`{"name":"ghost","winners":1,"closesAt":%q,"productId":%q}`,
				clock.Now().Add(time.Hour).Format(time.RFC3339Nano), uuid.NewString())), http.StatusNotFound, "PRODUCT_NOT_FOUND")
			product := first.do("POST", "/admin/products", admin, `{"name":"sneaker","price":100,"stock":50}`)
			if product.status != http.StatusCreated {
				t.Fatalf("product: %d %s", product.status, product.raw)
			}
			productID := product.str("id")
			// The bystander's cart took the product before the raffle restricted it.
			addToCart := func(s *server, user string, quantity int) response {
				return s.do("POST", "/api/cart/items", s.token(user), fmt.Sprintf(`{"productId":%q,"quantity":%d}`, productID, quantity))
			}
			if res := addToCart(first, "bystander", 1); res.status != http.StatusCreated {
				t.Fatalf("bystander's cart: %d %s", res.status, res.raw)
			}

			const users, winners = 120, 5
			closesAt := clock.Now().Add(time.Hour)
			created := first.do("POST", "/admin/raffles", admin, fmt.Sprintf(`{"name":"drop","winners":%d,"closesAt":%q,"productId":%q}`,
				winners, closesAt.Format(time.RFC3339Nano), productID))
			if created.status != http.StatusCreated || created.str("status") != "OPEN" || created.str("seedHash") == "" {
				t.Fatalf("create: %d %s", created.status, created.raw)
			}
			raffleID := created.str("id")
			enter := func(s *server, user string) response {
				return s.do("POST", "/raffles/"+raffleID+"/entries", s.token(user), "")
			}

			var (
				mu       sync.Mutex
				statuses = map[string][]int{}
			)
			// Each user enters twice, through different instances.
			testkit.StartTogether(2*users, func(i int) {
				u, try := i/2, i%2
				user := fmt.Sprintf("entrant-%03d", u)
				res := enter(instances[(u+try)%len(instances)], user)
				mu.Lock()
				defer mu.Unlock()
				statuses[user] = append(statuses[user], res.status)
			})
			for user, got := range statuses {
				if len(got) != 2 || got[0]+got[1] != http.StatusCreated+http.StatusOK {
					t.Errorf("%s: answers %v, want one 201 and one 200", user, got)
				}
			}

			clock.advanceTo(closesAt)
			testkit.StartTogether(20, func(u int) {
				res := enter(instances[u%len(instances)], fmt.Sprint("late-", u))
				if res.status != http.StatusConflict || res.str("error") != "RAFFLE_CLOSED" {
					t.Errorf("late entry: %d %s", res.status, res.raw)
				}
			})

			// The draw worker's first round past closesAt draws; 200 rounds allow for a loaded machine.
			var drawn response
			testkit.Eventually(t, 200*drawInterval, "the draw", func() error {
				drawn = first.do("GET", "/raffles/"+raffleID, admin, "")
				return drawn.hasStatus("DRAWN")
			})
			if drawn.num("entries") != users || drawn.str("seedHash") != created.str("seedHash") {
				t.Fatalf("drawn: %s", drawn.raw)
			}
			seed, err := hex.DecodeString(drawn.str("seed"))
			if err != nil || len(seed) != 32 || sha256Hex(seed) != drawn.str("seedHash") {
				t.Fatalf("the published seed %q does not match the commitment: %v", drawn.str("seed"), err)
			}
			if first.db != nil {
				var rows, distinct int
				q := first.query("SELECT COUNT(*), COUNT(DISTINCT user_id) FROM raffle_entries WHERE raffle_id = ?")
				if err := first.db.QueryRow(q, raffleID).Scan(&rows, &distinct); err != nil {
					t.Fatal(err)
				}
				if rows != users || distinct != users {
					t.Fatalf("stored %d entries of %d users, want %d", rows, distinct, users)
				}
			}

			var winnersFound, losers []string
			for u := range users {
				user := fmt.Sprintf("entrant-%03d", u)
				standing := instances[u%len(instances)].do("GET", "/raffles/"+raffleID+"/entries/me", first.token(user), "")
				ticket := sha256Hex(append(append([]byte{}, seed...), ":"+user...))
				if standing.status != http.StatusOK || standing.str("ticket") != ticket {
					t.Fatalf("%s: %d %s, recomputed ticket %s", user, standing.status, standing.raw, ticket)
				}
				wantWon := ticket <= drawn.str("cutoffTicket")
				if (standing.str("status") == "won") != wantWon {
					t.Fatalf("%s: %s, but ticket ≤ cutoff is %v", user, standing.raw, wantWon)
				}
				if wantWon {
					winnersFound = append(winnersFound, user)
				} else {
					losers = append(losers, user)
				}
			}
			if len(winnersFound) != winners {
				t.Fatalf("%d winners, want %d", len(winnersFound), winners)
			}
			assertError(t, first.do("GET", "/raffles/"+raffleID+"/entries/me", first.token("late-0"), ""), http.StatusNotFound, "NOT_ENTERED")

			assertError(t, addToCart(first, losers[0], 1), http.StatusForbidden, "RAFFLE_NOT_WON")
			assertError(t, first.do("POST", "/api/orders", first.token("bystander"), ""), http.StatusForbidden, "RAFFLE_NOT_WON")
			winner := winnersFound[0]
			assertError(t, addToCart(first, winner, 2), http.StatusBadRequest, "VALIDATION_FAILED")
			if res := addToCart(first, winner, 1); res.status != http.StatusCreated {
				t.Fatalf("winner's cart: %d %s", res.status, res.raw)
			}
			if res := first.do("POST", "/api/orders", first.token(winner), ""); res.status != http.StatusCreated {
				t.Fatalf("winner's order: %d %s", res.status, res.raw)
			}
		})
	}
}

// TestRaffle_AWinnerRacingAddsAndOrdersBuysOneUnit: the raffle's one winner fires many adds of
// the prize at once, each followed by an order, through two instances (one on memory): exactly
// one order places it, and the database holds one unit of it in live orders; once that order is
// cancelled, a second race places exactly one again. The cart's row lock, under which every
// order is placed and counted, is what keeps the racers from all passing the check.
func TestRaffle_AWinnerRacingAddsAndOrdersBuysOneUnit(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			clock, instances := raffleServers(t, b)
			first := instances[0]
			productID := first.createProduct("sneaker", 100, 50)
			closesAt := clock.Now().Add(time.Hour)
			created := first.do("POST", "/admin/raffles", first.adminToken(), fmt.Sprintf(
				`{"name":"drop","winners":1,"closesAt":%q,"productId":%q}`, closesAt.Format(time.RFC3339Nano), productID))
			if created.status != http.StatusCreated {
				t.Fatalf("create: %d %s", created.status, created.raw)
			}
			raffleID := created.str("id")
			const winner = "winner" // the one entrant of a raffle of one winner
			if res := first.do("POST", "/raffles/"+raffleID+"/entries", first.token(winner), ""); res.status != http.StatusCreated {
				t.Fatalf("enter: %d %s", res.status, res.raw)
			}
			clock.advanceTo(closesAt)
			testkit.Eventually(t, 200*drawInterval, "the draw", func() error {
				return first.do("GET", "/raffles/"+raffleID+"/entries/me", first.token(winner), "").hasStatus("won")
			})

			// race fires the adds and orders and returns the id of the one order placed.
			race := func() string {
				const racers = 30
				adds, orders := make([]response, racers), make([]response, racers)
				testkit.StartTogether(racers, func(i int) {
					adds[i] = instances[i%len(instances)].addToCart(winner, productID, 1)
					orders[i] = instances[(i+1)%len(instances)].do("POST", "/api/orders", first.token(winner), "")
				})
				var placed []string
				for i := range racers {
					if a := adds[i]; a.status != http.StatusCreated && (a.status != http.StatusBadRequest || a.str("error") != "VALIDATION_FAILED") {
						t.Fatalf("add: %d %s", a.status, a.raw)
					}
					switch o := orders[i]; {
					case o.status == http.StatusCreated:
						placed = append(placed, o.str("orderId"))
					case o.status == http.StatusBadRequest && o.str("error") == "EMPTY_CART":
					default:
						t.Fatalf("order: %d %s", o.status, o.raw)
					}
				}
				if len(placed) != 1 {
					t.Fatalf("%d orders placed, want 1: %v", len(placed), placed)
				}
				if units := first.liveUnitsOf(winner, productID); units != 1 {
					t.Fatalf("stored: the live orders hold %d units of the prize, want 1", units)
				}
				return placed[0]
			}

			placed := race()
			if res := first.do("POST", "/api/orders/"+placed+"/cancel", first.token(winner), ""); res.status != http.StatusOK {
				t.Fatalf("cancel: %d %s", res.status, res.raw)
			}
			if again := race(); again == placed {
				t.Fatalf("the second race answered the cancelled order %s", placed)
			}
		})
	}
}

// liveUnitsOf sums, straight from the database, the units of productID in the user's PENDING and
// COMPLETED orders; on memory it asks the server's order store.
func (s *server) liveUnitsOf(user, productID string) int {
	s.t.Helper()
	if s.db == nil {
		units, err := s.stores.Orders.UnitsOrdered(context.Background(), user, productID)
		if err != nil {
			s.t.Fatal(err)
		}
		return units
	}
	var units int
	q := s.query("SELECT COALESCE(SUM(i.quantity), 0) FROM orders o JOIN order_items i ON i.order_id = o.id " +
		"WHERE o.user_id = ? AND i.product_id = ? AND o.status IN ('PENDING', 'COMPLETED')")
	if err := s.db.QueryRow(q, user, productID).Scan(&units); err != nil {
		s.t.Fatal(err)
	}
	return units
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// crashingDraws fails where the draw's result would be written, as an instance killed between
// the draw's selection and its commit would, for its first limit draws.
type crashingDraws struct {
	ports.RaffleRepository
	crashes atomic.Int32
	limit   int32
}

func (c *crashingDraws) SaveDrawn(ctx context.Context, r *raffle.Raffle) error {
	if c.crashes.Add(1) <= c.limit {
		return errors.New("e2e: crashed between the draw's selection and its commit")
	}
	return c.RaffleRepository.SaveDrawn(ctx, r)
}

// TestRaffle_DrawDyingBeforeCommitCompletesOnce: a draw that dies after selecting the winners
// leaves the raffle shown OPEN, its seed unpublished and entries refused; the worker's next
// round draws it, once, with the seed committed to at creation.
func TestRaffle_DrawDyingBeforeCommitCompletesOnce(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			clock := &shiftedClock{}
			crashing := &crashingDraws{limit: 2}
			s := startServerWith(t, b, fx.Options(
				fx.Decorate(func(ports.Clock) ports.Clock { return clock }),
				fx.Decorate(func(stores ports.RaffleStores) ports.RaffleStores {
					crashing.RaffleRepository = stores.Raffles
					stores.Raffles = crashing
					return stores
				}),
			), func(c *bootstrap.Config) { c.Raffle.DrawInterval = drawInterval })

			closesAt := clock.Now().Add(time.Hour)
			created := s.do("POST", "/admin/raffles", s.adminToken(), fmt.Sprintf(`{"name":"drop","winners":2,"closesAt":%q}`,
				closesAt.Format(time.RFC3339Nano)))
			if created.status != http.StatusCreated {
				t.Fatalf("create: %d %s", created.status, created.raw)
			}
			id := created.str("id")
			for _, user := range []string{"ann", "bob", "cat"} {
				if res := s.do("POST", "/raffles/"+id+"/entries", s.token(user), ""); res.status != http.StatusCreated {
					t.Fatalf("%s: %d %s", user, res.status, res.raw)
				}
			}

			clock.advanceTo(closesAt)
			testkit.Eventually(t, 200*drawInterval, "the first draw to die", func() error {
				if crashing.crashes.Load() < 1 {
					return errors.New("no draw has died yet")
				}
				return nil
			})
			if open := s.do("GET", "/raffles/"+id, s.token("ann"), ""); open.str("status") == "DRAWN" && crashing.crashes.Load() <= crashing.limit {
				t.Fatalf("a draw that died is published: %s", open.raw)
			}
			assertError(t, s.do("POST", "/raffles/"+id+"/entries", s.token("dan"), ""), http.StatusConflict, "RAFFLE_CLOSED")
			var drawn response
			testkit.Eventually(t, 200*drawInterval, "the draw after the crashes", func() error {
				drawn = s.do("GET", "/raffles/"+id, s.token("ann"), "")
				return drawn.hasStatus("DRAWN")
			})
			if crashing.crashes.Load() != crashing.limit+1 {
				t.Fatalf("%d draws reached the commit, want %d crashed and one committed", crashing.crashes.Load(), crashing.limit+1)
			}
			seed, err := hex.DecodeString(drawn.str("seed"))
			if err != nil || sha256Hex(seed) != created.str("seedHash") || drawn.num("entries") != 3 {
				t.Fatalf("drawn: %s (committed to %s)", drawn.raw, created.str("seedHash"))
			}
			won := 0
			for _, user := range []string{"ann", "bob", "cat"} {
				if s.do("GET", "/raffles/"+id+"/entries/me", s.token(user), "").str("status") == "won" {
					won++
				}
			}
			if won != 2 {
				t.Fatalf("%d won, want 2", won)
			}
		})
	}
}

// TestRaffle_KilledMidDrawCompletesOnceAfterRestart: the instance drawing a raffle is killed
// with kill -9 inside its draw (RUSHGATE_RAFFLE_DRAW_HOLD holds the draw between ordering the
// entrants and writing the result, so the kill lands there, not by luck). The database then
// holds the raffle CLOSING, unpublished, with the seed it was created with; entries are
// refused. Two instances started after the kill race to draw it: it is drawn once, with that
// seed, and the cutoff recomputed from the stored entries; its result stays as first written.
func TestRaffle_KilledMidDrawCompletesOnceAfterRestart(t *testing.T) {
	for _, database := range processDatabases {
		t.Run(database.name, func(t *testing.T) {
			t.Parallel()
			fresh := database.fresh(t)
			env := append(processEnv(t, fresh.URL), "RUSHGATE_RAFFLE_DRAW_INTERVAL=50ms")
			db, err := gormdb.Open(context.Background(), fresh.URL, testenv.DBOptions())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			query := func(q string) string { return gormdb.Bind(db.Dialect(), q) }

			drawer := startProcess(t, append(env, "RUSHGATE_RAFFLE_DRAW_HOLD=1h"), "drawer", "all")
			c := drawer.client(t)
			const users, winners = 30, 4
			created := c.do("POST", "/admin/raffles", c.adminToken(), fmt.Sprintf(`{"name":"kill","winners":%d,"closesAt":%q}`,
				winners, time.Now().Add(time.Hour).Format(time.RFC3339Nano)))
			if created.status != http.StatusCreated {
				t.Fatalf("create: %d %s", created.status, created.raw)
			}
			id := created.str("id")
			entrants := make([]string, users)
			for u := range entrants {
				entrants[u] = fmt.Sprintf("kill-%s%02d", c.run, u)
				if res := c.do("POST", "/raffles/"+id+"/entries", c.token(entrants[u]), ""); res.status != http.StatusCreated {
					t.Fatalf("entry %d: %d %s", u, res.status, res.raw)
				}
			}
			// The raffle closes now: the draw worker's next round closes it and holds its draw.
			if _, err := db.SQL().Exec(query("UPDATE raffles SET closes_at = ? WHERE id = ?"), time.Now().UTC().Add(-time.Second), id); err != nil {
				t.Fatal(err)
			}
			status := func() (string, error) {
				var s string
				err := db.SQL().QueryRow(query("SELECT status FROM raffles WHERE id = ?"), id).Scan(&s)
				return s, err
			}
			testkit.Eventually(t, 30*time.Second, "the draw to close the raffle", func() error {
				if s, err := status(); err != nil || s != "CLOSING" {
					return fmt.Errorf("status %q, %w", s, err)
				}
				return nil
			})
			drawer.kill()

			var drawnAt sql.NullTime
			var seed []byte
			err = db.SQL().QueryRow(query("SELECT drawn_at, seed FROM raffles WHERE id = ?"), id).Scan(&drawnAt, &seed)
			if s, _ := status(); err != nil || s != "CLOSING" || drawnAt.Valid || sha256Hex(seed) != created.str("seedHash") {
				t.Fatalf("after the kill: status %q, drawn at %v, seed matches the commitment %v: %v", s, drawnAt, sha256Hex(seed) == created.str("seedHash"), err)
			}

			restarted := []*server{startProcess(t, env, "restarted-a", "all").client(t), startProcess(t, env, "restarted-b", "all").client(t)}
			for _, s := range restarted {
				if view := s.do("GET", "/raffles/"+id, s.token(entrants[0]), ""); view.str("status") == "OPEN" && view.str("seed") != "" {
					t.Fatalf("an undrawn raffle shows its seed: %s", view.raw)
				}
				assertError(t, s.do("POST", "/raffles/"+id+"/entries", s.token("late-"+s.run), ""), http.StatusConflict, "RAFFLE_CLOSED")
			}
			var drawn response
			testkit.Eventually(t, 30*time.Second, "the draw after the restart", func() error {
				drawn = restarted[0].do("GET", "/raffles/"+id, restarted[0].token(entrants[0]), "")
				return drawn.hasStatus("DRAWN")
			})
			published, err := hex.DecodeString(drawn.str("seed"))
			if err != nil || !bytes.Equal(published, seed) || drawn.num("entries") != users {
				t.Fatalf("drawn: %s; the stored seed is %x", drawn.raw, seed)
			}
			tickets := make([]string, users)
			for u, user := range entrants {
				tickets[u] = sha256Hex(append(append([]byte{}, seed...), ":"+user...))
			}
			slices.Sort(tickets)
			if drawn.str("cutoffTicket") != tickets[winners-1] {
				t.Fatalf("cutoff %s, recomputed from the entries %s", drawn.str("cutoffTicket"), tickets[winners-1])
			}
			var firstDrawnAt time.Time
			if err := db.SQL().QueryRow(query("SELECT drawn_at FROM raffles WHERE id = ?"), id).Scan(&firstDrawnAt); err != nil {
				t.Fatal(err)
			}
			won := 0
			for u, user := range entrants {
				standing := restarted[u%2].do("GET", "/raffles/"+id+"/entries/me", restarted[u%2].token(user), "")
				if standing.str("status") == "won" {
					won++
				}
			}
			var again time.Time
			if err := db.SQL().QueryRow(query("SELECT drawn_at FROM raffles WHERE id = ?"), id).Scan(&again); err != nil || !again.Equal(firstDrawnAt) {
				t.Fatalf("the result was written again: drawn at %v, then %v (%v)", firstDrawnAt, again, err)
			}
			if won != winners {
				t.Fatalf("%d won, want %d", won, winners)
			}
		})
	}
}

// TestRaffle_DatabaseStoppedAnswers503ThenServesAgain: with the database stopped hard, every
// raffle route answers 503 UNAVAILABLE with a message and stores nothing (an entry sent then is
// not entered); once it is back, entries are taken again and an earlier entry answers 200.
func TestRaffle_DatabaseStoppedAnswers503ThenServesAgain(t *testing.T) {
	for _, newDatabase := range []func(*testing.T) privateDatabase{startPrivatePostgres, startPrivateMariaDB} {
		db := newDatabase(t)
		t.Run(db.name, func(t *testing.T) {
			s := startServer(t, backend{name: db.name, databaseURL: db.url, redisURL: redisURL(t)}, productionTimeouts)
			admin := s.adminToken()
			create := fmt.Sprintf(`{"name":"outage","winners":1,"closesAt":%q}`, time.Now().Add(time.Hour).Format(time.RFC3339Nano))
			created := s.do("POST", "/admin/raffles", admin, create)
			if created.status != http.StatusCreated {
				t.Fatalf("create: %d %s", created.status, created.raw)
			}
			id := created.str("id")
			enter := func(user string) response { return s.do("POST", "/raffles/"+id+"/entries", s.token(user), "") }
			if res := enter("before"); res.status != http.StatusCreated {
				t.Fatalf("entry: %d %s", res.status, res.raw)
			}

			db.stop(t)
			for name, res := range map[string]response{
				"create":      s.do("POST", "/admin/raffles", admin, create),
				"new entry":   enter("during"),
				"entry again": enter("before"),
				"raffle":      s.do("GET", "/raffles/"+id, admin, ""),
				"standing":    s.do("GET", "/raffles/"+id+"/entries/me", s.token("before"), ""),
			} {
				if res.status != http.StatusServiceUnavailable || res.str("error") != "UNAVAILABLE" || res.str("message") == "" {
					t.Errorf("%s with the database stopped: %d %s", name, res.status, res.raw)
				}
			}

			db.start(t)
			testkit.Eventually(t, 30*time.Second, "entries taken again", func() error {
				if res := enter("after"); res.status != http.StatusCreated {
					return fmt.Errorf("entry: %d %s", res.status, res.raw)
				}
				return nil
			})
			if res := enter("before"); res.status != http.StatusOK {
				t.Fatalf("the earlier entry again: %d %s", res.status, res.raw)
			}
			assertError(t, s.do("GET", "/raffles/"+id+"/entries/me", s.token("during"), ""), http.StatusNotFound, "NOT_ENTERED")
			if view := s.do("GET", "/raffles/"+id, admin, ""); view.num("entries") != 2 {
				t.Fatalf("after the outage: %s", view.raw)
			}
		})
	}
}

// TestRaffle_EntriesRacingTheCloseAreDrawnOrRefused: a stampede of entries through two
// instances (one on memory) while the clock reaches closesAt in its midst and both instances'
// draw workers close and draw: every entry answers 201 or RAFFLE_CLOSED, none is lost and none
// slips in after the close — the drawn raffle counts exactly the entries that heard 201, each of
// them reads as won or lost, each refused user as NOT_ENTERED — and exactly min(winners,
// entries) win.
func TestRaffle_EntriesRacingTheCloseAreDrawnOrRefused(t *testing.T) {
	const users, winners = 150, 10
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			clock, instances := raffleServers(t, b)
			first := instances[0]
			admin := first.adminToken()
			closesAt := clock.Now().Add(time.Hour)
			created := first.do("POST", "/admin/raffles", admin, fmt.Sprintf(`{"name":"closing","winners":%d,"closesAt":%q}`,
				winners, closesAt.Format(time.RFC3339Nano)))
			if created.status != http.StatusCreated {
				t.Fatalf("create: %d %s", created.status, created.raw)
			}
			raffleID := created.str("id")
			user := func(u int) string { return fmt.Sprintf("closing-%03d", u) }
			// The entries are sent stagger apart, and the close comes from one more goroutine of
			// the stampede, half way through them.
			const stagger = 2 * time.Millisecond
			answers := make([]response, users)
			testkit.StartTogether(users+1, func(i int) {
				if i == users {
					time.Sleep(users / 2 * stagger) // the stagger under test, not a wait for something
					clock.advanceTo(closesAt)
					return
				}
				time.Sleep(time.Duration(i) * stagger)
				answers[i] = instances[i%len(instances)].do("POST", "/raffles/"+raffleID+"/entries", first.token(user(i)), "")
			})
			entered := map[string]bool{}
			for i, a := range answers {
				switch {
				case a.status == http.StatusCreated:
					entered[user(i)] = true
				case a.status == http.StatusConflict && a.str("error") == "RAFFLE_CLOSED":
				default:
					t.Fatalf("%s: %d %s", user(i), a.status, a.raw)
				}
			}
			t.Logf("%d of %d entered before the close", len(entered), users)

			var drawn response
			testkit.Eventually(t, 200*drawInterval, "the draw", func() error {
				drawn = first.do("GET", "/raffles/"+raffleID, admin, "")
				return drawn.hasStatus("DRAWN")
			})
			if drawn.num("entries") != len(entered) {
				t.Fatalf("drawn with %d entries, %d heard 201: %s", drawn.num("entries"), len(entered), drawn.raw)
			}
			won := 0
			for u := range users {
				standing := instances[u%len(instances)].do("GET", "/raffles/"+raffleID+"/entries/me", first.token(user(u)), "")
				switch {
				case !entered[user(u)]:
					assertError(t, standing, http.StatusNotFound, "NOT_ENTERED")
				case standing.status == http.StatusOK && standing.str("status") == "won":
					won++
				case standing.status != http.StatusOK || standing.str("status") != "lost":
					t.Fatalf("%s entered: %d %s", user(u), standing.status, standing.raw)
				}
			}
			if want := min(winners, len(entered)); won != want {
				t.Fatalf("%d won, want %d", won, want)
			}
		})
	}
}
