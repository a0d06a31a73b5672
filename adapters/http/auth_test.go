package http_test

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	stdhttp "net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rhttp "github.com/rushgate/rushgate/adapters/http"
	"github.com/rushgate/rushgate/test/testkit"
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

// signedPayload signs payload, written out by hand so it can repeat a name, with HS256 and
// the server's own secret.
func signedPayload(payload string) string {
	enc := base64.RawURLEncoding
	unsigned := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc.EncodeToString([]byte(payload))
	mac := hmac.New(sha256.New, testSecret)
	mac.Write([]byte(unsigned))
	return unsigned + "." + enc.EncodeToString(mac.Sum(nil))
}

// swapPayload replaces the payload of a signed token, keeping its header and signature.
func swapPayload(token, payload string) string {
	parts := strings.Split(token, ".")
	parts[1] = base64.RawURLEncoding.EncodeToString([]byte(payload))
	return strings.Join(parts, ".")
}

// withSignature replaces the signature segment of a token.
func withSignature(token, signature string) string {
	return token[:strings.LastIndexByte(token, '.')+1] + signature
}

// badCredentials are Authorization headers the server must answer 401, each named. Every token
// but the forged ones is signed with the server's own secret, so only the claims or the
// algorithm are at fault.
func badCredentials(t *testing.T) []struct{ name, authorization string } {
	t.Helper()
	future := time.Now().Add(time.Hour).Unix()
	past := time.Now().Add(-time.Minute).Unix()
	hs256 := func(claims jwt.MapClaims) string {
		return "Bearer " + signed(t, jwt.SigningMethodHS256, claims, testSecret)
	}
	withSub := func(sub any) string { return hs256(jwt.MapClaims{"sub": sub, "role": "user", "exp": future}) }
	valid := jwt.MapClaims{"sub": "u1", "role": "user", "exp": future}
	forged, err := rhttp.NewTokens([]byte("a-different-secret-of-decent-length")).Mint("u1", rhttp.RoleAdmin, time.Hour)
	require.NoError(t, err)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	// Valid as it stands: the cases below spoil its signature only.
	signedByHand := signedPayload(fmt.Sprintf(`{"sub":"u1","role":"user","exp":%d}`, future))
	_, err = rhttp.NewTokens(testSecret).Verify(signedByHand)
	require.NoError(t, err)

	return []struct{ name, authorization string }{
		{"missing header", ""},
		{"wrong scheme", "Basic dTE6cGFzcw=="},
		{"bearer without token", "Bearer "},
		{"garbage", "Bearer not.a.jwt"},
		{"forged with another secret", "Bearer " + forged},
		{"alg none", "Bearer " + signed(t, jwt.SigningMethodNone, valid, jwt.UnsafeAllowNoneSignatureType)},
		{"RS256", "Bearer " + signed(t, jwt.SigningMethodRS256, valid, rsaKey)},
		{"HS512 with the right secret", "Bearer " + signed(t, jwt.SigningMethodHS512, valid, testSecret)},
		{"payload not an object", "Bearer " + signedPayload(`["sub","u1"]`)},
		{"claims going on after their object", "Bearer " + signedPayload(fmt.Sprintf(`{"sub":"u1","role":"user","exp":%d} {"role":"admin"}`, future))},
		{"payload swapped after signing", "Bearer " + swapPayload(signedPayload(fmt.Sprintf(`{"sub":"u1","role":"user","exp":%d}`, future)),
			fmt.Sprintf(`{"sub":"u1","role":"admin","exp":%d}`, future))},
		{"a fourth segment", "Bearer " + signedPayload(fmt.Sprintf(`{"sub":"u1","role":"user","exp":%d}`, future)) + ".e30"},
		{"signature cut short", "Bearer " + signedByHand[:len(signedByHand)-4]},
		{"signature padded", "Bearer " + signedByHand + "="},
		{"signature one byte longer", "Bearer " + signedByHand + "AA"},
		{"signature not base64url", "Bearer " + withSignature(signedByHand, strings.Repeat("+", 43))},
		{"signature empty", "Bearer " + withSignature(signedByHand, "")},

		{"expired", hs256(jwt.MapClaims{"sub": "u1", "role": "user", "exp": past})},
		{"no exp", hs256(jwt.MapClaims{"sub": "u1", "role": "user"})},
		{"exp as text", hs256(jwt.MapClaims{"sub": "u1", "role": "user", "exp": fmt.Sprint(future)})},
		{"only EXP", hs256(jwt.MapClaims{"sub": "u1", "role": "user", "EXP": future})},
		// Written out so EXP comes last, as encoding/json would let it override exp.
		{"expired exp, future EXP", "Bearer " + signedPayload(fmt.Sprintf(`{"sub":"u1","role":"user","exp":%d,"EXP":%d}`, past, future))},
		{"exp and Exp both valid", hs256(jwt.MapClaims{"sub": "u1", "role": "user", "exp": future, "Exp": future})},

		{"only SUB", hs256(jwt.MapClaims{"SUB": "u1", "role": "user", "exp": future})},
		{"sub and SUB", "Bearer " + signedPayload(fmt.Sprintf(`{"sub":"u1","SUB":"admin-1","role":"user","exp":%d}`, future))},
		{"sub repeated", "Bearer " + signedPayload(fmt.Sprintf(`{"sub":"u1","role":"user","exp":%d,"sub":"admin-1"}`, future))},
		{"no sub", hs256(jwt.MapClaims{"role": "user", "exp": future})},
		{"empty sub", withSub("")},
		{"sub of 256 bytes", withSub(strings.Repeat("u", 256))},
		{"sub one byte too long", withSub(strings.Repeat("u", 65))},
		{"sub with NUL", withSub("u1\x00admin")},
		{"sub with newline", withSub("u1\nadmin")},
		{"sub with DEL", withSub("u1\x7f")},
		{"sub with a space", withSub("u 1")},
		{"sub not ASCII", withSub("ü1")},
		{"sub a number", withSub(42)},

		{"role and ROLE", "Bearer " + signedPayload(fmt.Sprintf(`{"sub":"u1","role":"user","ROLE":"admin","exp":%d}`, future))},
		{"role and Role", hs256(jwt.MapClaims{"sub": "u1", "role": "user", "Role": "admin", "exp": future})},
		{"role repeated", "Bearer " + signedPayload(fmt.Sprintf(`{"sub":"u1","role":"user","role":"admin","exp":%d}`, future))},
		{"only ROLE", hs256(jwt.MapClaims{"sub": "u1", "ROLE": "admin", "exp": future})},
		{"no role", hs256(jwt.MapClaims{"sub": "u1", "exp": future})},
		{"unknown role", hs256(jwt.MapClaims{"sub": "u1", "role": "root", "exp": future})},
		{"role in upper case", hs256(jwt.MapClaims{"sub": "u1", "role": "ADMIN", "exp": future})},
		{"role a number", hs256(jwt.MapClaims{"sub": "u1", "role": 1, "exp": future})},
		{"role and ROLE under a kid", "Bearer " + withKid(t, jwt.MapClaims{"sub": "u1", "role": "user", "ROLE": "admin", "exp": future})},
		{"33 claims", hs256(manyClaims(jwt.MapClaims{"sub": "u1", "role": "user", "exp": future}, 30))},
	}
}

