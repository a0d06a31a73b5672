package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rushgate/rushgate/domain/commerce/coupon"
)

func (s *server) createUser(id string, balance int64) {
	s.t.Helper()
	res := s.do("POST", "/admin/users", s.adminToken(), fmt.Sprintf(`{"id":%q,"balance":%d}`, id, balance))
	if res.status != http.StatusCreated {
		s.t.Fatalf("create user: %d %s", res.status, res.raw)
	}
}

func (s *server) charge(user string, amount, key string) response {
	return s.do("POST", "/api/users/"+user+"/balance/charge", s.token(user), `{"amount":`+amount+`}`, "Idempotency-Key", s.run+key)
}

func (s *server) createCoupon(total int) string {
	s.t.Helper()
	body := fmt.Sprintf(`{"name":"10%% off","discountRate":10,"totalQuantity":%d,"expiresAt":%q}`,
		total, time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	res := s.do("POST", "/admin/coupons", s.adminToken(), body)
	if res.status != http.StatusCreated || res.str("id") == "" {
		s.t.Fatalf("create coupon: %d %s", res.status, res.raw)
	}
	return res.str("id")
}

func (s *server) issue(couponID, user string, headers ...string) response {
	return s.do("POST", "/api/coupons/"+couponID+"/issue", s.token(user), "", headers...)
}

// wallet is a user's stored balance and ledger, read through the server's own stores.
type storedWallet struct {
	balance, ledgerSum int64
	entries            int
}

func (s *server) wallet(user string) storedWallet {
	s.t.Helper()
	ctx := context.Background()
	a, err := s.stores.Wallets.Get(ctx, user)
	if err != nil {
		s.t.Fatal(err)
	}
	sum, n, err := s.stores.Wallets.Totals(ctx, user)
	if err != nil {
		s.t.Fatal(err)
	}
	return storedWallet{balance: a.Balance(), ledgerSum: sum, entries: n}
}

// assertWallet checks the balance, that it equals the sum of the ledger, and the ledger's length.
func (s *server) assertWallet(user string, balance int64, entries int) {
	s.t.Helper()
	if w := s.wallet(user); w.balance != balance || w.ledgerSum != balance || w.entries != entries {
		s.t.Fatalf("%s: stored %+v, want balance == ledger sum == %d over %d entries", user, w, balance, entries)
	}
}

// assertIssued checks a coupon's invariant: issued == count(user coupons) == want, and, on a
// database, that no user holds two.
func (s *server) assertIssued(couponID string, want int) {
	s.t.Helper()
	ctx := context.Background()
	c, err := s.stores.Coupons.Get(ctx, couponID)
	if err != nil {
		s.t.Fatal(err)
	}
	n, err := s.stores.UserCoupons.Count(ctx, couponID)
	if err != nil {
		s.t.Fatal(err)
	}
	distinct := n
	if s.db != nil {
		q := s.query("SELECT COUNT(DISTINCT user_id) FROM user_coupons WHERE coupon_id = ?")
		if err := s.db.QueryRow(q, couponID).Scan(&distinct); err != nil {
			s.t.Fatal(err)
		}
	}
	if c.IssuedQuantity() != want || n != want || distinct != want {
		s.t.Fatalf("coupon %s: issued %d, user coupons %d, distinct users %d; want %d", couponID, c.IssuedQuantity(), n, distinct, want)
	}
}

func TestUsers_EveryStatus(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, b)
			admin := s.adminToken()
			created := s.do("POST", "/admin/users", admin, `{"id":"alice","balance":5000}`)
			if created.status != http.StatusCreated || string(created.raw) != `{"id":"alice","balance":5000}` {
				t.Fatalf("create: %d %s", created.status, created.raw)
			}
			assertError(t, s.do("POST", "/admin/users", admin, `{"id":"alice","balance":1}`), 409, "USER_EXISTS")
			for _, body := range []string{`{"id":"bob","balance":-1}`, `{"id":"bob"}`, `{"id":"bob","balance":9007199254740993}`,
				`{"id":"bob","balance":1.5}`, `{"id":"","balance":1}`, `{"id":"bob","balance":1,"vip":true}`} {
				assertError(t, s.do("POST", "/admin/users", admin, body), 400, "VALIDATION_FAILED")
			}
			assertError(t, s.do("POST", "/admin/users", s.token("alice"), `{"id":"bob","balance":1}`), 403, "FORBIDDEN")
			assertError(t, s.do("POST", "/admin/users", "", `{"id":"bob","balance":1}`), 401, "UNAUTHORIZED")

			for _, token := range []string{s.token("alice"), admin} {
				res := s.do("GET", "/api/users/alice/balance", token, "")
				if res.status != http.StatusOK || string(res.raw) != `{"userId":"alice","balance":5000}` {
					t.Fatalf("balance: %d %s", res.status, res.raw)
				}
			}
			assertError(t, s.do("GET", "/api/users/alice/balance", s.token("mallory"), ""), 403, "FORBIDDEN")
			assertError(t, s.do("GET", "/api/users/bob/balance", admin, ""), 404, "USER_NOT_FOUND")
			assertError(t, s.do("GET", "/api/users/bob/balance", s.token("bob"), ""), 404, "USER_NOT_FOUND")
			s.assertWallet("alice", 5000, 1)
			if _, err := s.stores.Wallets.Get(context.Background(), "bob"); err == nil {
				t.Fatal("a refused request created bob")
			}
		})
	}
}

