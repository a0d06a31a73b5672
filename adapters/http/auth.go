package http

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/golang-jwt/jwt/v5"

	"github.com/rushgate/rushgate/domain"
)

// Role is what an authenticated user may do.
type Role string

// Roles a token can carry.
const (
	RoleUser  Role = "user"
	RoleAdmin Role = "admin"
)

func (r Role) valid() bool { return r == RoleUser || r == RoleAdmin }

// Principal is the authenticated caller.
type Principal struct {
	UserID string
	Role   Role
}

// Tokens mints and verifies HS256 JWTs: sub is the user id, role is user or admin, exp is
// required.
type Tokens struct {
	secret    []byte
	key       any    // the secret, boxed once: golang-jwt takes it as an any
	header    string // the header segment of every token Mint signs
	parser    *jwt.Parser
	validator *jwt.Validator
	// macs holds *macState values keyed with the secret, reset before each use: keying one
	// (golang-jwt does it per token) cost a quarter of a verify.
	macs sync.Pool
	// verified remembers the tokens Verify accepted lately.
	verified verifiedTokens
	// eventSessions keeps the sessions' Tokens (event id → *Tokens) of up to keptSessionEvents
	// events, from the first session of each that was accepted: built for each request, they
	// cost a key derivation and a parser, and remembered none of the sessions they verified.
	eventSessions     sync.Map
	keptEventSessions atomic.Int32
}

// macState is an HMAC-SHA256 keyed with the secret, the buffer its sums go to, and room for a
// token's bytes: the hash takes a []byte, and a token converted for it was an allocation.
type macState struct {
	mac   hash.Hash
	sum   [sha256.Size]byte
	token []byte
}

// maxPooledToken bounds the token bytes a pooled macState keeps room for: a longer token (a
// header may carry far more than any token rushgate signs) is converted for its check alone.
const maxPooledToken = 1024

// NewTokens returns Tokens signing with secret. An empty secret would make every token forgeable,
// so it panics; configuration must supply or generate one.
func NewTokens(secret []byte) *Tokens {
	if len(secret) == 0 {
		panic("http: NewTokens: empty JWT secret")
	}
	secret = append([]byte(nil), secret...)
	unsigned, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{}).SigningString()
	if err != nil {
		panic(fmt.Sprintf("http: NewTokens: %v", err)) // an empty claim set always encodes
	}
	header, _, _ := strings.Cut(unsigned, ".")
	return &Tokens{
		secret: secret,
		key:    secret,
		header: header,
		parser: jwt.NewParser(
			jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
			jwt.WithExpirationRequired(),
		),
		validator: jwt.NewValidator(jwt.WithExpirationRequired()),
		macs:      sync.Pool{New: func() any { return &macState{mac: hmac.New(sha256.New, secret)} }},
	}
}

type claims struct {
	Role Role `json:"role"`
	jwt.RegisteredClaims
}

// Mint returns a signed token for userID with role, expiring after ttl.
func (t *Tokens) Mint(userID string, role Role, ttl time.Duration) (string, error) {
	if ttl <= 0 {
		return "", fmt.Errorf("mint token: ttl must be positive, got %s", ttl)
	}
	now := time.Now()
	return t.mintUntil(userID, role, now, now.Add(ttl))
}

// mintUntil returns a signed token for userID with role, issued at now and expiring at expiresAt.
func (t *Tokens) mintUntil(userID string, role Role, now, expiresAt time.Time) (string, error) {
	if err := domain.ValidateUserID("sub", userID); err != nil {
		return "", fmt.Errorf("mint token: %w", err)
	}
	if !role.valid() {
		return "", fmt.Errorf("mint token: unknown role %q", role)
	}
	token := jwt.NewWithClaims(jwt.SigningMethodHS256, claims{
		Role: role,
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   userID,
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(expiresAt),
		},
	})
	signed, err := token.SignedString(t.key)
	if err != nil {
		return "", fmt.Errorf("mint token: %w", err)
	}
	return signed, nil
}

// Verify checks raw's HS256 signature (any other algorithm, including "none", is rejected), its
// expiry, and that it names a valid user and role. A token it accepted lately is answered from
// verifiedTokens until it expires.
func (t *Tokens) Verify(raw string) (Principal, error) {
	v, err := t.verifyUntil(raw, true)
	if err != nil {
		return Principal{}, err
	}
	return v.principal, nil
}

