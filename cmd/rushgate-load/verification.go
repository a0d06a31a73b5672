package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"net/http"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/rushgate/rushgate/adapters/gormdb"
	rghttp "github.com/rushgate/rushgate/adapters/http"
)

// The verification flow: each of --users users opens an upload session, PUTs a small
// real PNG to the presigned URL (rushgate's own signed route, or S3) and verifies one challenge
// with it. One unit of work is a user's whole flow; the table's latency and statuses are the
// verification's, and the steps' own rates and latencies are reported beside the invariant.

// newVerificationFlow builds the scenario; it also runs against the embedded default, with no
// database: its invariant is then read through the API.
func newVerificationFlow(cfg config) (scenario, error) {
	return &verificationFlow{users: cfg.users}, nil
}

type verificationFlow struct {
	users int

	// Set by prepare.
	challengeID string
	tokens      []string
	image       []byte
	// Filled by run, one entry per user.
	steps []flowSteps
}

var (
	_ scenario         = (*verificationFlow)(nil)
	_ databaseOptional = (*verificationFlow)(nil)
)

// flowSteps is what one user's flow took: each step's latency, zero when it was not reached.
type flowSteps struct {
	session, upload, verify time.Duration
	sessionOK, uploadOK     bool
}

func (*verificationFlow) withoutDatabase() {}

func (s *verificationFlow) shape() string {
	return fmt.Sprintf("%d users → session, upload, verify of 1 challenge", s.users)
}

func (s *verificationFlow) targets(gormdb.Dialect) []target {
	return []target{
		{measure: measureP99, bound: atMost, limit: 500},
		{measure: measure429, bound: atMost, limit: 0},
	}
}

// prepare creates the challenge, mints the users' tokens and draws the image.
func (s *verificationFlow) prepare(ctx context.Context, e *env) error {
	admin, err := e.adminToken()
	if err != nil {
		return fmt.Errorf("mint admin token: %w", err)
	}
	challenge, err := createByAdmin(ctx, e.api, 0, admin, "/admin/challenges",
		map[string]any{"title": "rushgate-load " + e.runID, "deadline": time.Now().Add(24 * time.Hour).Format(time.RFC3339)})
	if err != nil {
		return fmt.Errorf("create challenge: %w", err)
	}
	s.challengeID = challenge.ID
	s.tokens = make([]string, s.users)
	for i := range s.tokens {
		if s.tokens[i], err = e.userToken(e.userID(i)); err != nil {
			return fmt.Errorf("mint token: %w", err)
		}
	}
	img := image.NewRGBA(image.Rect(0, 0, 32, 32))
	for i := range img.Pix {
		img.Pix[i] = byte(i)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		return err
	}
	s.image = b.Bytes()
	s.steps = make([]flowSteps, s.users)
	return nil
}

// run carries out each user's flow; it succeeds with the verification's 201.
func (s *verificationFlow) run(e *env) work {
	return work{n: s.users, do: func(ctx context.Context, i int) attempt {
		auth := map[string]string{"Authorization": "Bearer " + s.tokens[i]}
		step := &s.steps[i]
		a, raw := e.api.post(ctx, i, "/upload-sessions", auth,
			map[string]any{"fileName": "proof.png", "contentType": "image/png", "fileSize": len(s.image)})
		step.session = a.latency
		if a.err != nil || a.status != http.StatusOK {
			a.ok = false
			return a
		}
		var session struct {
			SessionID       string            `json:"sessionId"`
			PresignedURL    string            `json:"presignedUrl"`
			ObjectKey       string            `json:"objectKey"`
			RequiredHeaders map[string]string `json:"requiredHeaders"`
		}
		if err := json.Unmarshal(raw, &session); err != nil {
			a.ok, a.err = false, fmt.Errorf("decode session: %w", err)
			return a
		}
		step.sessionOK = true
		up := s.upload(ctx, e, session.PresignedURL, session.RequiredHeaders)
		up.instance = a.instance
		step.upload = up.latency
		if up.err != nil || up.status != http.StatusOK {
			return up
		}
		step.uploadOK = true
		auth[rghttp.IdempotencyKeyHeader] = "verify-" + session.SessionID
		v, _ := e.api.post(ctx, i, "/verifications", auth,
			map[string]any{"sessionId": session.SessionID, "challengeId": s.challengeID, "imageKey": session.ObjectKey})
		step.verify = v.latency
		v.ok = v.status == http.StatusCreated
		return v
	}}
}

// upload PUTs the image to url with the required headers; fasthttp sets Content-Length from
// the body whatever the headers say.
func (s *verificationFlow) upload(ctx context.Context, e *env, url string, headers map[string]string) attempt {
	a, raw := e.api.exchange(ctx, http.MethodPut, url, headers, s.image)
	if a.err == nil && a.status != http.StatusOK {
		a.code, a.detail = "UPLOAD_REFUSED", snippet(raw)
	}
	return a
}

