package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// instances are the rushgate servers under load, all in front of the same database and Redis.
// Request i goes to instance i mod n: round-robin by request number, so every instance gets the
// same share whatever the timing.
//
// Requests go through fasthttp's client rather than net/http's: the load runs on the same
// cores as the servers it measures, and net/http's client (two goroutines per connection, a
// handful of allocations per request) took a quarter of the machine at 10,000 requests/s —
// CPU the servers under test then lacked.
type instances struct {
	urls    []string
	client  *fasthttp.Client
	timeout time.Duration
}

// newInstances returns instances whose client keeps a connection per concurrent request to each
// server alive, so the run measures requests, not TCP handshakes. Requests beyond that wait
// for a connection rather than fail.
func newInstances(urls []string, concurrency int, timeout time.Duration) *instances {
	return &instances{urls: urls, timeout: timeout, client: &fasthttp.Client{
		MaxConnsPerHost:          concurrency + 16, // the workers, and the odd sampler beside them
		MaxConnWaitTimeout:       timeout,
		ReadTimeout:              timeout,
		WriteTimeout:             timeout,
		NoDefaultUserAgentHeader: true,
		DisablePathNormalizing:   true, // a signed upload URL's escaped key (%2F) must reach the server as signed
		MaxResponseBodySize:      64 << 20,
	}}
}

// pick is the instance request i goes to, and its base URL.
func (in *instances) pick(i int) (int, string) {
	k := i % len(in.urls)
	return k, in.urls[k]
}

// post sends one POST to path on the instance request i goes to; see send.
func (in *instances) post(ctx context.Context, i int, path string, headers map[string]string, body any) (attempt, []byte) {
	return in.send(ctx, i, http.MethodPost, path, headers, body)
}

// send sends one request to path on the instance request i goes to, with headers and an
// optional JSON body; see exchange.
func (in *instances) send(ctx context.Context, i int, method, path string, headers map[string]string, body any) (attempt, []byte) {
	k, base := in.pick(i)
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			return attempt{instance: k, err: fmt.Errorf("encode %s: %w", path, err)}, nil
		}
	}
	a, answer := in.exchange(ctx, method, base+path, headers, raw)
	a.instance = k
	return a, answer
}

// exchange sends one request to url and times it up to the last byte of the response; a body is
// sent as JSON unless headers name another Content-Type. A
// non-2xx answer's JSON "error" code is kept, and a 5xx answer's body as evidence. The request
// is not sent once ctx is done; one in flight ends within the client's timeout.
func (in *instances) exchange(ctx context.Context, method, url string, headers map[string]string, body []byte) (attempt, []byte) {
	if err := ctx.Err(); err != nil {
		return attempt{err: err}, nil
	}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(method)
	req.SetRequestURI(url)
	if body != nil {
		req.Header.SetContentType("application/json")
	}
	for name, value := range headers {
		req.Header.Set(name, value)
	}
	if body != nil {
		req.SetBody(body)
	}
	start := time.Now()
	err := in.client.DoTimeout(req, resp, in.timeout)
	a := attempt{latency: time.Since(start)}
	if err != nil {
		a.err = fmt.Errorf("%s %s: %w", method, url, err)
		return a, nil
	}
	raw := slices.Clone(resp.Body()) // resp is reused once released
	a.status = resp.StatusCode()
	a.ok = a.status >= 200 && a.status < 300
	if !a.ok {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(raw, &e) == nil {
			a.code = e.Error
		}
	}
	if a.status >= http.StatusInternalServerError {
		a.detail = snippet(raw)
	}
	return a, raw
}

// urlList is the repeatable, comma-separable --url flag.
type urlList struct {
	urls []string
	set  bool // false while urls holds the default
}

func (u *urlList) String() string { return strings.Join(u.urls, ",") }

// Set adds the comma-separated URLs in v; the first call replaces the default.
func (u *urlList) Set(v string) error {
	if !u.set {
		u.urls, u.set = nil, true
	}
	for s := range strings.SplitSeq(v, ",") {
		s = strings.TrimRight(strings.TrimSpace(s), "/")
		if s == "" {
			continue
		}
		parsed, err := url.Parse(s)
		if err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.Host == "" {
			return fmt.Errorf("%q is not an http(s) base URL", s)
		}
		u.urls = append(u.urls, s)
	}
	if len(u.urls) == 0 {
		return errors.New("no URL given")
	}
	return nil
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