// verifyUntil is Verify that also answers when the token expires; a token it accepts goes into
// verifiedTokens only when remember is set. The answer is shared with verifiedTokens, read-only:
// a request of a remembered token stores it as its credential without a copy.
func (t *Tokens) verifyUntil(raw string, remember bool) (*verifiedToken, error) {
	now := time.Now()
	if v, ok := t.verified.lookup(raw, now); ok {
		return v, nil
	}
	c, err := t.verify(raw, now)
	if err != nil {
		return nil, fmt.Errorf("verify token: %w", err)
	}
	if err := domain.ValidateUserID("sub", c.sub); err != nil {
		return nil, fmt.Errorf("verify token: %w", err)
	}
	if !c.role.valid() {
		return nil, fmt.Errorf("verify token: unknown role %q", c.role)
	}
	// exp is required, and nbf, if any, has passed: the token stays valid until exp.
	v := &verifiedToken{principal: Principal{UserID: c.sub, Role: c.role}, expires: c.expires}
	if remember {
		t.verified.remember(raw, v, now)
	}
	return v, nil
}

// verifiedTokens remembers the principal and expiry of each token Verify accepted lately, keyed
// by the whole token: a waiting crowd polls every few seconds with the same token, and its
// signature check and claims decoding were most of what a poll's authentication cost. Only a
// token identical byte for byte to one that passed every check is answered from it, and only
// before its exp (an expired one goes through the checks again, which say why it is refused).
// It holds at most two generations of verifiedGeneration tokens, split over shards so that
// concurrent requests rarely share a lock: when a shard's current generation is full it
// becomes the previous one and the older is dropped, so the tokens in use stay (a hit in the
// previous generation moves to the current one) and the memory is bounded (a token and its
// entry are about 300 bytes).
type verifiedTokens struct {
	shards [verifiedShards]verifiedShard
}

const (
	verifiedShards     = 16
	verifiedGeneration = 1 << 16
)

type verifiedShard struct {
	mu                sync.Mutex
	current, previous map[string]*verifiedToken
}

type verifiedToken struct {
	principal Principal
	expires   time.Time
}

// shard picks raw's shard by its last byte, a character of the signature: base64url of a MAC,
// spread evenly.
func (v *verifiedTokens) shard(raw string) *verifiedShard {
	return &v.shards[int(raw[len(raw)-1])%verifiedShards]
}

// lookup answers raw's principal and expiry if raw was verified and has not expired at now.
func (v *verifiedTokens) lookup(raw string, now time.Time) (*verifiedToken, bool) {
	if raw == "" {
		return nil, false
	}
	s := v.shard(raw)
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.current[raw]
	if !ok {
		if e, ok = s.previous[raw]; ok {
			delete(s.previous, raw)
			s.putLocked(raw, e)
		}
	}
	if !ok || !now.Before(e.expires) {
		return nil, false
	}
	return e, true
}

// remember keeps raw, verified at now as e, until e expires.
func (v *verifiedTokens) remember(raw string, e *verifiedToken, now time.Time) {
	if !now.Before(e.expires) {
		return
	}
	s := v.shard(raw)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.putLocked(raw, e)
}

func (s *verifiedShard) putLocked(raw string, e *verifiedToken) {
	if len(s.current) >= verifiedGeneration/verifiedShards {
		s.previous, s.current = s.current, nil
	}
	if s.current == nil {
		// Made at its full size (about 210 KiB a shard): a crowd's new tokens fill it, and
		// growing it rehashed them all, a fifth of a new token's check.
		s.current = make(map[string]*verifiedToken, verifiedGeneration/verifiedShards)
	}
	s.current[raw] = e
}

// sessionLabel separates the key of waiting-room sessions from the secret it is derived from.
const sessionLabel = "rushgate waiting-room session\x00"

// sessions returns the Tokens of eventID's waiting-room sessions: their key is the
// HMAC of the event under the secret, so a session passes only as the session of its own event,
// and neither a bearer token nor a session passes as the other.
func (t *Tokens) sessions(eventID string) *Tokens {
	if kept, ok := t.eventSessions.Load(eventID); ok {
		return kept.(*Tokens)
	}
	mac := hmac.New(sha256.New, t.secret)
	mac.Write([]byte(sessionLabel))
	mac.Write([]byte(eventID))
	return NewTokens(mac.Sum(nil))
}

// keptSessionEvents bounds the events whose sessions' Tokens are kept: any path can name an
// event, and a user can have sessions minted for made-up ones. Past it, an event's sessions
// are checked as before, with Tokens built for the request.
const keptSessionEvents = 1024

