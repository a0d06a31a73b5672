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
)

// instances are the rushgate servers under load, all in front of the same database and Redis.
// Request i goes to instance i mod n: round-robin by request number, so every instance gets the
// same share whatever the timing.
type instances struct {
	urls   []string
	client *http.Client
}

// newInstances returns instances whose client keeps a connection per concurrent request to each
// server alive, so the run measures requests, not TCP handshakes.
func newInstances(urls []string, concurrency int, timeout time.Duration) *instances {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConns = concurrency * len(urls)
	transport.MaxIdleConnsPerHost = concurrency
	return &instances{urls: urls, client: &http.Client{Transport: transport, Timeout: timeout}}
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
// optional JSON body, and times it up to the last byte of the response. A non-2xx answer's JSON
// "error" code is kept, and a 5xx answer's body as evidence.
func (in *instances) send(ctx context.Context, i int, method, path string, headers map[string]string, body any) (attempt, []byte) {
	k, base := in.pick(i)
	start := time.Now()
	a := attempt{instance: k}
	reqBody := io.Reader(http.NoBody)
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			a.err = fmt.Errorf("encode %s: %w", path, err)
			return a, nil
		}
		reqBody = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, reqBody)
	if err != nil {
		a.err = fmt.Errorf("build %s %s: %w", method, path, err)
		return a, nil
	}
	for name, value := range headers {
		req.Header.Set(name, value)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := in.client.Do(req)
	if err != nil {
		a.latency, a.err = time.Since(start), err
		return a, nil
	}
	raw, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close() // the body is read to the end; nothing is left to lose
	a.latency, a.status = time.Since(start), resp.StatusCode
	if err != nil {
		a.err = fmt.Errorf("read response to %s %s: %w", method, path, err)
		a.status = 0
		return a, nil
	}
	a.ok = resp.StatusCode >= 200 && resp.StatusCode < 300
	if !a.ok {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(raw, &e) == nil {
			a.code = e.Error
		}
	}
	if resp.StatusCode >= http.StatusInternalServerError {
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
