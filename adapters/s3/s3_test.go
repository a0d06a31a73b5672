package s3_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rushgate/rushgate/adapters/s3"
	"github.com/rushgate/rushgate/ports"
)

// stallAllowance is SPEC §0's margin over a dependency's timeout for a request's answer.
const stallAllowance = 500 * time.Millisecond

// A storage server that accepts the connection and never answers (frozen) fails each call with
// ports.ErrUnavailable within Config.Timeout, rather than holding the verification that needs it.
func TestStore_AFrozenServerIsUnavailableWithinTheTimeout(t *testing.T) {
	frozen := make(chan struct{})
	server := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-frozen }))
	// Unblock the handlers before Close, which waits for them.
	t.Cleanup(server.Close)
	t.Cleanup(func() { close(frozen) })
	const timeout = 300 * time.Millisecond
	store := s3.New(s3.Config{Endpoint: server.URL, Bucket: "b", Region: "us-east-1",
		AccessKey: "k", SecretKey: "s", PathStyle: true, Timeout: timeout})

	calls := map[string]func(ctx context.Context) error{
		"Stat": func(ctx context.Context) error {
			_, err := store.Stat(ctx, "some/key.jpg")
			return err
		},
		"ReadHead": func(ctx context.Context) error {
			_, err := store.ReadHead(ctx, "some/key.jpg", 16)
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			started := time.Now()
			err := call(context.Background())
			took := time.Since(started)
			if !errors.Is(err, ports.ErrUnavailable) {
				t.Fatalf("want ports.ErrUnavailable, got %v", err)
			}
			if took < timeout || took > timeout+stallAllowance {
				t.Fatalf("answered after %v, want the timeout %v (+ at most %v)", took, timeout, stallAllowance)
			}
		})
	}
}
