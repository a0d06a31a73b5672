package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rushgate/rushgate/bootstrap"
	"github.com/rushgate/rushgate/test/testkit"
)

// exchange is what a raw connection got back: the response, if one came, and when the server
// closed the connection.
type exchange struct {
	res    *http.Response
	body   string
	closed time.Duration // since the request was written; zero if still open at the deadline
}

// rawRequest writes request as is on a new connection, then reads the answer and waits for the
// server to close, for at most wait.
func rawRequest(t *testing.T, s *server, request string, wait time.Duration) exchange {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatal(err)
	}
	written := time.Now()
	_ = conn.SetReadDeadline(written.Add(wait))
	r := bufio.NewReader(conn)
	var ex exchange
	if res, err := http.ReadResponse(r, nil); err == nil {
		raw, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		ex.res, ex.body = res, string(raw)
	}
	// The server is done with the connection once a read ends other than by our deadline.
	if _, err := io.Copy(io.Discard, r); !errors.Is(err, os.ErrDeadlineExceeded) {
		ex.closed = time.Since(written)
	}
	return ex
}

// jsonCode is the error code of a JSON error body, or "" when the body is not one.
func jsonCode(ex exchange) string {
	var body struct {
		Error string `json:"error"`
	}
	if ex.res == nil || !strings.Contains(ex.res.Header.Get("Content-Type"), "application/json") ||
		json.Unmarshal([]byte(ex.body), &body) != nil {
		return ""
	}
	return body.Error
}

// TestSlowClient_IsCutOffByTheReadTimeouts: a client that never finishes its headers, or
// declares a body it never sends, with or without a token, is answered or disconnected within
// the configured read timeouts instead of holding the connection as long as it likes.
func TestSlowClient_IsCutOffByTheReadTimeouts(t *testing.T) {
	const (
		headerTimeout = 300 * time.Millisecond
		readTimeout   = 600 * time.Millisecond
	)
	s := startServer(t, backend{name: "memory"}, func(c *bootstrap.Config) {
		c.Server.ReadHeaderTimeout, c.Server.ReadTimeout = headerTimeout, readTimeout
	})
	declaredBody := "POST /crews HTTP/1.1\r\nHost: rushgate\r\nContent-Type: application/json\r\nContent-Length: 100\r\n"
	cases := []struct {
		name, request string
		status        int    // 0: any answer, or none
		code          string // the JSON error code expected with status
	}{
		{"headers never finished", "GET /healthz HTTP/1.1\r\nHost: rushgate\r\nX-Slow: 1\r\n", 0, ""},
		{"body never sent, no token", declaredBody + "\r\n", http.StatusUnauthorized, "UNAUTHORIZED"},
		{"body never sent, admin", declaredBody + "Authorization: Bearer " + s.adminToken() + "\r\n\r\n", http.StatusRequestTimeout, "REQUEST_TIMEOUT"},
		{"body half sent, admin", declaredBody + "Authorization: Bearer " + s.adminToken() + "\r\n\r\n" + `{"name":"sl`, http.StatusRequestTimeout, "REQUEST_TIMEOUT"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ex := rawRequest(t, s, tc.request, 5*time.Second)

			if ex.closed == 0 {
				t.Fatalf("connection still open after 5s, want it closed within %v", readTimeout+time.Second)
			}
			if ex.closed > readTimeout+time.Second {
				t.Fatalf("connection closed after %v, want within %v", ex.closed, readTimeout+time.Second)
			}
			if tc.status != 0 && (ex.res == nil || ex.res.StatusCode != tc.status || jsonCode(ex) != tc.code) {
				t.Fatalf("want %d %s, got %+v %q", tc.status, tc.code, ex.res, ex.body)
			}
		})
	}
}

