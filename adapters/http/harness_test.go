package http_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	stdhttp "net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	rhttp "github.com/rushgate/rushgate/adapters/http"
	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/adapters/telemetry"
	appraffle "github.com/rushgate/rushgate/application/raffle"
	"github.com/rushgate/rushgate/bootstrap"
	"github.com/rushgate/rushgate/domain/crew"
	"github.com/rushgate/rushgate/ports"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.TestMode)
	os.Exit(m.Run())
}

var testSecret = []byte("test-secret-that-is-long-enough-for-hs256")

// harnessConfig tunes a harness; the zero value is the server's own modules on memory.
type harnessConfig struct {
	maxBodyBytes int64
	readiness    []telemetry.ReadinessCheck // replaces the server's checks when set
	accessLog    rhttp.AccessLog
	// role is the instance's push role (bootstrap.RoleAll when empty); a split role needs no
	// Redis here, since nothing starts.
	role string
	// clock replaces the wall clock when set.
	clock *memory.Clock
	// options are extra fx options, such as a port decorated or populated for the test.
	options []fx.Option
}

// harness is the router of the server's own fx modules (bootstrap.Modules) on fresh in-memory
// adapters, serving every flow, with handles to inspect and disturb them. It is built, not
// started: requests go straight to the router, and no background worker runs.
type harness struct {
	t        *testing.T
	router   *gin.Engine
	tokens   *rhttp.Tokens
	crews    *crewStore
	members  ports.CrewMemberRepository
	store    ports.IdempotencyStore
	locker   ports.Locker
	registry *prometheus.Registry
	logs     *syncBuffer
	// raffles runs the draws a started server's worker would.
	raffles *appraffle.Service
}

func newHarness(t *testing.T, cfg harnessConfig) *harness {
	t.Helper()
	config := bootstrap.DefaultConfig()
	config.Auth.JWTSecret = string(testSecret)
	// Short backoff so a busy lock gives up within milliseconds.
	config.Guard.LockBaseDelay, config.Guard.LockRetries = time.Millisecond, 2
	config.Storage.DataDir = t.TempDir()
	if cfg.maxBodyBytes > 0 {
		config.Server.MaxBodyBytes = cfg.maxBodyBytes
	}
	config.Server.AccessLogLevel = cfg.accessLog.Level.String()
	if cfg.accessLog.SampleEvery > 0 {
		config.Server.AccessLogSample = cfg.accessLog.SampleEvery
	}
	require.NoError(t, config.Validate())
	if cfg.role != "" {
		config.Queue.Role = cfg.role
	}

	h := &harness{t: t, tokens: rhttp.NewTokens(testSecret), logs: &syncBuffer{}}
	var coordination ports.Coordination
	options := []fx.Option{
		bootstrap.Modules(config),
		fx.Decorate(func(*slog.Logger) *slog.Logger { return slog.New(slog.NewJSONHandler(h.logs, nil)) }),
		fx.Decorate(func(stores ports.CrewStores) ports.CrewStores {
			h.crews = &crewStore{CrewRepository: stores.Crews}
			h.members = stores.CrewMembers
			stores.Crews = h.crews
			return stores
		}),
		fx.Populate(&h.router, &h.registry, &coordination, &h.raffles),
	}
	if cfg.clock != nil {
		options = append(options, fx.Decorate(func(ports.Clock) ports.Clock { return cfg.clock }))
	}
	options = append(options, cfg.options...)
	if cfg.readiness != nil {
		options = append(options, fx.Decorate(fx.Annotate(
			func([]telemetry.ReadinessCheck) []telemetry.ReadinessCheck { return cfg.readiness },
			fx.ParamTags(`group:"readiness"`), fx.ResultTags(`group:"readiness"`))))
	}
	app := fx.New(options...)
	require.NoError(t, app.Err())
	h.store, h.locker = coordination.Idempotency, coordination.Locker
	return h
}

// call is one request to the router.
type call struct {
	method, path, body string
	token              string // sent as a bearer token when not empty
	idempotencyKey     string // sent when not empty
	header             map[string]string
}

func (h *harness) do(c call) *httptest.ResponseRecorder {
	h.t.Helper()
	var body io.Reader = stdhttp.NoBody
	if c.body != "" {
		body = strings.NewReader(c.body)
	}
	req := httptest.NewRequest(c.method, c.path, body)
	if c.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", c.idempotencyKey)
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.router.ServeHTTP(rec, req)
	return rec
}

func (h *harness) token(userID string, role rhttp.Role) string {
	h.t.Helper()
	tok, err := h.tokens.Mint(userID, role, time.Hour)
	require.NoError(h.t, err)
	return tok
}

