package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/rushgate/rushgate/adapters/gormdb"
	rghttp "github.com/rushgate/rushgate/adapters/http"
)

// scenario is one kind of load. The driver calls prepare, times run through the shared worker
// pool, reads the invariant, times the ceiling through the same pool, and judges the numbers
// against targets; the report is shared. A new scenario is a file with a type that implements
// scenario and one line in registry.
type scenario interface {
	// shape describes the run for the report's header, e.g. "2000 users → 1 crew of 100 seats".
	shape() string
	// prepare creates what the run needs through the API and mints its tokens; it is not timed.
	prepare(ctx context.Context, e *env) error
	// run is the timed requests; request i goes to instance e.api.pick(i).
	run(e *env) work
	// invariant reads what the run left in the database, bypassing the server, and checks it
	// against the answers the run got (attempts, in request order).
	invariant(ctx context.Context, e *env, attempts []attempt) (invariantResult, error)
	// ceiling sets up the equivalent raw transaction through database/sql, or the raw path a
	// namedCeiling names, and returns it as work for the same pool at the same concurrency: what
	// the database (or Redis, or bare HTTP) alone can do.
	ceiling(ctx context.Context, e *env) (work, error)
	// targets are what the run is judged on against dialect; the first is its headline.
	targets(dialect gormdb.Dialect) []target
}

// env is what a scenario works with.
type env struct {
	runID   string // keeps this run's users, keys and crews apart from earlier runs
	api     *instances
	tokens  *rghttp.Tokens
	db      *gormdb.DB    // nil when a databaseOptional scenario runs without one
	timeout time.Duration // per request and per ceiling transaction
	// concurrency is the run's; a scenario with phases of its own runs them at it too.
	concurrency int
	redisURL    string    // the servers' Redis, for scenarios whose ceiling is Redis; may be empty
	stderr      io.Writer // progress lines for the person watching
}

// adminToken mints this run's admin token, for the routes that create what a run needs.
func (e *env) adminToken() (string, error) {
	return e.tokens.Mint("load-admin-"+e.runID, rghttp.RoleAdmin, tokenTTL)
}

// userToken mints a user's token for the timed requests.
func (e *env) userToken(userID string) (string, error) {
	return e.tokens.Mint(userID, rghttp.RoleUser, tokenTTL)
}

// userID names this run's i-th user.
func (e *env) userID(i int) string { return fmt.Sprintf("load-%s-%d", e.runID, i) }

// userIDs are this run's users 0…n-1.
func (e *env) userIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = e.userID(i)
	}
	return ids
}

// registration names a scenario, builds it from the command line, and sets the flags it runs
// with unless the command line gives them.
type registration struct {
	name    string
	summary string // one line for the usage text
	build   func(cfg config) (scenario, error)
	// defaults are flag values (by flag name) the scenario runs with unless the command line
	// gives them: the size its targets are set for, so that `make load` measures that size.
	defaults flagValues
}

// flagValues are flag values by flag name.
type flagValues map[string]string

// registry is every scenario the tool runs, one line each, in the order the usage text lists
// them.
var registry = []registration{
	// crew-hot and crew-spread run 20,000 joins: 2,000 lasted under a second, and the ratio then
	// moved by a tenth or more between runs of one build (crew-hot on two instances: 2.19× to
	// 3.09× on MariaDB), away from its value over longer runs.
	{"crew-hot", "--users join ONE crew with a seat for each: every join is a hot-row transaction", newCrewHot, flagValues{"users": "20000"}},
	{"crew-herd", "--users join ONE crew of --capacity seats: a herd, mostly answered CREW_FULL", newCrewHerd, nil},
	{"crew-spread", "--users joins spread over --crews crews, each with a seat for all it is sent", newCrewSpread, flagValues{"users": "20000"}},
	{"coupon-herd", "--users users ask for ONE coupon of quantity --capacity: first come, first served", newCouponHerd, flagValues{"users": "10000", "capacity": "100"}},
	{"charge-herd", "ONE user charges its balance --users times at once: every charge locks the same row", newChargeHerd, nil},
	{"cart-herd", "--users adds of one unit to ONE user's cart at once: every add is a transaction on the same cart row", newCartHerd, nil},
	{"verification-flow", "--users each open an upload session, PUT a PNG to the presigned URL and verify one challenge", newVerificationFlow, nil},
	{"queue-pull", "--users enter ONE pull event, then poll, claim and return tokens through --capacity slots", newQueuePull, flagValues{"users": "100000", "capacity": "100"}},
	{"queue-push", "--users SSE clients wait in ONE push event of --capacity slots; each leaves once admitted (needs RUSHGATE_RECONNECT_GRACE=0)", newQueuePush, flagValues{"users": "10000", "capacity": "1000", "concurrency": "128"}},
	{"seat-herd", "--users admitted users race for --capacity seats of ONE event, many on each seat", newSeatHerd, nil},
	{"payment-herd", "--users users each pay an order of ONE product with --capacity units: the stock row is the hot key", newPaymentHerd, nil},
	{"outbox-drain", "--users PENDING outbox messages drained by two relay workers into a platform failing 10% of calls", newOutboxDrain, flagValues{"users": "10000"}},
	{"top-products", "--users reads of the top 5 products over --order-items order lines", newTopProducts, nil},
	{"raffle-entry", "--users (a tenth of them twice) enter ONE raffle of --capacity winners, which then closes and draws", newRaffleEntry, flagValues{"users": "100000", "capacity": "100", "concurrency": "64"}},
	{"prequeue-open", "--users users enter ONE pull pre-queue of --capacity slots before opensAt; it opens into the draw order, later arrivals FIFO behind", newPrequeueOpen, flagValues{"users": "100000", "capacity": "100"}},
	{"prequeue-open-push", "--users SSE streams wait in ONE push pre-queue of --capacity slots before opensAt; it opens into the draw order, later arrivals FIFO behind (needs RUSHGATE_RECONNECT_GRACE=0)", newPrequeueOpenPush, flagValues{"users": "18000", "capacity": "100", "concurrency": "128"}},
	{"soldout", "--users users wait in ONE pull event of --capacity seats, bought until sold out; every waiting user must be told within two queue ticks", newSoldOut, flagValues{"users": "10000", "capacity": "100"}},
	{"soldout-push", "--users SSE streams wait in ONE push event of --capacity seats and 10 slots, bought until sold out; every waiting stream must be told within two queue ticks (needs RUSHGATE_RECONNECT_GRACE=0)", newSoldOutPush, flagValues{"users": "10000", "capacity": "100", "concurrency": "128"}},
}

