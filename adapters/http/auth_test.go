package http_test

import (
	stdhttp "net/http"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rhttp "github.com/rushgate/rushgate/adapters/http"
)

func TestTokens_MintAndVerifyRoundTrip(t *testing.T) {
	t.Parallel()
	tokens := rhttp.NewTokens(testSecret)

	for _, role := range []rhttp.Role{rhttp.RoleUser, rhttp.RoleAdmin} {
		raw, err := tokens.Mint("user-42", role, time.Minute)
		require.NoError(t, err)
		p, err := tokens.Verify(raw)
		require.NoError(t, err)
		assert.Equal(t, rhttp.Principal{UserID: "user-42", Role: role}, p)
	}
}

func TestTokens_MintRejectsBadInput(t *testing.T) {
	t.Parallel()
	tokens := rhttp.NewTokens(testSecret)

	_, err := tokens.Mint("", rhttp.RoleUser, time.Minute)
	assert.Error(t, err, "empty user")
	_, err = tokens.Mint("has space", rhttp.RoleUser, time.Minute)
	assert.Error(t, err, "user with a space")
	_, err = tokens.Mint("u1", rhttp.Role("root"), time.Minute)
	assert.Error(t, err, "unknown role")
	_, err = tokens.Mint("u1", rhttp.RoleUser, 0)
	assert.Error(t, err, "zero ttl")
}

func TestNewTokens_PanicsOnEmptySecret(t *testing.T) {
	t.Parallel()
	assert.Panics(t, func() { rhttp.NewTokens(nil) })
}

// signed returns a token with claims signed by method and key.
func signed(t *testing.T, method jwt.SigningMethod, claims jwt.MapClaims, key any) string {
	t.Helper()
	raw, err := jwt.NewWithClaims(method, claims).SignedString(key)
	require.NoError(t, err)
	return raw
}

func TestAuthentication_RejectsBadCredentials(t *testing.T) {
	t.Parallel()
	future := time.Now().Add(time.Hour).Unix()
	valid := jwt.MapClaims{"sub": "u1", "role": "user", "exp": future}
	otherTokens := rhttp.NewTokens([]byte("a-different-secret-of-decent-length"))
	forged, err := otherTokens.Mint("u1", rhttp.RoleUser, time.Hour)
	require.NoError(t, err)

	cases := []struct {
		name          string
		authorization string // the whole header; empty sends none
	}{
		{"missing header", ""},
		{"wrong scheme", "Basic dTE6cGFzcw=="},
		{"bearer without token", "Bearer "},
		{"garbage", "Bearer not.a.jwt"},
		{"forged with another secret", "Bearer " + forged},
		{"alg none", "Bearer " + signed(t, jwt.SigningMethodNone, valid, jwt.UnsafeAllowNoneSignatureType)},
		{"HS512 with the right secret", "Bearer " + signed(t, jwt.SigningMethodHS512, valid, testSecret)},
		{"expired", "Bearer " + signed(t, jwt.SigningMethodHS256,
			jwt.MapClaims{"sub": "u1", "role": "user", "exp": time.Now().Add(-time.Minute).Unix()}, testSecret)},
		{"no exp", "Bearer " + signed(t, jwt.SigningMethodHS256, jwt.MapClaims{"sub": "u1", "role": "user"}, testSecret)},
		{"no sub", "Bearer " + signed(t, jwt.SigningMethodHS256, jwt.MapClaims{"role": "user", "exp": future}, testSecret)},
		{"unknown role", "Bearer " + signed(t, jwt.SigningMethodHS256,
			jwt.MapClaims{"sub": "u1", "role": "root", "exp": future}, testSecret)},
		{"no role", "Bearer " + signed(t, jwt.SigningMethodHS256, jwt.MapClaims{"sub": "u1", "exp": future}, testSecret)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessConfig{})
			crewID := h.createCrew(3)
			header := map[string]string{}
			if tc.authorization != "" {
				header["Authorization"] = tc.authorization
			}

			rec := h.do(call{method: "POST", path: "/crews/" + crewID + "/join", idempotencyKey: "k1", header: header})

			assertError(t, rec, stdhttp.StatusUnauthorized, "UNAUTHORIZED")
			assert.Contains(t, rec.Header().Get("WWW-Authenticate"), "Bearer")
			h.assertSeats(crewID, 0)

			create := h.do(call{method: "POST", path: "/crews", body: `{"name":"a","maxMembers":3}`, header: header})
			assertError(t, create, stdhttp.StatusUnauthorized, "UNAUTHORIZED")
			assert.Equal(t, int64(1), h.crews.created.Load(), "only the setup crew exists")
		})
	}
}

func TestAuthentication_ProtectsEveryCrewRoute(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	crewID := h.createCrew(3)

	for _, r := range []struct{ method, path string }{
		{"POST", "/crews"},
		{"GET", "/crews/" + crewID},
		{"GET", "/crews/" + crewID + "/members"},
		{"POST", "/crews/" + crewID + "/join"},
		{"DELETE", "/crews/" + crewID + "/members/me"},
	} {
		rec := h.do(call{method: r.method, path: r.path})
		assertError(t, rec, stdhttp.StatusUnauthorized, "UNAUTHORIZED")
	}
}