// keepSessions keeps sessions, eventID's sessions' Tokens, after one of its sessions was
// accepted, unless keptSessionEvents are kept already.
func (t *Tokens) keepSessions(eventID string, sessions *Tokens) {
	if t.keptEventSessions.Load() >= keptSessionEvents {
		return
	}
	// A copy of the id: the parameter is a slice of the request's path.
	if _, loaded := t.eventSessions.LoadOrStore(strings.Clone(eventID), sessions); !loaded {
		t.keptEventSessions.Add(1)
	}
}

// tokenClaims are what Verify keeps of a token's claims.
type tokenClaims struct {
	sub     string
	role    Role
	expires time.Time
}

// verify checks raw's signature and registered claims at now and reads its claims. A token
// carrying the header Mint writes — every token rushgate signs — is checked without decoding
// that header, known byte for byte (it was a fifth of a request's CPU): the HS256 check of the
// signature (as golang-jwt's, with a pooled HMAC state), then the claims, then golang-jwt's
// validator, the steps its parser takes; claims as Mint writes them are read without either
// (mintedClaims). Any other header goes through golang-jwt's parser, which refuses every
// algorithm but HS256.
func (t *Tokens) verify(raw string, now time.Time) (tokenClaims, error) {
	header, rest, _ := strings.Cut(raw, ".")
	payload, signature, ok := strings.Cut(rest, ".")
	if header != t.header || !ok || strings.Contains(signature, ".") {
		var c verifiedClaims
		if _, err := t.parser.ParseWithClaims(raw, &c, t.keyOf); err != nil {
			return tokenClaims{}, err
		}
		return c.kept(), nil
	}
	state := t.macs.Get().(*macState)
	defer t.macs.Put(state)
	var token []byte
	if len(raw) <= maxPooledToken {
		state.token = append(state.token[:0], raw...)
		token = state.token
	} else {
		token = []byte(raw)
	}
	if !state.signs(token[:len(header)+1+len(payload)], token[len(raw)-len(signature):]) {
		return tokenClaims{}, fmt.Errorf("%w: %w", jwt.ErrTokenSignatureInvalid, jwt.ErrSignatureInvalid)
	}
	encoded := token[len(header)+1 : len(header)+1+len(payload)]
	if c, ok := mintedClaims(encoded, now); ok {
		return c, nil
	}
	claims, err := t.parser.DecodeSegment(payload)
	if err != nil {
		return tokenClaims{}, fmt.Errorf("%w: %w", jwt.ErrTokenMalformed, err)
	}
	var c verifiedClaims
	if err := unmarshalStrict(claims, &c); err != nil {
		return tokenClaims{}, fmt.Errorf("%w: %w", jwt.ErrTokenMalformed, err)
	}
	if err := t.validator.Validate(&c); err != nil {
		return tokenClaims{}, err
	}
	return c.kept(), nil
}

// signs reports whether signature, base64url without padding as golang-jwt's parser reads it,
// is the HMAC-SHA256 of signed under the secret the state is keyed with.
func (state *macState) signs(signed, signature []byte) bool {
	var want [sha256.Size]byte
	if base64.RawURLEncoding.DecodedLen(len(signature)) != len(want) {
		return false
	}
	if n, err := base64.RawURLEncoding.Decode(want[:], signature); err != nil || n != len(want) {
		return false
	}
	state.mac.Reset()
	state.mac.Write(signed)
	return hmac.Equal(state.mac.Sum(state.sum[:0]), want[:])
}

// maxMintedClaims bounds the decoded claims mintedClaims reads: Mint's, with a user id of
// domain.MaxUserIDLength, take well under it.
const maxMintedClaims = 512