// namedCeiling is a scenario whose ceiling is not a transaction through database/sql; it names
// what it is for the report.
type namedCeiling interface{ ceilingName() string }

// ceilingName is what sc's ceiling runs: the report's column header and progress line say it.
func ceilingName(sc scenario) string {
	if named, ok := sc.(namedCeiling); ok {
		return named.ceilingName()
	}
	return "database/sql"
}

// databaseOptional marks a scenario that also runs against the embedded default: without
// --database-url it reads its invariant through the API and has no ceiling.
type databaseOptional interface{ withoutDatabase() }

// lookup finds the scenario called name.
func lookup(name string) (registration, error) {
	i := slices.IndexFunc(registry, func(r registration) bool { return r.name == name })
	if i < 0 {
		return registration{}, fmt.Errorf("unknown scenario %q: want one of %s", name, strings.Join(scenarioNames(), ", "))
	}
	return registry[i], nil
}

// scenarioNames lists the registered scenarios.
func scenarioNames() []string {
	names := make([]string, len(registry))
	for i, r := range registry {
		names[i] = r.name
	}
	return names
}

// created is what the scenarios read of a 201 to the admin: the new object's id, and the
// seedHash a raffle and a pre-queued event are created with.
type created struct {
	ID       string `json:"id"`
	SeedHash string `json:"seedHash"`
}

// createByAdmin POSTs body to path with the run's admin token, on the instance request i goes
// to, and answers what the 201 names; any other answer, or a 201 without an id, is an error.
func createByAdmin(ctx context.Context, api *instances, i int, adminToken, path string, body map[string]any) (created, error) {
	a, raw := api.post(ctx, i, path, map[string]string{"Authorization": "Bearer " + adminToken}, body)
	if a.err != nil {
		return created{}, fmt.Errorf("POST %s: %w", path, a.err)
	}
	var c created
	if a.status != http.StatusCreated || json.Unmarshal(raw, &c) != nil || c.ID == "" {
		return created{}, fmt.Errorf("POST %s answered %d: %s", path, a.status, snippet(raw))
	}
	return c, nil
}

// createCommitted is createByAdmin, on the first instance, of an object created with a
// commitment (a raffle, a pre-queued event): a 201 without its seedHash is an error.
func createCommitted(ctx context.Context, api *instances, adminToken, path string, body map[string]any) (created, error) {
	c, err := createByAdmin(ctx, api, 0, adminToken, path, body)
	if err == nil && c.SeedHash == "" {
		err = fmt.Errorf("POST %s answered no seedHash", path)
	}
	return c, err
}

// mintUsers mints the Authorization header of this run's users 0…n-1 (env.userID).
func mintUsers(e *env, n int) ([]map[string]string, error) {
	bearers := make([]map[string]string, n)
	for i := range bearers {
		user := e.userID(i)
		bearer, err := e.userToken(user)
		if err != nil {
			return nil, fmt.Errorf("mint token for %s: %w", user, err)
		}
		bearers[i] = map[string]string{"Authorization": "Bearer " + bearer}
	}
	return bearers, nil
}

// eventPath is the path of an event's route: "/events/{eventId}" and then suffix.
func eventPath(eventID, suffix string) string { return "/events/" + url.PathEscape(eventID) + suffix }
