// Package dataplatform delivers outbox messages to the data platform over HTTP, or, with no
// platform configured, logs and accepts them.
package dataplatform

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/rushgate/rushgate/ports"
)

var (
	_ ports.DataPlatform = (*Client)(nil)
	_ ports.DataPlatform = Logged{}
)

// Client POSTs each message to the platform's URL with the header Idempotency-Key: <messageID>;
// any 2xx is success.
type Client struct {
	url    string
	client *http.Client
}

// New returns a client of the platform at url whose every call is bounded by timeout.
func New(url string, timeout time.Duration) *Client {
	return &Client{url: url, client: &http.Client{Timeout: timeout}}
}

// Send posts payload once.
func (c *Client) Send(ctx context.Context, messageID string, payload []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(payload))
	if err != nil {
		return fmt.Errorf("dataplatform: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", messageID)
	res, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("dataplatform: %w", err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return fmt.Errorf("dataplatform: answered %s", res.Status)
	}
	return nil
}

// Logged is the platform of the embedded default: it logs each message and accepts it.
type Logged struct{ Logger *slog.Logger }

// Send logs the message.
func (l Logged) Send(ctx context.Context, messageID string, payload []byte) error {
	l.Logger.InfoContext(ctx, "data platform delivery (no RUSHGATE_DATAPLATFORM_URL: logged only)",
		"messageId", messageID, "payload", string(payload))
	return nil
}