func TestCharge_EveryStatus(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, b)
			s.createUser("alice", 500)
			res := s.charge("alice", "100", "first")
			if res.status != http.StatusOK || res.num("balance") != 600 || res.num("chargedAmount") != 100 ||
				res.str("userId") != "alice" || res.str("chargedAt") == "" || res.header.Get("Idempotent-Replayed") != "" {
				t.Fatalf("charge: %d %s", res.status, res.raw)
			}
			replay := s.charge("alice", "100", "first")
			if replay.status != http.StatusOK || string(replay.raw) != string(res.raw) || replay.header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("replay: %d %s", replay.status, replay.raw)
			}
			assertError(t, s.charge("alice", "200", "first"), 422, "IDEMPOTENCY_KEY_REUSED")

			path := "/api/users/alice/balance/charge"
			for _, amount := range []string{"0", "-1", "10000001", "1.5", "1e3", "99999999999999999999"} {
				assertError(t, s.charge("alice", amount, "bad-"+amount), 400, "INVALID_AMOUNT")
			}
			for _, body := range []string{`{"amount":"100"}`, `{}`, `{"amount":null}`, `{"amount":100,"bonus":1}`, `[100]`} {
				assertError(t, s.do("POST", path, s.token("alice"), body, "Idempotency-Key", s.run+"body"), 400, "VALIDATION_FAILED")
			}
			assertError(t, s.do("POST", path, s.token("alice"), `{"amount":100}`), 400, "IDEMPOTENCY_KEY_REQUIRED")
			assertError(t, s.do("POST", path, s.token("mallory"), `{"amount":100}`, "Idempotency-Key", s.run+"m"), 403, "FORBIDDEN")
			assertError(t, s.do("POST", path, s.adminToken(), `{"amount":100}`, "Idempotency-Key", s.run+"a"), 403, "FORBIDDEN")
			assertError(t, s.charge("ghost", "100", "ghost"), 404, "USER_NOT_FOUND")
			s.assertWallet("alice", 600, 2)

			s.createUser("rich", 9007199254740990)
			assertError(t, s.charge("rich", "3", "over"), 400, "AMOUNT_OVERFLOW")
			s.assertWallet("rich", 9007199254740990, 1)
			// Every rejected key was dropped: it works for a good request now.
			if res := s.charge("alice", "1", "bad-0"); res.status != http.StatusOK || res.num("balance") != 601 {
				t.Fatalf("good request after bad ones: %d %s", res.status, res.raw)
			}
			s.assertWallet("alice", 601, 3)
		})
	}
}