// TestClientHangingUpMidBody_IsNotAServerError: a client that declares 100 bytes, sends a few
// and hangs up is counted under 499 (client closed request), never as a 500.
func TestClientHangingUpMidBody_IsNotAServerError(t *testing.T) {
	s := startServer(t, backend{name: "memory"})
	request := "POST /crews HTTP/1.1\r\nHost: rushgate\r\nContent-Type: application/json\r\nContent-Length: 100\r\n" +
		"Authorization: Bearer " + s.adminToken() + "\r\n\r\n" + `{"name":"`
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close()

	counted := `rushgate_http_request_duration_seconds_count{method="POST",route="/crews",status="499"} 1`
	var metrics string
	testkit.Eventually(t, 5*time.Second, "the hang-up is counted", func() error {
		res, err := s.http.Get(s.url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		metrics = readAll(t, res)
		if !strings.Contains(metrics, counted) {
			return fmt.Errorf("no %s in the metrics", counted)
		}
		return nil
	})
	if strings.Contains(metrics, `status="500"`) {
		t.Fatal("a hang-up was counted as a server error")
	}
}

// TestProtocolErrors_AnswerJSONWhereTheRouterDecides: what reaches the router is refused in the
// JSON error shape; what net/http refuses before any handler runs (a bad %-escape in the
// request line, headers over the limit) keeps net/http's own text answer, as the README says.
func TestProtocolErrors_AnswerJSONWhereTheRouterDecides(t *testing.T) {
	s := startServer(t, backend{name: "memory"})
	crewID := s.createCrew(3)
	auth := "Authorization: Bearer " + s.token("u1") + "\r\n"
	get := func(target, headers string) string {
		return "GET " + target + " HTTP/1.1\r\nHost: rushgate\r\nConnection: close\r\n" + headers + "\r\n"
	}
	cases := []struct {
		name, request string
		status        int
		code          string // "" when net/http answers in text/plain
	}{
		{"encoded slash in a crew id", get("/crews/a%2Fb", auth), http.StatusBadRequest, "VALIDATION_FAILED"},
		{"NUL in a crew id", get("/crews/%00", auth), http.StatusBadRequest, "VALIDATION_FAILED"},
		{"bad escape in the query", get("/crews/"+crewID+"/members?limit=%zz", auth), http.StatusBadRequest, "VALIDATION_FAILED"},
		{"unknown route", get("/nope", ""), http.StatusNotFound, "NOT_FOUND"},
		{"bad escape in the path (net/http)", get("/crews/%zz", auth), http.StatusBadRequest, ""},
		{"headers over 64 KiB (net/http)", get("/healthz", "X-Big: "+strings.Repeat("a", 80<<10)+"\r\n"), http.StatusRequestHeaderFieldsTooLarge, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ex := rawRequest(t, s, tc.request, 5*time.Second)

			if ex.res == nil || ex.res.StatusCode != tc.status {
				t.Fatalf("want %d, got %+v %q", tc.status, ex.res, ex.body)
			}
			if got := jsonCode(ex); got != tc.code {
				t.Fatalf("error code %q, want %q (body %q)", got, tc.code, ex.body)
			}
		})
	}
}

// TestLongRequest_IsAnsweredOnItsConnectionPastTheReadTimeout: RUSHGATE_READ_TIMEOUT bounds
// reading a request, not handling it. A charge that waits on its user's row (held by the test)
// well past the read timeout is answered on the kept-alive connection it came on, sent once: a
// server that cut it off there would drop the connection, and Go's client transport re-sends a
// request carrying an Idempotency-Key on a dropped kept-alive connection, whose second copy
// then meets the first's record (409 IDEMPOTENCY_IN_PROGRESS).
func TestLongRequest_IsAnsweredOnItsConnectionPastTheReadTimeout(t *testing.T) {
	const readTimeout = 400 * time.Millisecond
	for _, b := range backends(t)[1:] {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, b, func(c *bootstrap.Config) {
				c.Server.ReadHeaderTimeout, c.Server.ReadTimeout = readTimeout/2, readTimeout
			})
			// A client of the test's own, which keeps its idle connection: the charge must go
			// on the one createUser leaves in the pool.
			s.http = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{}}
			s.createUser("long", 1000)

			tx, err := s.db.BeginTx(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			if _, err := tx.Exec(s.query("SELECT balance FROM users WHERE id = ? FOR UPDATE"), "long"); err != nil {
				t.Fatal(err)
			}
			const held = 4 * readTimeout
			// Timed from before the commit is scheduled, so an answer that waited for the row
			// comes at least held later, however late on a loaded machine the request goes out.
			started := time.Now()
			time.AfterFunc(held, func() { _ = tx.Commit() })

			var (
				sent   atomic.Int32
				reused atomic.Bool
			)
			trace := &httptrace.ClientTrace{
				GotConn:      func(info httptrace.GotConnInfo) { reused.Store(info.Reused) },
				WroteRequest: func(httptrace.WroteRequestInfo) { sent.Add(1) },
			}
			req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodPost,
				s.url+"/api/users/long/balance/charge", strings.NewReader(`{"amount":500}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+s.token("long"))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", s.run+"long")
			res, err := s.http.Do(req)
			if err != nil {
				t.Fatalf("charge: %v", err)
			}
			body := readAll(t, res)
			took := time.Since(started)

			if res.StatusCode != http.StatusOK {
				t.Fatalf("charge answered %d %s after %v, want 200", res.StatusCode, body, took)
			}
			if took < held {
				t.Fatalf("answered after %v, before the row was released (%v): the condition was not met", took, held)
			}
			if sent.Load() != 1 || !reused.Load() {
				t.Fatalf("request written %d times, last on a reused connection: %v; want once, on the kept-alive connection",
					sent.Load(), reused.Load())
			}
			s.assertWallet("long", 1500, 2)
		})
	}
}
