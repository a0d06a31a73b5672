package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rushgate/rushgate/adapters/dataplatform"
	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/adapters/system"
	"github.com/rushgate/rushgate/application/relay"
	"github.com/rushgate/rushgate/bootstrap"
	"github.com/rushgate/rushgate/domain/outbox"
	"github.com/rushgate/rushgate/test/testkit"
)

// dataPlatform is a fake platform: it accepts while accepting is set, else answers 500, and keeps
// each body it receives by its Idempotency-Key.
type dataPlatform struct {
	accepting atomic.Bool
	mu        sync.Mutex
	received  map[string][]string
}

func startDataPlatform(t *testing.T, accepting bool) (*dataPlatform, string) {
	p := &dataPlatform{received: map[string][]string{}}
	p.accepting.Store(accepting)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		p.mu.Lock()
		p.received[r.Header.Get("Idempotency-Key")] = append(p.received[r.Header.Get("Idempotency-Key")], string(body))
		p.mu.Unlock()
		if !p.accepting.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	return p, srv.URL
}

func (p *dataPlatform) bodies(id string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.received[id]...)
}

// alertHook keeps the alerts posted to it.
type alertHook struct {
	mu     sync.Mutex
	alerts []string
}

func startAlertHook(t *testing.T) (*alertHook, string) {
	h := &alertHook{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.alerts = append(h.alerts, string(body))
		h.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return h, srv.URL
}

func (h *alertHook) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.alerts)
}

// TestOutbox_PaidOrdersReachThePlatformOrFailWithAnAlert runs the whole delivery with the
// schedule shortened by the settings: a paid order reaches the platform at once with its
// messageId as Idempotency-Key; with the platform down, a message is tried 4 times on the
// schedule, turns FAILED and posts one alert to the webhook; operators list it by status and
// retry it (404, 409 and 403 where due), and the retried message is delivered once the platform
// is back.
func TestOutbox_PaidOrdersReachThePlatformOrFailWithAnAlert(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			platform, platformURL := startDataPlatform(t, true)
			hook, hookURL := startAlertHook(t)
			s := startServer(t, b, func(cfg *bootstrap.Config) {
				cfg.Outbox.DataPlatformURL, cfg.Outbox.AlertWebhookURL = platformURL, hookURL
				cfg.Outbox.Interval = 50 * time.Millisecond
				cfg.Outbox.Backoff = []time.Duration{100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond}
			})
			p := s.createProduct("delivered", 100, 10)
			s.createUser("deliver", 10_000)
			if res := s.pay("deliver", s.placeOrder("deliver", p, 1, ""), "d1"); res.status != http.StatusOK {
				t.Fatalf("pay: %d %s", res.status, res.raw)
			}
			admin := s.adminToken()
			var sent struct {
				Items []struct {
					MessageID string          `json:"messageId"`
					Status    string          `json:"status"`
					Attempts  int             `json:"attempts"`
					Payload   json.RawMessage `json:"payload"`
				} `json:"items"`
			}
			testkit.Eventually(t, 10*time.Second, "the paid order is SENT", func() error {
				res := s.do("GET", "/admin/outbox?status=SENT", admin, "")
				if err := json.Unmarshal(res.raw, &sent); err != nil || len(sent.Items) != 1 {
					return fmt.Errorf("SENT: %d %s", res.status, res.raw)
				}
				return nil
			})
			first := sent.Items[0]
			if got := platform.bodies(first.MessageID); len(got) != 1 || got[0] != string(first.Payload) {
				t.Fatalf("the platform received %v for %s, want its payload %s", got, first.MessageID, first.Payload)
			}

			platform.accepting.Store(false)
			if res := s.pay("deliver", s.placeOrder("deliver", p, 1, ""), "d2"); res.status != http.StatusOK {
				t.Fatalf("pay: %d %s", res.status, res.raw)
			}
			var failed struct {
				Items []struct {
					MessageID string  `json:"messageId"`
					Attempts  int     `json:"attempts"`
					LastError *string `json:"lastError"`
				} `json:"items"`
				NextCursor *string `json:"nextCursor"`
			}
			testkit.Eventually(t, 20*time.Second, "the undeliverable message is FAILED", func() error {
				res := s.do("GET", "/admin/outbox?status=FAILED", admin, "")
				if err := json.Unmarshal(res.raw, &failed); err != nil || len(failed.Items) != 1 {
					return fmt.Errorf("FAILED: %d %s", res.status, res.raw)
				}
				return nil
			})
			gone := failed.Items[0]
			if gone.Attempts != 4 || gone.LastError == nil || len(platform.bodies(gone.MessageID)) != 4 || failed.NextCursor != nil {
				t.Fatalf("FAILED message %+v after %d sends", gone, len(platform.bodies(gone.MessageID)))
			}
			testkit.Eventually(t, 5*time.Second, "one alert", func() error {
				if n := hook.count(); n != 1 {
					return fmt.Errorf("%d alerts", n)
				}
				return nil
			})
			if counts := s.outboxStatusCounts(); counts[outbox.Failed] != 1 || counts[outbox.Pending] != 0 {
				t.Fatalf("stored counts %v", counts)
			}

			assertError(t, s.do("GET", "/admin/outbox", s.token("deliver"), ""), http.StatusForbidden, "FORBIDDEN")
			assertError(t, s.do("GET", "/admin/outbox?status=LOST", admin, ""), http.StatusBadRequest, "VALIDATION_FAILED")
			assertError(t, s.do("POST", "/admin/outbox/"+absentID+"/retry", admin, ""), http.StatusNotFound, "OUTBOX_MESSAGE_NOT_FOUND")
			assertError(t, s.do("POST", "/admin/outbox/"+first.MessageID+"/retry", admin, ""), http.StatusConflict, "OUTBOX_MESSAGE_NOT_FAILED")
			platform.accepting.Store(true)
			retried := s.do("POST", "/admin/outbox/"+gone.MessageID+"/retry", admin, "")
			if retried.status != http.StatusOK || retried.str("status") != "PENDING" || retried.num("attempts") != 0 {
				t.Fatalf("retry: %d %s", retried.status, retried.raw)
			}
			testkit.Eventually(t, 10*time.Second, "the retried message is SENT", func() error {
				m, err := s.stores.Outbox.Get(context.Background(), gone.MessageID)
				if err != nil || m.Status != outbox.Sent {
					return fmt.Errorf("status %s, %w", m.Status, err)
				}
				return nil
			})
			if hook.count() != 1 {
				t.Fatalf("%d alerts", hook.count())
			}
			page := s.do("GET", "/admin/outbox?limit=1", admin, "")
			if page.status != http.StatusOK || page.str("nextCursor") == "" {
				t.Fatalf("first page of one: %s", page.raw)
			}
			if next := s.do("GET", "/admin/outbox?limit=1&cursor="+page.str("nextCursor"), admin, ""); next.status != http.StatusOK ||
				next.body["nextCursor"] != nil {
				t.Fatalf("second page: %s", next.raw)
			}
		})
	}
}