// TestCharge_StampedeOfOneUserAddsExactly: 200 concurrent charges of 1,000 to one user, each
// with its own key, all applied; then 50 replays of one key charge once.
func TestCharge_StampedeOfOneUserAddsExactly(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			s := startServer(t, b)
			s.createUser("herd", 1000)
			counts, answers := fire(200, func(i int) response { return s.charge("herd", "1000", fmt.Sprintf("c%d", i)) })
			t.Logf("statuses: %v", counts)
			if counts[http.StatusOK] != 200 {
				t.Fatalf("statuses %v, e.g. %s", counts, answers[0].raw)
			}
			s.assertWallet("herd", 1000+200*1000, 201)

			counts, answers = fire(50, func(int) response { return s.charge("herd", "1000", "double-click") })
			fresh := 0
			for _, a := range answers {
				switch {
				case a.status == http.StatusOK && a.header.Get("Idempotent-Replayed") == "true":
				case a.status == http.StatusOK:
					fresh++
				case a.status == http.StatusConflict && a.str("error") == "IDEMPOTENCY_IN_PROGRESS":
				default:
					t.Fatalf("unexpected answer %d %s", a.status, a.raw)
				}
			}
			if fresh != 1 {
				t.Fatalf("%d requests charged, want 1 (statuses %v)", fresh, counts)
			}
			s.assertWallet("herd", 1000+201*1000, 202)
		})
	}
}

