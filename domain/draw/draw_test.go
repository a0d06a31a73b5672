package draw_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/rushgate/rushgate/domain/draw"
)

// knownSeed is the bytes 0x00…0x1f; the expected values below were computed outside Go.
var knownSeed, _ = draw.ParseSeed("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")

// TestSeed_KnownAnswers: the hash and the tickets of a fixed seed, as any SHA-256 tool computes
// them over seed ‖ ":" ‖ userId.
func TestSeed_KnownAnswers(t *testing.T) {
	if got, want := knownSeed.Hash(), "630dcd2966c4336691125448bbb25b4ff412a49c732db2c8abc1b8581bd710dd"; got != want {
		t.Fatalf("seedHash = %s, want %s", got, want)
	}
	for user, want := range map[string]string{
		"alice": "6907912d4e84fcf8733429f5771d2aab4ab33e01343bc72faa7fdc859369a7c0",
		"bob":   "34868b385ca74657db4d14fd5ba5cadd03c0c813e11b975fb60958d3de3d5be6",
		"carol": "094d2f3ffaa997474abf7daa4825b52bf45e91964a710f398d2f56517aca87ce",
		"dave":  "f24b985f7ed8afe2d0659d1f132363f504d33d173f34366c6bf9a33d6e8170a2",
	} {
		if got := knownSeed.Ticket(user); got != want {
			t.Errorf("ticket(%s) = %s, want %s", user, got, want)
		}
	}
	var order []string
	for _, e := range draw.Order(knownSeed, []string{"alice", "bob", "carol", "dave"}) {
		order = append(order, e.UserID)
	}
	if got := strings.Join(order, ","); got != "carol,bob,alice,dave" {
		t.Fatalf("draw order = %s, want carol,bob,alice,dave", got)
	}
}

// TestOrder_RecomputedFromPublicDataAlone: what a draw publishes (seedHash before, seed after)
// and the entrants' ids are enough for anyone to check the commitment and recompute the order
// with nothing but SHA-256.
func TestOrder_RecomputedFromPublicDataAlone(t *testing.T) {
	seed, err := draw.RandomSeed()
	if err != nil {
		t.Fatal(err)
	}
	users := make([]string, 200)
	for i := range users {
		users[i] = fmt.Sprintf("user-%03d", i)
	}
	published := struct{ seedHash, seed string }{seed.Hash(), seed.Hex()}
	drawn := draw.Order(seed, users)

	raw, err := hex.DecodeString(published.seed)
	if err != nil || len(raw) != draw.SeedSize {
		t.Fatalf("published seed %q: %v", published.seed, err)
	}
	if sum := sha256.Sum256(raw); hex.EncodeToString(sum[:]) != published.seedHash {
		t.Fatal("the published seed does not match the published seedHash")
	}
	ticket := func(user string) string {
		sum := sha256.Sum256(append(append(bytes.Clone(raw), ':'), user...))
		return hex.EncodeToString(sum[:])
	}
	for i, e := range drawn {
		if e.Ticket != ticket(e.UserID) {
			t.Fatalf("%s's ticket %s, recomputed %s", e.UserID, e.Ticket, ticket(e.UserID))
		}
		if i > 0 && drawn[i-1].Ticket >= e.Ticket {
			t.Fatalf("not ascending at %d: %s then %s", i, drawn[i-1].Ticket, e.Ticket)
		}
	}
	if len(drawn) != len(users) {
		t.Fatalf("%d entrants drawn of %d", len(drawn), len(users))
	}
}

// TestSeed_NeverPrintedByAccident: fmt, slog and JSON show a placeholder; Hex is the one way
// to publish it.
func TestSeed_NeverPrintedByAccident(t *testing.T) {
	secret := knownSeed.Hex()
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("drawing", "seed", knownSeed)
	asJSON, err := json.Marshal(map[string]any{"seed": knownSeed})
	if err != nil {
		t.Fatal(err)
	}
	for name, shown := range map[string]string{
		"%v": fmt.Sprintf("%v", knownSeed), "%x": fmt.Sprintf("%x", knownSeed), "%+v": fmt.Sprintf("%+v", knownSeed),
		"%s": fmt.Sprintf("%s", knownSeed), "error": fmt.Errorf("draw %v", knownSeed).Error(),
		"slog": logged.String(), "json": string(asJSON),
	} {
		if strings.Contains(shown, secret) || strings.Contains(shown, "0001020304") {
			t.Errorf("%s shows the seed: %s", name, shown)
		}
	}
}

func TestParseSeed_RefusesWhatIsNotASeed(t *testing.T) {
	for _, bad := range []string{"", "zz", "0001", strings.Repeat("00", 33)} {
		if _, err := draw.ParseSeed(bad); err == nil {
			t.Errorf("ParseSeed(%q) accepted it", bad)
		}
	}
	again, err := draw.SeedFromBytes(knownSeed.Bytes())
	if err != nil || again != knownSeed {
		t.Fatalf("round trip through bytes: %v", err)
	}
}

// BenchmarkOrder_1M is the draw's ordering of 1,000,000 entrants (1.3 s on the 2-core
// development machine).
func BenchmarkOrder_1M(b *testing.B) {
	users := make([]string, 1000000)
	for i := range users {
		users[i] = fmt.Sprintf("user-%07d", i)
	}
	for b.Loop() {
		draw.Order(knownSeed, users)
	}
}

// TestOrderUsers_IsOrderWithoutTickets: both orders of one draw agree.
func TestOrderUsers_IsOrderWithoutTickets(t *testing.T) {
	users := make([]string, 500)
	for i := range users {
		users[i] = fmt.Sprint("user-", i)
	}
	entrants := draw.Order(knownSeed, users)
	ordered := draw.OrderUsers(knownSeed, users)
	for i, e := range entrants {
		if ordered[i] != e.UserID {
			t.Fatalf("place %d: %s, Order has %s", i, ordered[i], e.UserID)
		}
		if i > 0 && entrants[i-1].Ticket >= e.Ticket {
			t.Fatalf("tickets out of order at %d", i)
		}
	}
}

// BenchmarkOrderUsers orders a 100,000-user pre-queue: one hash per user, a sort of raw tickets.
func BenchmarkOrderUsers(b *testing.B) {
	users := make([]string, 100_000)
	for i := range users {
		users[i] = fmt.Sprint("user-", i)
	}
	b.ReportAllocs()
	for b.Loop() {
		draw.OrderUsers(knownSeed, users)
	}
}