// startRawPlatform is a data platform that answers every request with statusLine as is, so
// its reason phrase can be what no well-behaved server sends.
func startRawPlatform(t *testing.T, statusLine string) string {
	return "http://" + testkit.ServeTCP(t, func(conn net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(conn)); err == nil {
			_, _ = io.WriteString(conn, statusLine+"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		}
	})
}

// TestRelay_RecordsAnyPlatformErrorAndGivesUp: a platform whose reason phrase is over 500
// bytes of non-ASCII text, or holds invalid UTF-8 and a NUL, still has each failure recorded on
// every database, so the message ends FAILED after the retries with one alert. Cut at byte 500
// inside a character, or stored as sent, the error was refused by Postgres and MySQL: the message
// stayed PENDING with no attempt counted and was sent again on every claim's expiry.
func TestRelay_RecordsAnyPlatformErrorAndGivesUp(t *testing.T) {
	reasons := map[string]string{
		"long non-ASCII": strings.Repeat("é", 300),
		"invalid UTF-8":  "bad\x00\xff reason",
	}
	for _, storage := range storages {
		for name, reason := range reasons {
			t.Run(storage.name+"/"+name, func(t *testing.T) {
				t.Parallel()
				stores := storage.open(t)
				clock := memory.NewClock(time.Now().UTC().Truncate(time.Millisecond))
				alerts := &memory.Alerts{}
				platform := dataplatform.New(startRawPlatform(t, "HTTP/1.1 503 "+reason), 5*time.Second)
				r := relay.NewService(relay.Deps{Outbox: stores.Outbox, Platform: platform, Notifier: alerts, Clock: clock,
					IDs: system.UUIDs{}}, relay.Config{})
				m := outbox.New(system.UUIDs{}.NewID(), []byte(`{}`), clock.Now())
				if err := stores.Outbox.Add(context.Background(), m); err != nil {
					t.Fatal(err)
				}

				for _, wait := range relay.DefaultBackoff {
					if _, err := r.Relay(context.Background()); err != nil {
						t.Fatal(err)
					}
					clock.Advance(wait)
				}
				if _, err := r.Relay(context.Background()); err != nil {
					t.Fatal(err)
				}

				stored, err := stores.Outbox.Get(context.Background(), m.ID)
				if err != nil {
					t.Fatal(err)
				}
				if stored.Status != outbox.Failed || stored.Attempts != len(relay.DefaultBackoff)+1 ||
					!strings.HasPrefix(stored.LastError, "dataplatform: answered 503 ") || len(stored.LastError) > outbox.MaxErrorLength {
					t.Fatalf("stored %s after %d attempts, last error %q", stored.Status, stored.Attempts, stored.LastError)
				}
				if len(alerts.Raised()) != 1 {
					t.Fatalf("%d alerts, want 1", len(alerts.Raised()))
				}
			})
		}
	}
}