func TestCoupons_EveryStatus(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, b)
			admin := s.adminToken()
			expiresAt := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
			created := s.do("POST", "/admin/coupons", admin,
				fmt.Sprintf(`{"name":"10%% off","discountRate":10,"totalQuantity":2,"expiresAt":%q}`, expiresAt.Format(time.RFC3339)))
			id := created.str("id")
			if created.status != http.StatusCreated || created.num("discountRate") != 10 || created.num("totalQuantity") != 2 ||
				created.num("issuedQuantity") != 0 || created.str("name") != "10% off" || created.str("expiresAt") != expiresAt.Format(time.RFC3339) {
				t.Fatalf("create: %d %s", created.status, created.raw)
			}
			for _, body := range []string{
				`{"name":"x","discountRate":0,"totalQuantity":1,"expiresAt":"2099-01-01T00:00:00Z"}`,
				`{"name":"x","discountRate":101,"totalQuantity":1,"expiresAt":"2099-01-01T00:00:00Z"}`,
				`{"name":"x","discountRate":10,"totalQuantity":0,"expiresAt":"2099-01-01T00:00:00Z"}`,
				`{"name":"x","discountRate":10,"totalQuantity":1,"expiresAt":"tomorrow"}`,
				`{"name":"x","discountRate":10,"totalQuantity":1,"expiresAt":"2001-01-01T00:00:00Z"}`,
				`{"name":"","discountRate":10,"totalQuantity":1,"expiresAt":"2099-01-01T00:00:00Z"}`,
				`{"name":"x","discountRate":10,"totalQuantity":1,"expiresAt":"2099-01-01T00:00:00Z","stackable":true}`,
			} {
				assertError(t, s.do("POST", "/admin/coupons", admin, body), 400, "VALIDATION_FAILED")
			}
			assertError(t, s.do("POST", "/admin/coupons", s.token("alice"),
				`{"name":"x","discountRate":10,"totalQuantity":1,"expiresAt":"2099-01-01T00:00:00Z"}`), 403, "FORBIDDEN")

			issued := s.issue(id, "alice")
			if issued.status != http.StatusCreated || issued.str("userCouponId") == "" || issued.str("couponName") != "10% off" ||
				issued.num("discountRate") != 10 || issued.str("expiresAt") != expiresAt.Format(time.RFC3339) || issued.num("remainingQuantity") != 1 {
				t.Fatalf("issue: %d %s", issued.status, issued.raw)
			}
			assertError(t, s.issue(id, "alice"), 409, "ALREADY_ISSUED")
			keyed := s.issue(id, "bob", "Idempotency-Key", s.run+"bob")
			if keyed.status != http.StatusCreated || keyed.num("remainingQuantity") != 0 {
				t.Fatalf("bob: %d %s", keyed.status, keyed.raw)
			}
			if again := s.issue(id, "bob", "Idempotency-Key", s.run+"bob"); again.status != http.StatusCreated ||
				string(again.raw) != string(keyed.raw) || again.header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("bob's replay: %d %s", again.status, again.raw)
			}
			assertError(t, s.issue(id, "carol"), 409, "COUPON_SOLD_OUT")
			assertError(t, s.issue(id, "alice"), 409, "ALREADY_ISSUED")
			assertError(t, s.issue("00000000-0000-7000-8000-000000000000", "alice"), 404, "COUPON_NOT_FOUND")
			assertError(t, s.issue("not-a-uuid", "alice"), 400, "VALIDATION_FAILED")
			assertError(t, s.do("POST", "/api/coupons/"+id+"/issue", s.token("alice"), `{"userId":"bob"}`), 403, "FORBIDDEN")
			assertError(t, s.do("POST", "/api/coupons/"+id+"/issue", s.token("alice"), `{"count":2}`), 400, "VALIDATION_FAILED")
			assertError(t, s.issue(id, "dave", "Idempotency-Key", strings.Repeat("k", 256)), 400, "VALIDATION_FAILED")

			// An expired coupon, stored directly: the API refuses to create one.
			past := time.Now().Add(-time.Minute).UTC().Truncate(time.Microsecond)
			expired := coupon.Rebuild("0190a000-0000-7000-8000-00000000e001", "gone", 10, 5, 0, 0, past, past.Add(-time.Hour))
			if err := s.stores.Coupons.Create(context.Background(), expired); err != nil {
				t.Fatal(err)
			}
			assertError(t, s.issue(expired.ID(), "alice"), 409, "COUPON_EXPIRED")
			s.assertIssued(id, 2)
			s.assertIssued(expired.ID(), 0)
		})
	}
}

// TestIssue_StampedeOfDistinctUsersIssuesExactlyTheQuantity: 1,000 users race for 100 coupons;
// no early COUPON_ISSUE_FAILED, no 429, every other answer COUPON_SOLD_OUT.
func TestIssue_StampedeOfDistinctUsersIssuesExactlyTheQuantity(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			s := startServer(t, b)
			id := s.createCoupon(100)
			tokens := make([]string, 1000)
			for i := range tokens {
				tokens[i] = s.token(fmt.Sprintf("herd-%d", i))
			}
			counts, answers := fire(len(tokens), func(i int) response {
				return s.do("POST", "/api/coupons/"+id+"/issue", tokens[i], "")
			})
			t.Logf("statuses: %v", counts)
			for _, a := range answers {
				if a.status != http.StatusCreated && (a.status != http.StatusConflict || a.str("error") != "COUPON_SOLD_OUT") {
					t.Fatalf("unexpected answer %d %s (all: %v)", a.status, a.raw, counts)
				}
			}
			if counts[http.StatusCreated] != 100 {
				t.Fatalf("%d issued, want 100 (statuses %v)", counts[http.StatusCreated], counts)
			}
			s.assertIssued(id, 100)
		})
	}
}

