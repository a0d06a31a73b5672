package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	rghttp "github.com/rushgate/rushgate/adapters/http"
)

// maxCapacity is the largest maxMembers SPEC §1 allows; the ceiling's uncapped crews use it.
const maxCapacity = 100000

// tokenTTL outlives any run: tokens are minted before timing starts.
const tokenTTL = time.Hour

// scenario is the shape of one run: users joining crews of one capacity, round-robin.
type scenario struct {
	name     string
	users    int
	crews    int
	capacity int // each crew's maxMembers
}

// newScenario builds the scenario cfg names.
func newScenario(cfg config) (scenario, error) {
	var sc scenario
	switch cfg.scenario {
	case "crew-herd":
		if cfg.capacity < 1 || cfg.capacity > maxCapacity {
			return scenario{}, fmt.Errorf("--capacity must be 1..%d", maxCapacity)
		}
		sc = scenario{name: cfg.scenario, users: cfg.users, crews: 1, capacity: cfg.capacity}
	case "crew-spread":
		if cfg.crews < 1 {
			return scenario{}, errors.New("--crews must be at least 1")
		}
		// Each crew holds every user sent to it, so no join is refused and none contends for a
		// last seat: the run measures the join path without a stampede.
		sc = scenario{name: cfg.scenario, users: cfg.users, crews: cfg.crews, capacity: ceilDiv(cfg.users, cfg.crews)}
	default:
		return scenario{}, fmt.Errorf("unknown scenario %q: want crew-herd or crew-spread", cfg.scenario)
	}
	if perCrew := ceilDiv(sc.users, sc.crews); perCrew > maxCapacity {
		return scenario{}, fmt.Errorf("%d users per crew: the ceiling's crews hold at most %d", perCrew, maxCapacity)
	}
	return sc, nil
}

// crewOf is the index of the crew user i joins.
func (s scenario) crewOf(user int) int { return user % s.crews }

// assigned is how many users are sent to crew c.
func (s scenario) assigned(c int) int {
	n := s.users / s.crews
	if c < s.users%s.crews {
		n++
	}
	return n
}

// expectedMembers is how many members crew c must end with: every user sent to it, up to its
// capacity.
func (s scenario) expectedMembers(c int) int { return min(s.assigned(c), s.capacity) }

func ceilDiv(a, b int) int { return max(1, (a+b-1)/b) }

// target is the rushgate server under load.
type target struct {
	baseURL string
	client  *http.Client
	tokens  *rghttp.Tokens
}

// newTarget returns a target whose client keeps a connection per concurrent request alive, so
// the run measures requests, not TCP handshakes.
func newTarget(baseURL string, concurrency int, timeout time.Duration, tokens *rghttp.Tokens) *target {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConns = concurrency
	transport.MaxIdleConnsPerHost = concurrency
	return &target{
		baseURL: strings.TrimRight(baseURL, "/"),
		client:  &http.Client{Transport: transport, Timeout: timeout},
		tokens:  tokens,
	}
}

// joinRequest is one user's join, prepared before timing starts.
type joinRequest struct {
	crewID         string
	bearer         string
	idempotencyKey string
}

// prepareJoins creates the scenario's crews through the API and mints one token per user. It
// returns the joins in user order and the crew ids in crew order.
func prepareJoins(ctx context.Context, t *target, sc scenario, runID string) ([]joinRequest, []string, error) {
	admin, err := t.tokens.Mint("load-admin-"+runID, rghttp.RoleAdmin, tokenTTL)
	if err != nil {
		return nil, nil, fmt.Errorf("mint admin token: %w", err)
	}
	crewIDs := make([]string, sc.crews)
	for c := range crewIDs {
		name := fmt.Sprintf("rushgate-load %s %s #%d", sc.name, runID, c)
		if crewIDs[c], err = t.createCrew(ctx, admin, name, sc.capacity); err != nil {
			return nil, nil, err
		}
	}
	joins := make([]joinRequest, sc.users)
	for i := range joins {
		user := fmt.Sprintf("load-%s-%d", runID, i)
		bearer, err := t.tokens.Mint(user, rghttp.RoleUser, tokenTTL)
		if err != nil {
			return nil, nil, fmt.Errorf("mint token for %s: %w", user, err)
		}
		joins[i] = joinRequest{
			crewID:         crewIDs[sc.crewOf(i)],
			bearer:         "Bearer " + bearer,
			idempotencyKey: "join-" + user,
		}
	}
	return joins, crewIDs, nil
}

// createCrew answers the new crew's id from POST /crews.
func (t *target) createCrew(ctx context.Context, adminToken, name string, maxMembers int) (string, error) {
	body, err := json.Marshal(map[string]any{"name": name, "maxMembers": maxMembers})
	if err != nil {
		return "", fmt.Errorf("encode crew: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.baseURL+"/crews", bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("create crew: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("create crew: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("create crew: read response: %w", err)
	}
	if resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("create crew: POST /crews answered %d: %s", resp.StatusCode, snippet(raw))
	}
	var created struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(raw, &created); err != nil || created.ID == "" {
		return "", fmt.Errorf("create crew: no id in %s", snippet(raw))
	}
	return created.ID, nil
}

// join sends one POST /crews/{id}/join and times it up to the last byte of the response.
func (t *target) join(ctx context.Context, j joinRequest) attempt {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost,
		t.baseURL+"/crews/"+url.PathEscape(j.crewID)+"/join", http.NoBody)
	if err != nil {
		return attempt{err: fmt.Errorf("build join request: %w", err)}
	}
	req.Header.Set("Authorization", j.bearer)
	req.Header.Set(rghttp.IdempotencyKeyHeader, j.idempotencyKey)
	resp, err := t.client.Do(req)
	if err != nil {
		return attempt{latency: time.Since(start), err: err}
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	a := attempt{latency: time.Since(start), status: resp.StatusCode, ok: resp.StatusCode == http.StatusCreated}
	if err != nil {
		a.ok = false
		a.err = fmt.Errorf("read join response: %w", err)
	} else if resp.StatusCode >= http.StatusInternalServerError {
		a.detail = snippet(raw)
	}
	return a
}

// snippet is the start of a response body, for error messages.
func snippet(raw []byte) string {
	const limit = 300
	s := strings.TrimSpace(string(raw))
	if len(s) > limit {
		s = s[:limit] + "…"
	}
	return s
}
