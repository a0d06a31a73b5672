package porttest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rushgate/rushgate/domain/challenge"
	"github.com/rushgate/rushgate/ports"
)

// TestChallengeRepositories checks ports.ChallengeRepository, ports.UploadSessionRepository and
// ports.VerificationRepository: round trips and not-found errors; GetForUpdate outside a
// transaction fails; Complete moves a PENDING session once; Add's two unique keys answer
// ALREADY_VERIFIED and SESSION_ALREADY_USED, also to the losers of a race, and an unknown
// challenge is CHALLENGE_NOT_FOUND; List pages in id order, per user or for all; Expire changes
// only PENDING sessions strictly before its time, at most limit, each once when two callers
// race, and never one a transaction completed while holding its lock.
func TestChallengeRepositories(t *testing.T, newStores func(t *testing.T) ports.Stores, caps Capabilities) {
	run(t, newStores, caps, []testCase[ports.Stores]{
		{"Challenge/CreateThenGetRoundTrips", testChallengeRoundTrip},
		{"Challenge/GetForUpdateOutsideTxFails", testChallengeGetForUpdateOutsideTx},
		{"Session/CreateThenGetRoundTrips", testSessionRoundTrip},
		{"Session/CompleteOnlyOnce", testSessionCompleteOnce},
		{"Verification/UniqueKeysNameTheDuplicate", testVerificationUniqueKeys},
		{"Verification/ConcurrentAddsOfOneUserOneWins", testVerificationConcurrentAdds},
		{"Verification/ListPagesPerUserOrAll", testVerificationList},
		{"Session/Expire", testSessionExpire},
	})
}

func newChallenge(t *testing.T, s ports.Stores) challenge.Challenge {
	t.Helper()
	c, err := challenge.NewChallenge(randomID(), "", "contract challenge", now().Add(time.Hour), now())
	must(t, err, "new challenge")
	must(t, s.Challenges.Create(context.Background(), c), "create challenge")
	return c
}

func newSession(t *testing.T, s ports.Stores, userID string, requestedAt time.Time) challenge.UploadSession {
	t.Helper()
	file := challenge.DeclaredFile{Name: "a.png", ContentType: "image/png", Size: 42}
	session, err := challenge.OpenSession(randomID(), userID, file, challenge.FileRules{}, strings.ToLower(randomID()), requestedAt)
	must(t, err, "open session")
	must(t, s.UploadSessions.Create(context.Background(), session), "create session")
	return session
}

// verify is the verification of session for c.
func verify(t *testing.T, session challenge.UploadSession, c challenge.Challenge) challenge.Verification {
	t.Helper()
	v, err := challenge.Verify(randomID(), session, c)
	must(t, err, "verify")
	return v
}

func testChallengeRoundTrip(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	c, err := challenge.NewChallenge(randomID(), "0190a0b0-0000-7000-8000-000000000001", "with crew", now().Add(time.Minute), now())
	must(t, err, "new challenge")
	must(t, e.impl.Challenges.Create(ctx, c), "create")
	got, err := e.impl.Challenges.Get(ctx, c.ID())
	must(t, err, "get")
	expectEqual(t, got, c, "challenge read back")
	_, err = e.impl.Challenges.Get(ctx, randomID())
	expectIs(t, err, challenge.ErrNotFound, "unknown challenge")
	must(t, e.impl.Tx.InTx(ctx, func(ctx context.Context) error {
		locked, err := e.impl.Challenges.GetForUpdate(ctx, c.ID())
		expectEqual(t, locked, c, "challenge read for update")
		if err != nil {
			return err
		}
		_, err = e.impl.Challenges.GetForUpdate(ctx, randomID())
		expectIs(t, err, challenge.ErrNotFound, "unknown challenge for update")
		return nil
	}), "tx")
}

func testChallengeGetForUpdateOutsideTx(t *testing.T, e env[ports.Stores]) {
	c := newChallenge(t, e.impl)
	if _, err := e.impl.Challenges.GetForUpdate(context.Background(), c.ID()); err == nil {
		t.Error("GetForUpdate outside InTx succeeded")
	}
	if _, err := e.impl.UploadSessions.GetForUpdate(context.Background(), randomID()); err == nil || errors.Is(err, challenge.ErrInvalidSession) {
		t.Errorf("session GetForUpdate outside InTx: %v, want a failure that is not a missing session", err)
	}
}

