// Package httppost sends one JSON POST to a receiver outside rushgate (the data platform, an
// alert webhook), for the adapters that deliver to one.
package httppost

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
)

// maxDrained bounds how much of an answer's body is read, only so the connection can be reused.
const maxDrained = 64 << 10

// JSON posts body as application/json to url with the extra headers, and a W3C traceparent
// header naming the span ctx carries, when it carries one. Any 2xx is delivered; another
// status is an error naming it.
func JSON(ctx context.Context, client *http.Client, url string, body []byte, header http.Header) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for name, values := range header {
		req.Header[name] = values
	}
	req.Header.Set("Content-Type", "application/json")
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, maxDrained))
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return fmt.Errorf("answered %s", res.Status)
	}
	return nil
}