// mintedClaims reads encoded, a token's base64url payload, when it decodes byte for byte to
// claims as Mint writes them, {"role":"…","sub":"…","exp":…,"iat":…} (iat optional), with a
// known role, a sub of printable ASCII that JSON writes without escapes, and whole seconds of
// at most 15 digits (exact as a float, as golang-jwt reads a NumericDate), and the token has
// not expired at now. Such a token's claims are read with no allocation but the sub; the
// answer is what the strict decoder and golang-jwt's validator answer for it. Any other payload
// (another order, spacing, escapes, nbf, an expired token) is not ok, and is read by them.
func mintedClaims(encoded []byte, now time.Time) (tokenClaims, bool) {
	var buf [maxMintedClaims]byte
	if base64.RawURLEncoding.DecodedLen(len(encoded)) > len(buf) {
		return tokenClaims{}, false
	}
	n, err := base64.RawURLEncoding.Decode(buf[:], encoded)
	if err != nil {
		return tokenClaims{}, false
	}
	var c tokenClaims
	rest, ok := bytes.CutPrefix(buf[:n], []byte(`{"role":"`))
	if !ok {
		return tokenClaims{}, false
	}
	role, rest, ok := bytes.Cut(rest, []byte(`","sub":"`))
	switch {
	case !ok:
		return tokenClaims{}, false
	case string(role) == string(RoleUser):
		c.role = RoleUser
	case string(role) == string(RoleAdmin):
		c.role = RoleAdmin
	default:
		return tokenClaims{}, false
	}
	sub, rest, ok := bytes.Cut(rest, []byte(`","exp":`))
	if !ok || len(sub) == 0 {
		return tokenClaims{}, false
	}
	for _, b := range sub {
		// JSON writes these as they are; '"' ends the string, and encoding/json escapes <, >
		// and &.
		if b <= ' ' || b > '~' || b == '"' || b == '\\' || b == '<' || b == '>' || b == '&' {
			return tokenClaims{}, false
		}
	}
	exp, rest, ok := wholeSeconds(rest)
	if !ok {
		return tokenClaims{}, false
	}
	if after, ok := bytes.CutPrefix(rest, []byte(`,"iat":`)); ok {
		if _, rest, ok = wholeSeconds(after); !ok {
			return tokenClaims{}, false
		}
	}
	c.expires = time.Unix(exp, 0)
	// golang-jwt's validator: valid while now is before exp; an expired token is refused by it,
	// which says so.
	if string(rest) != "}" || !now.Before(c.expires) {
		return tokenClaims{}, false
	}
	c.sub = string(sub)
	return c, true
}

// wholeSeconds reads the JSON number of 1 to 15 digits, without a leading zero, that b starts
// with, and answers the rest of b.
func wholeSeconds(b []byte) (int64, []byte, bool) {
	var v int64
	i := 0
	for ; i < len(b) && i < 16 && b[i] >= '0' && b[i] <= '9'; i++ {
		v = v*10 + int64(b[i]-'0')
	}
	if i == 0 || i > 15 || b[0] == '0' {
		return 0, nil, false
	}
	return v, b[i:], true
}

// keyOf is the jwt.Keyfunc of every token: one secret, whatever the token says.
func (t *Tokens) keyOf(*jwt.Token) (any, error) { return t.key, nil }

// verifiedClaims are the claims Verify reads — sub, role, exp, and nbf for golang-jwt's check
// — decoded by unmarshalStrict, the rules of every request body (one value, valid UTF-8, no
// name given twice), by their exact names only; other claims are skipped. A payload naming a
// claim in another letter case too ("role" and "ROLE") is refused: encoding/json, which the
// next reader may use, matches names case-insensitively and keeps the last, so such a token
// could be read as one user or role here and as another there. A claim of the wrong JSON type
// is refused too (a numeric-looking string is no exp).
type verifiedClaims struct {
	jwt.RegisteredClaims
	role Role
}

// kept is what Verify keeps of claims that passed golang-jwt's validator, which requires exp.
func (c *verifiedClaims) kept() tokenClaims {
	return tokenClaims{sub: c.Subject, role: c.role, expires: c.ExpiresAt.Time}
}

// maxClaims bounds the names a payload may carry. golang-jwt's parser decodes the claims of a
// token with another header before checking its signature, so this bound keeps the check for
// names in another letter case, quadratic, cheap on a forged token too.
const maxClaims = 32

// UnmarshalJSON is how golang-jwt's parser hands over the claims of a token with another header.
func (c *verifiedClaims) UnmarshalJSON(payload []byte) error {
	return unmarshalStrict(payload, c)
}

// UnmarshalJSONFrom reads the payload's top-level members in one pass of the strict tokenizer.
func (c *verifiedClaims) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	if open, err := dec.ReadToken(); err != nil || open.Kind() != '{' {
		return errors.New("claims are not a JSON object")
	}
	var seen [8]string // room for the usual claims without growing names
	names := seen[:0]
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return fmt.Errorf("read claims: %w", err)
		}
		if len(names) == maxClaims {
			return fmt.Errorf("more than %d claims", maxClaims)
		}
		name := tok.String()
		for _, other := range names {
			if strings.EqualFold(name, other) {
				return fmt.Errorf("claim %q is named twice (as %q)", other, name)
			}
		}
		names = append(names, name)
		if err := c.read(dec, name); err != nil {
			return err
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return fmt.Errorf("read claims: %w", err)
	}
	return nil
}