// withKid signs claims with the server's secret under a header carrying a kid, which
// golang-jwt's parser reads rather than the header rushgate mints.
func withKid(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	token := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
	token.Header["kid"] = "k1"
	raw, err := token.SignedString(testSecret)
	require.NoError(t, err)
	return raw
}

// manyClaims adds n claims named c0, c1, … to claims.
func manyClaims(claims jwt.MapClaims, n int) jwt.MapClaims {
	for i := range n {
		claims[fmt.Sprintf("c%d", i)] = i
	}
	return claims
}

// publicRoutes are the routes that need no token: the operational ones, the signed upload,
// which its URL's signature authorises (verifications_test.go covers its refusals), and the
// waiting page, whose token comes in its fragment and is exchanged by the page itself.
var publicRoutes = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true, "/openapi.yaml": true,
	"/uploads/:key": true, "/events/:eventId/waiting-room": true}

// authenticatedRoutes lists every route of the router but the public ones, so a route added
// later is covered without editing the test.
func authenticatedRoutes(router *gin.Engine) []gin.RouteInfo {
	var routes []gin.RouteInfo
	for _, r := range router.Routes() {
		if !publicRoutes[r.Path] {
			routes = append(routes, r)
		}
	}
	return routes
}

// concretePath fills a route template's parameters: crewId with crewID, any other with "x".
func concretePath(template, crewID string) string {
	segments := strings.Split(template, "/")
	for i, s := range segments {
		switch {
		case s == ":crewId":
			segments[i] = crewID
		case strings.HasPrefix(s, ":"), strings.HasPrefix(s, "*"):
			segments[i] = "x"
		}
	}
	return strings.Join(segments, "/")
}