// invariant checks verifications == COMPLETED sessions == 201 answers, no user twice for the
// challenge, every flow verified or shed, and reports each step's rate and latency. Without a
// database it reads the verifications through the API and cannot see the sessions.
func (s *verificationFlow) invariant(ctx context.Context, e *env, attempts []attempt) (invariantResult, error) {
	var res invariantResult
	created, shed := 0, 0
	var elapsed time.Duration
	for _, a := range attempts {
		switch {
		case a.ok:
			created++
		case a.status == http.StatusTooManyRequests:
			shed++
		}
		elapsed = max(elapsed, a.end)
	}
	verifications, users, completed := 0, 0, -1
	var err error
	if e.db != nil {
		verifications, users, completed, err = s.readDatabase(ctx, e)
	} else {
		verifications, users, err = s.readAPI(ctx, e)
	}
	if err != nil {
		return res, err
	}
	res.rows = append(res.rows, s.stepRows(elapsed)...)
	res.rows = append(res.rows,
		invariantRow{label: "verifications stored", value: verifications},
		invariantRow{label: "distinct users verified", value: users})
	if completed >= 0 {
		res.rows = append(res.rows, invariantRow{label: "COMPLETED sessions", value: completed})
		if completed != verifications {
			res.violations = append(res.violations, fmt.Sprintf("%d verifications but %d COMPLETED sessions", verifications, completed))
		}
	}
	if users != verifications {
		res.violations = append(res.violations, fmt.Sprintf("%d verifications by %d distinct users: a user verified twice", verifications, users))
	}
	if verifications != created {
		res.violations = append(res.violations, fmt.Sprintf("%d verifications stored, %d answered 201", verifications, created))
	}
	// Every flow is valid by construction (one session each, a real image, before the deadline):
	// it is verified, or shed with a 429, which its own target counts.
	if created+shed != s.users {
		res.violations = append(res.violations, fmt.Sprintf("%d of %d valid flows were verified (201) or shed (429)", created+shed, s.users))
	}
	return res, nil
}

// stepRows are the steps' rates over the run and their latency percentiles.
func (s *verificationFlow) stepRows(elapsed time.Duration) []invariantRow {
	var sessions, uploads, verifies []time.Duration
	verified := 0
	for _, st := range s.steps {
		if st.sessionOK {
			sessions = append(sessions, st.session)
		}
		if st.uploadOK {
			uploads = append(uploads, st.upload)
		}
		if st.verify > 0 {
			verifies = append(verifies, st.verify)
			verified++
		}
	}
	perSecond := func(n int) string { return rate(float64(n) / max(elapsed.Seconds(), 1e-9)) }
	pcts := func(samples []time.Duration) string {
		l := summarizeLatencies(slices.Clone(samples))
		return millis(l.p50) + " / " + millis(l.p99)
	}
	return []invariantRow{
		{label: "sessions/s", text: perSecond(len(sessions))},
		{label: "uploads/s", text: perSecond(len(uploads))},
		{label: "verifications/s (requests)", text: perSecond(verified)},
		{label: "create session p50 / p99", text: pcts(sessions)},
		{label: "upload p50 / p99", text: pcts(uploads)},
		{label: "verify p50 / p99", text: pcts(verifies)},
	}
}

func (s *verificationFlow) readDatabase(ctx context.Context, e *env) (verifications, users, completed int, err error) {
	d := e.db.Dialect()
	row := e.db.SQL().QueryRowContext(ctx, gormdb.Bind(d, "SELECT COUNT(*), COUNT(DISTINCT user_id) FROM verifications WHERE challenge_id = ?"), s.challengeID)
	if err := row.Scan(&verifications, &users); err != nil {
		return 0, 0, 0, fmt.Errorf("read verifications: %w", err)
	}
	row = e.db.SQL().QueryRowContext(ctx, gormdb.Bind(d, "SELECT COUNT(*) FROM upload_sessions WHERE status = 'COMPLETED' AND user_id LIKE ?"), "load-"+e.runID+"-%")
	if err := row.Scan(&completed); err != nil {
		return 0, 0, 0, fmt.Errorf("read sessions: %w", err)
	}
	return verifications, users, completed, nil
}