func testSessionRoundTrip(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	s := newSession(t, e.impl, newUserID(), now())
	got, err := e.impl.UploadSessions.Get(ctx, s.ID())
	must(t, err, "get")
	expectEqual(t, got, s, "session read back")
	_, err = e.impl.UploadSessions.Get(ctx, randomID())
	expectIs(t, err, challenge.ErrInvalidSession, "unknown session")
}

func testSessionCompleteOnce(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	s := newSession(t, e.impl, newUserID(), now())
	errs := startTogether(10, func(int) error {
		return e.impl.Tx.InTx(ctx, func(ctx context.Context) error { return e.impl.UploadSessions.Complete(ctx, s.ID()) })
	})
	expectOneWinner(t, errs, challenge.ErrSessionAlreadyUsed)
	got, err := e.impl.UploadSessions.Get(ctx, s.ID())
	must(t, err, "get")
	expectEqual(t, got.Status(), challenge.SessionCompleted, "status")
}

func testVerificationUniqueKeys(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	c, other := newChallenge(t, e.impl), newChallenge(t, e.impl)
	user := newUserID()
	first := newSession(t, e.impl, user, now())
	must(t, e.impl.Verifications.Add(ctx, verify(t, first, c)), "first add")
	second := newSession(t, e.impl, user, now())
	expectIs(t, e.impl.Verifications.Add(ctx, verify(t, second, c)), challenge.ErrAlreadyVerified, "another session, same user and challenge")
	expectIs(t, e.impl.Verifications.Add(ctx, verify(t, first, other)), challenge.ErrSessionAlreadyUsed, "same session, another challenge")
	unknown := challenge.RebuildChallenge(randomID(), "", c.Title(), c.Deadline(), c.CreatedAt())
	expectIs(t, e.impl.Verifications.Add(ctx, verify(t, second, unknown)), challenge.ErrNotFound, "unknown challenge")
	page, err := e.impl.Verifications.List(ctx, c.ID(), "", "", 10)
	must(t, err, "list")
	expectEqual(t, len(page), 1, "verifications stored")
}

func testVerificationConcurrentAdds(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	c := newChallenge(t, e.impl)
	user := newUserID()
	sessions := make([]challenge.UploadSession, 20)
	for i := range sessions {
		sessions[i] = newSession(t, e.impl, user, now())
	}
	errs := startTogether(len(sessions), func(i int) error {
		return e.impl.Tx.InTx(ctx, func(ctx context.Context) error {
			return e.impl.Verifications.Add(ctx, verify(t, sessions[i], c))
		})
	})
	expectOneWinner(t, errs, challenge.ErrAlreadyVerified)
	page, err := e.impl.Verifications.List(ctx, c.ID(), user, "", 100)
	must(t, err, "list")
	expectEqual(t, len(page), 1, "verifications stored")
}