func TestAuthentication_RefusesEveryBadCredentialOnEveryRoute(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	crewID := h.createCrew(3)
	routes := authenticatedRoutes(h.router)
	require.NotEmpty(t, routes)
	// A crew-creating body, so a credential wrongly taken for an admin's would show as a new crew.
	const body = `{"name":"intruders","maxMembers":3}`

	// The control: the routes are reachable as written, so a 401 below is the credential's.
	admin := h.token("admin-1", rhttp.RoleAdmin)
	for _, r := range routes {
		rec := h.do(call{method: r.Method, path: concretePath(r.Path, crewID), token: admin, idempotencyKey: "control"})
		require.NotEqual(t, stdhttp.StatusUnauthorized, rec.Code, "%s %s with a good token: %s", r.Method, r.Path, rec.Body)
		require.NotContains(t, rec.Body.String(), `"NOT_FOUND"`, "%s %s is not routed as written", r.Method, r.Path)
	}
	created := h.crews.created.Load()

	for _, bad := range badCredentials(t) {
		for _, r := range routes {
			t.Run(bad.name+"/"+r.Method+" "+r.Path, func(t *testing.T) {
				header := map[string]string{}
				if bad.authorization != "" {
					header["Authorization"] = bad.authorization
				}
				rec := h.do(call{method: r.Method, path: concretePath(r.Path, crewID), body: body,
					idempotencyKey: "k-" + bad.name, header: header})

				assertError(t, rec, stdhttp.StatusUnauthorized, "UNAUTHORIZED")
				assert.Contains(t, rec.Header().Get("WWW-Authenticate"), "Bearer")
			})
		}
	}
	assert.Equal(t, created, h.crews.created.Load(), "no refused credential created a crew")
}

// Every operator route — each /admin/ route, and crew creation — refuses a user's valid token
// with 403 and does nothing; a route added later is covered without editing the test.
func TestAuthorization_OperatorRoutesRefuseAUsersToken(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	crewID := h.createCrew(3)
	created := h.crews.created.Load()
	user := h.token("user-1", rhttp.RoleUser)
	checked := 0
	for _, r := range h.router.Routes() {
		if !strings.HasPrefix(r.Path, "/admin/") && (r.Method != stdhttp.MethodPost || r.Path != "/crews") {
			continue
		}
		checked++
		t.Run(r.Method+" "+r.Path, func(t *testing.T) {
			rec := h.do(call{method: r.Method, path: concretePath(r.Path, crewID), token: user,
				body: `{"name":"intruders","maxMembers":3}`, idempotencyKey: "k-user"})
			assertError(t, rec, stdhttp.StatusForbidden, "FORBIDDEN")
		})
	}
	require.GreaterOrEqual(t, checked, 10, "operator routes found")
	assert.Equal(t, created, h.crews.created.Load(), "a user's token created a crew")
}