// readAPI pages through the challenge's verifications as an admin.
func (s *verificationFlow) readAPI(ctx context.Context, e *env) (verifications, users int, err error) {
	admin, err := e.adminToken()
	if err != nil {
		return 0, 0, err
	}
	seen := map[string]bool{}
	cursor := ""
	for {
		path := "/challenges/" + s.challengeID + "/verifications?limit=500"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		a, raw := e.api.send(ctx, 0, http.MethodGet, path, map[string]string{"Authorization": "Bearer " + admin}, nil)
		if a.err != nil {
			return 0, 0, fmt.Errorf("list verifications: %w", a.err)
		}
		if a.status != http.StatusOK {
			return 0, 0, fmt.Errorf("list verifications: answered %d: %s", a.status, snippet(raw))
		}
		var page struct {
			Items []struct {
				UserID string `json:"userId"`
			} `json:"items"`
			NextCursor *string `json:"nextCursor"`
		}
		if err := json.Unmarshal(raw, &page); err != nil {
			return 0, 0, fmt.Errorf("list verifications: %w", err)
		}
		for _, it := range page.Items {
			verifications++
			seen[it.UserID] = true
		}
		if page.NextCursor == nil {
			return verifications, len(seen), nil
		}
		cursor = *page.NextCursor
	}
}

// The ceiling: the verification transaction through database/sql, on sessions
// inserted directly: session FOR UPDATE, challenge FOR UPDATE, INSERT verification, UPDATE
// session COMPLETED.
const (
	insertChallengeSQL    = `INSERT INTO challenges (id, title, deadline, created_at) VALUES (?, ?, ?, ?)`
	insertSessionSQL      = `INSERT INTO upload_sessions (id, user_id, object_key, file_name, content_type, file_size, status, requested_at) VALUES (?, ?, ?, 'p.png', 'image/png', 1, 'PENDING', ?)`
	lockSessionSQL        = `SELECT status FROM upload_sessions WHERE id = ? FOR UPDATE`
	lockChallengeSQL      = `SELECT deadline FROM challenges WHERE id = ? FOR UPDATE`
	insertVerificationSQL = `INSERT INTO verifications (id, user_id, challenge_id, upload_session_id, image_key, status, requested_at) VALUES (?, ?, ?, ?, ?, 'APPROVED', ?)`
	completeSessionSQL    = `UPDATE upload_sessions SET status = 'COMPLETED' WHERE id = ? AND status = 'PENDING'`
)

func (s *verificationFlow) ceiling(ctx context.Context, e *env) (work, error) {
	d, db := e.db.Dialect(), e.db.SQL()
	now := time.Now().UTC().Truncate(time.Microsecond)
	challengeID := uuid.NewString()
	if _, err := db.ExecContext(ctx, gormdb.Bind(d, insertChallengeSQL), challengeID, "ceiling "+e.runID, now.Add(24*time.Hour), now); err != nil {
		return work{}, fmt.Errorf("ceiling: create challenge: %w", err)
	}
	sessions := make([]string, s.users)
	for i := range sessions {
		sessions[i] = uuid.NewString()
		if _, err := db.ExecContext(ctx, gormdb.Bind(d, insertSessionSQL), sessions[i], fmt.Sprintf("ceiling-%s-%d", e.runID, i), "ceiling/"+sessions[i], now); err != nil {
			return work{}, fmt.Errorf("ceiling: create session: %w", err)
		}
	}
	stmts := []string{gormdb.Bind(d, lockSessionSQL), gormdb.Bind(d, lockChallengeSQL), gormdb.Bind(d, insertVerificationSQL), gormdb.Bind(d, completeSessionSQL)}
	return work{n: s.users, do: func(ctx context.Context, i int) attempt {
		ctx, cancel := context.WithTimeout(ctx, e.timeout)
		defer cancel()
		start := time.Now()
		err := verifyTx(ctx, db, stmts, challengeID, sessions[i], fmt.Sprintf("ceiling-%s-%d", e.runID, i), now)
		return attempt{latency: time.Since(start), ok: err == nil, err: err}
	}}, nil
}

func verifyTx(ctx context.Context, db *sql.DB, stmts []string, challengeID, sessionID, userID string, requestedAt time.Time) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	var status string
	if err := tx.QueryRowContext(ctx, stmts[0], sessionID).Scan(&status); err != nil {
		return fmt.Errorf("lock session: %w", err)
	}
	var deadline time.Time
	if err := tx.QueryRowContext(ctx, stmts[1], challengeID).Scan(&deadline); err != nil {
		return fmt.Errorf("lock challenge: %w", err)
	}
	if status != "PENDING" || !requestedAt.Before(deadline) {
		return errors.New("session not verifiable")
	}
	if _, err := tx.ExecContext(ctx, stmts[2], uuid.NewString(), userID, challengeID, sessionID, "ceiling/"+sessionID, requestedAt); err != nil {
		return fmt.Errorf("insert verification: %w", err)
	}
	if _, err := tx.ExecContext(ctx, stmts[3], sessionID); err != nil {
		return fmt.Errorf("complete session: %w", err)
	}
	return tx.Commit()
}
