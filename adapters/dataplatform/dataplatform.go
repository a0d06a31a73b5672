// Package dataplatform delivers outbox messages to the data platform over HTTP, or, with no
// platform configured, logs and accepts them.
package dataplatform

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/rushgate/rushgate/adapters/httppost"
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
	if err := httppost.JSON(ctx, c.client, c.url, payload, http.Header{"Idempotency-Key": {messageID}}); err != nil {
		return fmt.Errorf("dataplatform: %w", err)
	}
	return nil
}

// Logged is the platform of the embedded default: it logs each message and accepts it.
type Logged struct{ Logger *slog.Logger }

// Send logs the message at debug level: a paid order's payload (users, amounts) is not for the
// usual info logs.
func (l Logged) Send(ctx context.Context, messageID string, payload []byte) error {
	l.Logger.DebugContext(ctx, "data platform delivery (no RUSHGATE_DATAPLATFORM_URL: logged only)",
		"messageId", messageID, "payload", string(payload))
	return nil
}