func TestTokens_VerifyReadsExactClaimNames(t *testing.T) {
	t.Parallel()
	tokens := rhttp.NewTokens(testSecret)
	future := time.Now().Add(time.Hour).Unix()

	// Unknown claims, even ones resembling registered names, are ignored when no name repeats.
	raw := signed(t, jwt.SigningMethodHS256,
		jwt.MapClaims{"sub": "u1", "role": "user", "exp": future, "subject": "admin-1", "roles": "admin"}, testSecret)
	p, err := tokens.Verify(raw)

	require.NoError(t, err)
	assert.Equal(t, rhttp.Principal{UserID: "u1", Role: rhttp.RoleUser}, p)
}

func BenchmarkTokens_Verify(b *testing.B) {
	tokens := rhttp.NewTokens([]byte("bench-secret-bench-secret-bench-secret"))
	raw, err := tokens.Mint("load-run-12345", rhttp.RoleUser, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tokens.Verify(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTokens_VerifyFresh is the first check of a token the server has not seen, as each
// user's first request in a crowd is: the memory of verified tokens does not answer it.
func BenchmarkTokens_VerifyFresh(b *testing.B) {
	tokens := rhttp.NewTokens([]byte("bench-secret-bench-secret-bench-secret"))
	raw, err := tokens.Mint("load-run-12345", rhttp.RoleUser, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := rhttp.VerifyUnremembered(tokens, raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTokens_VerifyCrowd checks a crowd's tokens once each, as a crowd's first requests
// are: each check misses the memory of verified tokens and adds its token to it.
func BenchmarkTokens_VerifyCrowd(b *testing.B) {
	tokens := rhttp.NewTokens([]byte("bench-secret-bench-secret-bench-secret"))
	crowd := make([]string, 200_000)
	for i := range crowd {
		raw, err := tokens.Mint("load-run-"+strconv.Itoa(i), rhttp.RoleUser, time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		crowd[i] = raw
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := tokens.Verify(crowd[i%len(crowd)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// The first check of a token as Mint writes it reads its claims without the JSON decoder or
// golang-jwt's validator (they were a third of a fresh token's check): it allocates only the
// user id and the verified token it answers.
func TestTokens_VerifyReadsAFreshMintedTokenWithTwoAllocations(t *testing.T) {
	// Under the race detector sync.Pool drops about one Put in four, and a dropped HMAC state is
	// made again (about six allocations): an average of 3.5 a check, still far under the decoder's
	// 12.
	bound := 2.0
	if raceDetector {
		bound = 6
	}
	tokens := rhttp.NewTokens(testSecret)
	raw, err := tokens.Mint("load-run-12345", rhttp.RoleUser, time.Hour)
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(100, func() {
		p, _, err := rhttp.VerifyUnremembered(tokens, raw)
		if err != nil || p.UserID != "load-run-12345" {
			t.Fatalf("verify answered %+v, %v", p, err)
		}
	})
	assert.LessOrEqual(t, allocs, bound)
}

// signedWithKid signs payload, written out by hand, with HS256 and the server's secret under a
// header with a kid: golang-jwt's parser and the strict decoder read its claims, never the
// reading of claims as Mint writes them.
func signedWithKid(payload string) string {
	enc := base64.RawURLEncoding
	unsigned := enc.EncodeToString([]byte(`{"alg":"HS256","kid":"k1","typ":"JWT"}`)) + "." + enc.EncodeToString([]byte(payload))
	mac := hmac.New(sha256.New, testSecret)
	mac.Write([]byte(unsigned))
	return unsigned + "." + enc.EncodeToString(mac.Sum(nil))
}

// A payload under the header Mint writes, read without decoding when it is written as Mint
// writes claims, answers what the same payload answers under another header, read by
// golang-jwt's parser and the strict decoder: the same user, role and expiry, or a refusal,
// expired in both or in neither.
func FuzzTokens_VerifyReadsMintedClaimsAsTheDecoderDoes(f *testing.F) {
	future := time.Now().Add(time.Hour).Unix()
	past := time.Now().Add(-time.Minute).Unix()
	for _, payload := range []string{
		`{"role":"user","sub":"load-run-1","exp":%[1]d,"iat":%[2]d}`,
		`{"role":"admin","sub":"u1","exp":%[1]d}`,
		`{"role":"user","sub":"u1","exp":%[2]d,"iat":%[2]d}`, // expired
		`{"role":"root","sub":"u1","exp":%[1]d}`,
		`{"role":"user","sub":"","exp":%[1]d}`,
		`{"role":"user","sub":"a b","exp":%[1]d}`,
		`{"role":"user","sub":"a\"b","exp":%[1]d}`,
		`{"role":"user","sub":"a\u0041","exp":%[1]d}`,
		`{"role":"user","sub":"é","exp":%[1]d}`,
		`{"role":"user","sub":"a<b&c>","exp":%[1]d}`,
		`{"role":"user","sub":"u1","exp":0%[1]d}`,
		`{"role":"user","sub":"u1","exp":%[1]d.5}`,
		`{"role":"user","sub":"u1","exp":1%[1]d0000}`,
		`{"role":"user","sub":"u1","exp":"%[1]d"}`,
		`{"role":"user","sub":"u1","exp":%[1]d,"iat":01}`,
		`{"role":"user","sub":"u1","exp":%[1]d,"nbf":%[1]d}`,
		`{"role":"user","sub":"u1","exp":%[1]d,"role":"admin"}`,
		`{"role":"user","sub":"u1","exp":%[1]d,"ROLE":"admin"}`,
		`{"role":"user","sub":"u1","exp":%[1]d} `,
		`{"role":"user","sub":"u1","exp":%[1]d}{}`,
		`{"role":"user", "sub":"u1","exp":%[1]d}`,
		`{"sub":"u1","role":"user","exp":%[1]d}`,
		`{"role":"user","sub":"u1"}`,
	} {
		f.Add(fmt.Sprintf(payload, future, past))
	}
	tokens := rhttp.NewTokens(testSecret)
	f.Fuzz(func(t *testing.T, payload string) {
		minted, mintedExp, mintedErr := rhttp.VerifyUnremembered(tokens, signedPayload(payload))
		parsed, parsedExp, parsedErr := rhttp.VerifyUnremembered(tokens, signedWithKid(payload))
		if (mintedErr == nil) != (parsedErr == nil) {
			t.Fatalf("%s: under Mint's header %v, under another %v", payload, mintedErr, parsedErr)
		}
		assert.Equal(t, parsed, minted, payload)
		assert.True(t, parsedExp.Equal(mintedExp), "%s: expires %v and %v", payload, mintedExp, parsedExp)
		assert.Equal(t, errors.Is(parsedErr, jwt.ErrTokenExpired), errors.Is(mintedErr, jwt.ErrTokenExpired), payload)
	})
}

// A token rushgate signed and one with another header (read by golang-jwt's parser) answer the
// same: valid while fresh, jwt.ErrTokenExpired once expired (the 401 says so).
func TestTokens_VerifyReadsEveryHeaderAlike(t *testing.T) {
	t.Parallel()
	tokens := rhttp.NewTokens(testSecret)
	minted := func(claims jwt.MapClaims) string { return signed(t, jwt.SigningMethodHS256, claims, testSecret) }
	kid := func(claims jwt.MapClaims) string { return withKid(t, claims) }
	for name, sign := range map[string]func(jwt.MapClaims) string{"minted header": minted, "header with a kid": kid} {
		fresh := sign(jwt.MapClaims{"sub": "u1", "role": "admin", "exp": time.Now().Add(time.Hour).Unix()})
		p, err := tokens.Verify(fresh)
		require.NoError(t, err, name)
		assert.Equal(t, rhttp.Principal{UserID: "u1", Role: rhttp.RoleAdmin}, p, name)

		expired := sign(jwt.MapClaims{"sub": "u1", "role": "admin", "exp": time.Now().Add(-time.Minute).Unix()})
		_, err = tokens.Verify(expired)
		assert.ErrorIs(t, err, jwt.ErrTokenExpired, name)

		early := sign(jwt.MapClaims{"sub": "u1", "role": "admin", "exp": time.Now().Add(time.Hour).Unix(), "nbf": time.Now().Add(time.Minute).Unix()})
		_, err = tokens.Verify(early)
		assert.ErrorIs(t, err, jwt.ErrTokenNotValidYet, name)
	}
}

// The hand-signed payloads of badCredentials carry the header Mint writes, so they test the
// path that skips decoding it.
func TestTokens_MintWritesTheHeaderTheTestsSignWith(t *testing.T) {
	t.Parallel()
	raw, err := rhttp.NewTokens(testSecret).Mint("u1", rhttp.RoleUser, time.Hour)
	require.NoError(t, err)
	header, _, _ := strings.Cut(raw, ".")
	minted, _, _ := strings.Cut(signedPayload("{}"), ".")
	assert.Equal(t, minted, header)
}

// golang-jwt decodes the claims of a token with another header before it checks the signature:
// a forged token naming thousands of claims is refused on their count, before the check for
// repeated names could cost anything.
func TestTokens_VerifyRefusesAForgedFloodOfClaimsOnItsCount(t *testing.T) {
	t.Parallel()
	claims := manyClaims(jwt.MapClaims{"sub": "u1", "role": "user", "exp": time.Now().Add(time.Hour).Unix()}, 5000)
	token := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
	token.Header["kid"] = "k1"
	forged, err := token.SignedString([]byte("a-different-secret-of-decent-length"))
	require.NoError(t, err)

	_, err = rhttp.NewTokens(testSecret).Verify(forged)
	require.ErrorIs(t, err, jwt.ErrTokenMalformed)
	assert.ErrorContains(t, err, "more than 32 claims")
}

// Verify remembers the tokens it accepted; only the very token is answered from that memory.
// A copy with another payload under the same signature, or with the signature altered, is
// checked, and refused, as any token is.
func TestTokens_VerifyRefusesAlteredCopiesOfARememberedToken(t *testing.T) {
	t.Parallel()
	tokens := rhttp.NewTokens(testSecret)
	exp := time.Now().Add(time.Hour).Unix()
	raw := signedPayload(fmt.Sprintf(`{"sub":"u1","role":"user","exp":%d}`, exp))
	for range 2 { // the second Verify is answered from the memory
		p, err := tokens.Verify(raw)
		require.NoError(t, err)
		assert.Equal(t, rhttp.Principal{UserID: "u1", Role: rhttp.RoleUser}, p)
	}

	signature := strings.LastIndexByte(raw, '.') + 1
	otherFirst := "A"
	if raw[signature] == 'A' {
		otherFirst = "B"
	}
	altered := map[string]string{
		"another payload, same signature": swapPayload(raw, fmt.Sprintf(`{"sub":"u1","role":"admin","exp":%d}`, exp)),
		"another signature":               raw[:signature] + otherFirst + raw[signature+1:],
		"a byte appended":                 raw + "A",
	}
	for name, token := range altered {
		require.NotEqual(t, raw, token, name)
		_, err := tokens.Verify(token)
		assert.Error(t, err, name)
	}
}

// A remembered token is answered from memory only until its exp: then Verify refuses it as
// expired, as it refuses an expired token it never saw.
func TestTokens_VerifyRefusesARememberedTokenOnceExpired(t *testing.T) {
	t.Parallel()
	tokens := rhttp.NewTokens(testSecret)
	const ttl = 2 * time.Second
	raw, err := tokens.Mint("u1", rhttp.RoleUser, ttl)
	require.NoError(t, err)
	_, err = tokens.Verify(raw)
	require.NoError(t, err, "fresh")

	// exp is in whole seconds, at most ttl away; a token still accepted well after that was
	// answered from memory past its exp.
	testkit.Eventually(t, ttl+5*time.Second, "the remembered token refused as expired", func() error {
		if _, err := tokens.Verify(raw); !errors.Is(err, jwt.ErrTokenExpired) {
			return fmt.Errorf("Verify answered %w", err)
		}
		return nil
	})
}