// TestIssue_OneUserFiringFiftyGetsOne: 50 concurrent issues of one user, without and with
// distinct keys, give one coupon.
func TestIssue_OneUserFiringFiftyGetsOne(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			s := startServer(t, b)
			id := s.createCoupon(10)
			counts, answers := fire(50, func(i int) response {
				if i%2 == 0 {
					return s.issue(id, "clicker")
				}
				return s.issue(id, "clicker", "Idempotency-Key", fmt.Sprintf("%sclick-%d", s.run, i))
			})
			t.Logf("statuses: %v", counts)
			for _, a := range answers {
				if a.status != http.StatusCreated && (a.status != http.StatusConflict || a.str("error") != "ALREADY_ISSUED") {
					t.Fatalf("unexpected answer %d %s", a.status, a.raw)
				}
			}
			if counts[http.StatusCreated] != 1 {
				t.Fatalf("%d coupons issued to one user (statuses %v)", counts[http.StatusCreated], counts)
			}
			s.assertIssued(id, 1)
		})
	}
}

// TestCharge_LostAnswerIsReplayedFromTheDatabase: a charge committed but its answer never
// reached the Redis record. The retry with the same key, after the lease, is answered with the
// original 200 from the marker committed with the balance, and the balance moved once.
func TestCharge_LostAnswerIsReplayedFromTheDatabase(t *testing.T) {
	for _, b := range backends(t)[1:] {
		for _, loss := range answerLosses {
			t.Run(b.name+"/"+loss.name, func(t *testing.T) {
				t.Parallel()
				databaseURL, redisURL := b.provision(t)
				s := startServer(t, backend{name: b.name, databaseURL: databaseURL, redisURL: redisURL})
				s.createUser("lost-charge", 100)
				first := s.charge("lost-charge", "40", "k1")
				if first.status != http.StatusOK {
					t.Fatalf("charge: %d %s", first.status, first.raw)
				}
				record := idempotencyRecord("lost-charge", s.run+"k1")
				if err := loss.lose(context.Background(), redisClient(t, redisURL), record); err != nil {
					t.Fatalf("lose the answer in %s: %v", record, err)
				}
				retry := s.charge("lost-charge", "40", "k1")
				if retry.status != http.StatusOK || retry.header.Get("Idempotent-Replayed") != "true" || string(retry.raw) != string(first.raw) {
					t.Fatalf("retry: %d %s (replayed %q), want the first answer %s", retry.status, retry.raw,
						retry.header.Get("Idempotent-Replayed"), first.raw)
				}
				s.assertWallet("lost-charge", 140, 2)
			})
		}
	}
}

// TestCommerce_TwoInstancesShareOneCouponAndOneBalance: two servers on one database and one
// Redis split a coupon herd and a charge herd; their lanes meet on the Redis lock and the
// database, and the coupon sells exactly while every charge lands once.
func TestCommerce_TwoInstancesShareOneCouponAndOneBalance(t *testing.T) {
	for _, b := range backends(t)[1:] {
		t.Run(b.name, func(t *testing.T) {
			b.shareStorage(t)
			instances := []*server{startServer(t, b), startServer(t, b)}
			first := instances[0]

			couponID := first.createCoupon(50)
			counts, answers := fire(400, func(i int) response {
				return instances[i%2].issue(couponID, fmt.Sprintf("pair-%d", i))
			})
			for _, a := range answers {
				if a.status != http.StatusCreated && a.str("error") != "COUPON_SOLD_OUT" {
					t.Fatalf("unexpected answer %d %s (all: %v)", a.status, a.raw, counts)
				}
			}
			if counts[http.StatusCreated] != 50 {
				t.Fatalf("statuses %v", counts)
			}
			first.assertIssued(couponID, 50)

			first.createUser("shared", 0)
			counts, _ = fire(100, func(i int) response {
				return instances[i%2].charge("shared", "1000", fmt.Sprintf("pair-%d", i))
			})
			if counts[http.StatusOK] != 100 {
				t.Fatalf("statuses %v", counts)
			}
			first.assertWallet("shared", 100*1000, 101)
		})
	}
}