// userToken returns a token for a fresh random user, and that user's id.
func (h *harness) userToken() (token, userID string) {
	userID = "u-" + uuid.NewString()
	return h.token(userID, rhttp.RoleUser), userID
}

// createCrew creates a crew through the API and returns its id.
func (h *harness) createCrew(maxMembers int) string {
	h.t.Helper()
	rec := h.do(call{method: "POST", path: "/crews", token: h.token("admin-1", rhttp.RoleAdmin),
		body: `{"name":"runners","maxMembers":` + strconv.Itoa(maxMembers) + `}`})
	require.Equal(h.t, stdhttp.StatusCreated, rec.Code, rec.Body.String())
	var view rhttp.CrewJSON
	require.NoError(h.t, json.Unmarshal(rec.Body.Bytes(), &view))
	return view.ID
}

func (h *harness) join(crewID, token, key string) *httptest.ResponseRecorder {
	h.t.Helper()
	return h.do(call{method: "POST", path: "/crews/" + crewID + "/join", token: token, idempotencyKey: key})
}

// admin is an admin's token.
func (h *harness) admin() string { return h.token("admin-1", rhttp.RoleAdmin) }

// create posts body to path as an admin, requires 201 Created, and returns the answer.
func (h *harness) create(path, body string) map[string]any {
	h.t.Helper()
	rec := h.do(call{method: "POST", path: path, token: h.admin(), body: body})
	require.Equal(h.t, stdhttp.StatusCreated, rec.Code, rec.Body.String())
	return answer(h.t, rec)
}

// answer is rec's JSON body.
func answer(t *testing.T, rec *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	var body map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), rec.Body.String())
	return body
}

// scrape returns the /metrics exposition.
func (h *harness) scrape() string {
	h.t.Helper()
	rec := h.do(call{method: "GET", path: "/metrics"})
	require.Equal(h.t, stdhttp.StatusOK, rec.Code)
	return rec.Body.String()
}

// assertSeats checks the crew's stored count and its member rows both equal want.
func (h *harness) assertSeats(crewID string, want int) {
	h.t.Helper()
	ctx := context.Background()
	c, err := h.crews.Get(ctx, crewID)
	require.NoError(h.t, err)
	count, err := h.members.Count(ctx, crewID)
	require.NoError(h.t, err)
	assert.Equal(h.t, want, c.CurrentMembers(), "currentMembers")
	assert.Equal(h.t, want, count, "member rows")
}

// errorBody is the JSON error shape every route answers.
type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
	Field   string `json:"field"`
}

// assertError checks rec is a JSON error with status and code, and returns its body.
func assertError(t *testing.T, rec *httptest.ResponseRecorder, status int, code string) errorBody {
	t.Helper()
	require.Equal(t, status, rec.Code, rec.Body.String())
	assert.Contains(t, rec.Header().Get("Content-Type"), "application/json")
	var body errorBody
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), rec.Body.String())
	assert.Equal(t, code, body.Error)
	assert.NotEmpty(t, body.Message)
	return body
}

// crewStore is the memory crew repository with switchable faults, counting the crews created.
type crewStore struct {
	ports.CrewRepository
	created atomic.Int64
	fault   atomic.Pointer[error] // returned by reads when set
	panics  atomic.Bool           // reads panic when set
}

func (s *crewStore) Create(ctx context.Context, c *crew.Crew) error {
	if err := s.CrewRepository.Create(ctx, c); err != nil {
		return err
	}
	s.created.Add(1)
	return nil
}

func (s *crewStore) Get(ctx context.Context, id string) (*crew.Crew, error) {
	if err := s.injected(); err != nil {
		return nil, err
	}
	return s.CrewRepository.Get(ctx, id)
}

func (s *crewStore) GetForUpdate(ctx context.Context, id string) (*crew.Crew, error) {
	if err := s.injected(); err != nil {
		return nil, err
	}
	return s.CrewRepository.GetForUpdate(ctx, id)
}

func (s *crewStore) injected() error {
	if s.panics.Load() {
		panic("driver exploded: password=hunter2")
	}
	if err := s.fault.Load(); err != nil {
		return *err
	}
	return nil
}

func (s *crewStore) failWith(err error) { s.fault.Store(&err) }
func (s *crewStore) heal()              { s.fault.Store(nil); s.panics.Store(false) }

// syncBuffer collects log output written from concurrent requests.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns every JSON log line written so far.
func (b *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var entry map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &entry), line)
		out = append(out, entry)
	}
	return out
}
