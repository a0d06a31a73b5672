package http

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
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
	secret []byte
}

// NewTokens returns Tokens signing with secret. An empty secret would make every token forgeable,
// so it panics; configuration must supply or generate one.
func NewTokens(secret []byte) *Tokens {
	if len(secret) == 0 {
		panic("http: NewTokens: empty JWT secret")
	}
	return &Tokens{secret: append([]byte(nil), secret...)}
}

type claims struct {
	Role Role `json:"role"`
	jwt.RegisteredClaims
}

// Mint returns a signed token for userID with role, expiring after ttl.
func (t *Tokens) Mint(userID string, role Role, ttl time.Duration) (string, error) {
	if err := domain.ValidateUserID("sub", userID); err != nil {
		return "", fmt.Errorf("mint token: %w", err)
	}
	if !role.valid() {
		return "", fmt.Errorf("mint token: unknown role %q", role)
	}
	if ttl <= 0 {
		return "", fmt.Errorf("mint token: ttl must be positive, got %s", ttl)
	}
	now := time.Now()
	token := jwt.NewWithClaims(jwt.SigningMethodHS256, claims{
		Role: role,
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   userID,
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
		},
	})
	signed, err := token.SignedString(t.secret)
	if err != nil {
		return "", fmt.Errorf("mint token: %w", err)
	}
	return signed, nil
}

// Verify checks raw's HS256 signature (any other algorithm, including "none", is rejected), its
// expiry, and that it names a valid user and role.
//
// Claims are read by their exact names (sub, role, exp) only, and a token naming one claim twice
// in any letter case ("role" and "ROLE") is refused: encoding/json matches struct fields
// case-insensitively and keeps the last repeated name, so such a token could be read as one
// user or role here and as another by the next reader.
func (t *Tokens) Verify(raw string) (Principal, error) {
	claims := jwt.MapClaims{}
	_, err := jwt.ParseWithClaims(raw, claims,
		func(*jwt.Token) (any, error) { return t.secret, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
	)
	if err != nil {
		return Principal{}, fmt.Errorf("verify token: %w", err)
	}
	if err := refuseAmbiguousClaims(raw); err != nil {
		return Principal{}, fmt.Errorf("verify token: %w", err)
	}
	sub, err := claims.GetSubject()
	if err != nil {
		return Principal{}, fmt.Errorf("verify token: %w", err)
	}
	if err := domain.ValidateUserID("sub", sub); err != nil {
		return Principal{}, fmt.Errorf("verify token: %w", err)
	}
	role, _ := claims["role"].(string)
	if !Role(role).valid() {
		return Principal{}, fmt.Errorf("verify token: unknown role %q", role)
	}
	return Principal{UserID: sub, Role: Role(role)}, nil
}

// refuseAmbiguousClaims fails when two claim names of the token's payload are equal under
// strings.EqualFold, exact repeats included. Call it on a token whose signature checked out.
func refuseAmbiguousClaims(raw string) error {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return errors.New("token is not three segments")
	}
	payload, err := jwt.NewParser().DecodeSegment(parts[1])
	if err != nil {
		return fmt.Errorf("decode claims: %w", err)
	}
	names, err := claimNames(payload)
	if err != nil {
		return err
	}
	// Quadratic, but only over the claims of a token we signed ourselves.
	for i, name := range names {
		for _, other := range names[i+1:] {
			if strings.EqualFold(name, other) {
				return fmt.Errorf("claim %q is named twice (as %q)", name, other)
			}
		}
	}
	return nil
}

// claimNames lists the top-level member names of a JSON object in order, repeats included,
// which decoding into a map would hide.
func claimNames(payload []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	if open, err := dec.Token(); err != nil || open != json.Delim('{') {
		return nil, errors.New("claims are not a JSON object")
	}
	var names []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("read claims: %w", err)
		}
		name, _ := tok.(string)
		names = append(names, name)
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, fmt.Errorf("read claim %q: %w", name, err)
		}
	}
	return names, nil
}

const principalKey = "rushgate.principal"

// authenticate requires a valid bearer token and stores its Principal for the handlers.
func authenticate(tokens *Tokens) gin.HandlerFunc {
	return func(c *gin.Context) {
		scheme, raw, ok := strings.Cut(c.GetHeader("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || raw == "" {
			c.Header("WWW-Authenticate", `Bearer`)
			respondError(c, errUnauthorized)
			return
		}
		p, err := tokens.Verify(strings.TrimSpace(raw))
		if err != nil {
			c.Header("WWW-Authenticate", `Bearer error="invalid_token"`)
			if errors.Is(err, jwt.ErrTokenExpired) {
				respondError(c, &domain.Error{Code: errUnauthorized.Code, Message: "the bearer token has expired"})
				return
			}
			respondError(c, errUnauthorized)
			return
		}
		c.Set(principalKey, p)
		c.Next()
	}
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
// not the authenticated user: the acting user always comes from the token (SPEC §0).
func checkClaimedUser(c *gin.Context, claimed *string) error {
	if claimed != nil && *claimed != principal(c).UserID {
		return errForbidden
	}
	return nil
}

// principal returns the caller authenticate stored; the zero Principal on public routes.
func principal(c *gin.Context) Principal {
	p, _ := c.Get(principalKey)
	pr, _ := p.(Principal)
	return pr
}
