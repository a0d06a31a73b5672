package contract_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	rghttp "github.com/rushgate/rushgate/adapters/http"
	"github.com/rushgate/rushgate/adapters/localblob"
	"github.com/rushgate/rushgate/adapters/s3"
	"github.com/rushgate/rushgate/adapters/system"
	"github.com/rushgate/rushgate/adapters/telemetry"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/ports/porttest"
	"github.com/rushgate/rushgate/test/testenv"
)

// TestObjectStorage runs the object storage suite on local disk, served by rushgate's own
// router, and on versitygw, a real S3-compatible server checking SigV4 presigned URLs.
func TestObjectStorage(t *testing.T) {
	t.Parallel()
	t.Run("localblob", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewUnstartedServer(nil)
		store, err := localblob.New(t.TempDir(), func() string { return "http://" + srv.Listener.Addr().String() },
			[]byte("contract-secret-contract-secret-contract"), system.Clock{})
		if err != nil {
			t.Fatal(err)
		}
		srv.Config.Handler = rghttp.NewRouter(rghttp.Deps{
			Routes: []rghttp.Routes{rghttp.VerificationRoutes(nil, store)}, Tokens: rghttp.NewTokens([]byte("unused")), Metrics: telemetry.NewMetrics(prometheus.NewRegistry()),
			Logger: slog.New(slog.NewTextHandler(testenv.LogWriter(t), nil)),
		})
		srv.Start()
		t.Cleanup(srv.Close)
		porttest.TestObjectStorage(t, func(*testing.T) ports.ObjectStorage { return store }, sendPut, porttest.Capabilities{})
	})
	t.Run("s3-versitygw", func(t *testing.T) {
		t.Parallel()
		gw := testenv.Versitygw(t)
		store := s3.New(s3.Config{Endpoint: gw.Endpoint, Bucket: gw.Bucket, Region: gw.Region,
			AccessKey: gw.AccessKey, SecretKey: gw.SecretKey, PathStyle: true, Timeout: testenv.DependencyTimeout})
		porttest.TestObjectStorage(t, func(*testing.T) ports.ObjectStorage { return store }, sendPut, porttest.Capabilities{})
	})
}

// putClient sends the suites' uploads; its timeout turns a server that never answers into a
// failure instead of a hang.
var putClient = &http.Client{Timeout: testenv.DependencyTimeout}

// sendPut is the suites' porttest.Sender over net/http.
func sendPut(url string, header map[string]string, contentLength int64, body []byte) (int, error) {
	req, err := http.NewRequest(http.MethodPut, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	for name, value := range header {
		req.Header.Set(name, value)
	}
	req.ContentLength = contentLength
	res, err := putClient.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	return res.StatusCode, res.Body.Close()
}