// read decodes the value of the member name, skipping the claims Verify does not read.
func (c *verifiedClaims) read(dec *jsontext.Decoder, name string) error {
	switch name {
	case "sub", "role", "exp", "nbf":
	default:
		if err := dec.SkipValue(); err != nil {
			return fmt.Errorf("read claim %q: %w", name, err)
		}
		return nil
	}
	tok, err := dec.ReadToken()
	if err != nil {
		return fmt.Errorf("read claim %q: %w", name, err)
	}
	wantKind := jsontext.Kind('"')
	if name == "exp" || name == "nbf" {
		wantKind = '0'
	}
	if tok.Kind() != wantKind {
		return fmt.Errorf("claim %q is a JSON %s, want %s", name, tok.Kind(), wantKind)
	}
	switch name {
	case "sub":
		c.Subject = tok.String()
	case "role":
		c.role = Role(tok.String())
	default:
		whole, fraction := math.Modf(tok.Float()) // as golang-jwt reads a NumericDate
		at := jwt.NewNumericDate(time.Unix(int64(whole), int64(fraction*float64(time.Second))))
		if name == "exp" {
			c.ExpiresAt = at
		} else {
			c.NotBefore = at
		}
	}
	return nil
}

// credentialKey holds the *verifiedToken authenticate accepted.
const credentialKey = "rushgate.credential"

// SessionCookie names the waiting-room session cookie.
const SessionCookie = "rushgate_session"

// credentials says where a group's routes take their caller's credential from, and what is
// kept of it.
type credentials struct {
	// sessionCookie: a request without an Authorization header may carry the session cookie of
	// the event its path names (:eventId) instead.
	sessionCookie bool
	// heldConnection: each request holds its connection for a stream's life and verifies its
	// token once, so remembering the token (verifiedTokens) would only keep about 300 bytes for
	// as long as the stream lasts.
	heldConnection bool
}

// authenticate requires a valid bearer token, or the session cookie creds allows, and stores
// its Principal, and when it expires, for the handlers.
func authenticate(tokens *Tokens, creds credentials) gin.HandlerFunc {
	remember := !creds.heldConnection
	return func(c *gin.Context) {
		header := c.GetHeader("Authorization")
		if creds.sessionCookie && header == "" {
			if cookie, err := c.Request.Cookie(SessionCookie); err == nil {
				eventID := c.Param("eventId")
				sessions := tokens.sessions(eventID)
				if accept(c, sessions, cookie.Value, "the waiting-room session", remember) {
					tokens.keepSessions(eventID, sessions)
					c.Next()
				}
				return
			}
		}
		scheme, raw, ok := strings.Cut(header, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || raw == "" {
			c.Header("WWW-Authenticate", `Bearer`)
			respondError(c, errUnauthorized)
			return
		}
		if accept(c, tokens, strings.TrimSpace(raw), "the bearer token", remember) {
			c.Next()
		}
	}
}

// accept stores the principal of raw, a token of tokens (remembered as verified if remember),
// and when it expires, and reports true; or answers 401 saying that what (the bearer token, the
// session) is invalid or expired, and reports false.
func accept(c *gin.Context, tokens *Tokens, raw, what string, remember bool) bool {
	token, err := tokens.verifyUntil(raw, remember)
	if err != nil {
		c.Header("WWW-Authenticate", `Bearer error="invalid_token"`)
		if errors.Is(err, jwt.ErrTokenExpired) {
			respondError(c, errUnauthorized.WithMessage(what+" has expired"))
			return false
		}
		respondError(c, errUnauthorized.WithMessage(what+" is not valid"))
		return false
	}
	c.Set(credentialKey, token)
	return true
}

// requireRole lets only principals with role through; it runs after authenticate.
func requireRole(role Role) gin.HandlerFunc {
	return func(c *gin.Context) {
		if principal(c).Role != role {
			respondError(c, errForbidden)
			return
		}
		c.Next()
	}
}

// checkClaimedUser refuses a userId a request names (in its body, as the seeds send it) that is
// not the authenticated user: the acting user always comes from the token.
func checkClaimedUser(c *gin.Context, claimed *string) error {
	if claimed != nil && *claimed != principal(c).UserID {
		return errForbidden
	}
	return nil
}

// expiry returns when the credential authenticate accepted expires.
func expiry(c *gin.Context) time.Time {
	if v := credential(c); v != nil {
		return v.expires
	}
	return time.Time{}
}

// principal returns the caller authenticate stored; the zero Principal on public routes.
func principal(c *gin.Context) Principal {
	if v := credential(c); v != nil {
		return v.principal
	}
	return Principal{}
}

// credential returns the token authenticate accepted, or nil on public routes.
func credential(c *gin.Context) *verifiedToken {
	v, _ := c.Get(credentialKey)
	token, _ := v.(*verifiedToken)
	return token
}