func testVerificationList(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	c := newChallenge(t, e.impl)
	var all []challenge.Verification
	for range 5 {
		v := verify(t, newSession(t, e.impl, newUserID(), now()), c)
		must(t, e.impl.Verifications.Add(ctx, v), "add")
		all = append(all, v)
	}
	slices.SortFunc(all, func(a, b challenge.Verification) int { return compareStrings(a.ID(), b.ID()) })
	first, err := e.impl.Verifications.List(ctx, c.ID(), "", "", 2)
	must(t, err, "page 1")
	rest, err := e.impl.Verifications.List(ctx, c.ID(), "", first[len(first)-1].ID(), 10)
	must(t, err, "page 2")
	if got := append(first, rest...); !slices.Equal(got, all) {
		t.Errorf("pages %v, want %v", got, all)
	}
	mine, err := e.impl.Verifications.List(ctx, c.ID(), all[3].UserID(), "", 10)
	must(t, err, "one user's")
	if !slices.Equal(mine, all[3:4]) {
		t.Errorf("one user's: %v, want %v", mine, all[3:4])
	}
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// testSessionExpire runs its steps in sequence in eras long past, each before the previous one's
// leftovers, so no session of another step or case is old enough to be expired by a step.
func testSessionExpire(t *testing.T, e env[ports.Stores]) {
	ctx := context.Background()
	expire := func(before time.Time, limit int) int {
		var n int
		must(t, e.impl.Tx.InTx(ctx, func(ctx context.Context) error {
			var err error
			n, err = e.impl.UploadSessions.Expire(ctx, before, limit)
			return err
		}), "expire")
		return n
	}
	status := func(id string) challenge.SessionStatus {
		s, err := e.impl.UploadSessions.Get(ctx, id)
		must(t, err, "get")
		return s.Status()
	}

	t.Run("StrictlyBeforeAndPendingOnly", func(t *testing.T) {
		cut := time.Date(2014, 1, 1, 0, 0, 0, 0, time.UTC)
		at := newSession(t, e.impl, newUserID(), cut)
		past := newSession(t, e.impl, newUserID(), cut.Add(-time.Microsecond))
		done := newSession(t, e.impl, newUserID(), cut.Add(-time.Hour))
		must(t, e.impl.Tx.InTx(ctx, func(ctx context.Context) error { return e.impl.UploadSessions.Complete(ctx, done.ID()) }), "complete")
		expectEqual(t, expire(cut, 100), 1, "expired")
		expectEqual(t, status(at.ID()), challenge.SessionPending, "session exactly at the cut")
		expectEqual(t, status(past.ID()), challenge.SessionExpired, "session just before the cut")
		expectEqual(t, status(done.ID()), challenge.SessionCompleted, "completed session")
		expectEqual(t, expire(cut, 100), 0, "second round")
	})
	t.Run("AtMostLimitOldestFirst", func(t *testing.T) {
		cut := time.Date(2013, 1, 1, 0, 0, 0, 0, time.UTC)
		older := newSession(t, e.impl, newUserID(), cut.Add(-2*time.Hour))
		newer := newSession(t, e.impl, newUserID(), cut.Add(-time.Hour))
		expectEqual(t, expire(cut, 1), 1, "first round")
		expectEqual(t, status(older.ID()), challenge.SessionExpired, "older")
		expectEqual(t, status(newer.ID()), challenge.SessionPending, "newer")
		expectEqual(t, expire(cut, 1), 1, "second round")
	})
	t.Run("TwoCallersExpireEachOnce", func(t *testing.T) {
		cut := time.Date(2012, 1, 1, 0, 0, 0, 0, time.UTC)
		const n = 60
		for i := range n {
			newSession(t, e.impl, newUserID(), cut.Add(-time.Duration(i+1)*time.Second))
		}
		totals := make([]int, 2)
		errs := startTogether(2, func(w int) error {
			for {
				var got int
				err := e.impl.Tx.InTx(ctx, func(ctx context.Context) error {
					var err error
					got, err = e.impl.UploadSessions.Expire(ctx, cut, 7)
					return err
				})
				if err != nil {
					return err
				}
				totals[w] += got
				if got == 0 {
					return nil
				}
			}
		})
		for _, err := range errs {
			must(t, err, "expire")
		}
		expectEqual(t, totals[0]+totals[1], n, "sessions expired by both callers together")
	})
	t.Run("NeverBothCompletedAndExpired", func(t *testing.T) {
		cut := time.Date(2011, 1, 1, 0, 0, 0, 0, time.UTC)
		s := newSession(t, e.impl, newUserID(), cut.Add(-time.Hour))
		type outcome struct {
			n   int
			err error
		}
		expired := make(chan outcome, 1)
		started := false
		completeErr := e.impl.Tx.InTx(ctx, func(ctx context.Context) error {
			if _, err := e.impl.UploadSessions.GetForUpdate(ctx, s.ID()); err != nil {
				return err
			}
			if !started {
				started = true
				go func() {
					var o outcome
					// A transaction of its own: not the one ctx carries here.
					o.err = e.impl.Tx.InTx(context.Background(), func(ctx context.Context) error {
						var err error
						o.n, err = e.impl.UploadSessions.Expire(ctx, cut, 10)
						return err
					})
					expired <- o
				}()
				// Give the expiry a moment to reach the locked row: it skips it, waits for it,
				// or deadlocks with this transaction, and the database picks a victim to rerun.
				time.Sleep(50 * time.Millisecond)
			}
			return e.impl.UploadSessions.Complete(ctx, s.ID())
		})
		o := <-expired
		must(t, o.err, "expire")
		final := status(s.ID())
		switch {
		case completeErr == nil:
			expectEqual(t, o.n, 0, "sessions expired after the transaction completed the one it locked")
			expectEqual(t, final, challenge.SessionCompleted, "status")
		case errors.Is(completeErr, challenge.ErrSessionAlreadyUsed):
			expectEqual(t, o.n, 1, "sessions expired")
			expectEqual(t, final, challenge.SessionExpired, "status")
		default:
			t.Fatalf("complete under lock: %v", completeErr)
		}
	})
}
