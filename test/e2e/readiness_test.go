package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rushgate/rushgate/bootstrap"
	"github.com/rushgate/rushgate/test/testenv"
)

// readinessS3Timeout is RUSHGATE_S3_TIMEOUT in these tests, under /readyz's own one-second bound
// per check, so the bucket probe's timeout is the one that ends a stalled check.
const readinessS3Timeout = 500 * time.Millisecond

// TestReadyz_ChecksTheObjectStoreForReal asks /readyz with the object store healthy, unwritable
// or not answering, on local disk and on S3, and requires `storage` named as it is: ok with 200,
// or failing with 503 UNAVAILABLE, within the store's timeout plus slack when it hangs.
func TestReadyz_ChecksTheObjectStoreForReal(t *testing.T) {
	onS3 := func(endpoint, bucket string, gw testenv.S3) func(*bootstrap.Config) {
		return func(c *bootstrap.Config) {
			c.Storage.S3Endpoint, c.Storage.S3Bucket, c.Storage.S3Region = endpoint, bucket, gw.Region
			c.Storage.S3AccessKey, c.Storage.S3SecretKey = gw.AccessKey, gw.SecretKey
			c.Storage.S3PathStyle, c.Storage.S3Timeout = true, readinessS3Timeout
		}
	}
	anyCredentials := testenv.S3{Region: "us-east-1", AccessKey: "rushgate", SecretKey: "rushgate-secret"}
	closed, err := testenv.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name string
		// storage configures the store; nil keeps the tests' local disk.
		storage func(t *testing.T) func(*bootstrap.Config)
		// disturb breaks the store once the server runs; nil leaves it as configured.
		disturb func(t *testing.T, c bootstrap.Config)
		ready   bool
	}{
		{name: "local disk", ready: true},
		{
			name: "local disk whose data directory became a file",
			storage: func(t *testing.T) func(*bootstrap.Config) {
				dir := filepath.Join(t.TempDir(), "data")
				return func(c *bootstrap.Config) { c.Storage.DataDir = dir }
			},
			// A file where the directory was: nothing can be created under it, even by root.
			disturb: func(t *testing.T, c bootstrap.Config) {
				if err := os.RemoveAll(c.Storage.DataDir); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(c.Storage.DataDir, []byte("not a directory"), 0o600); err != nil {
					t.Fatal(err)
				}
			},
		},
		{name: "S3 bucket answering", ready: true, storage: func(t *testing.T) func(*bootstrap.Config) {
			gw := testenv.Versitygw(t)
			return onS3(gw.Endpoint, gw.Bucket, gw)
		}},
		{name: "S3 without the bucket", storage: func(t *testing.T) func(*bootstrap.Config) {
			gw := testenv.Versitygw(t)
			return onS3(gw.Endpoint, "no-such-bucket", gw)
		}},
		{name: "S3 server down", storage: func(*testing.T) func(*bootstrap.Config) {
			return onS3("http://127.0.0.1:"+strconv.Itoa(closed[0]), "rushgate", anyCredentials)
		}},
		{name: "S3 server frozen", storage: func(t *testing.T) func(*bootstrap.Config) {
			return onS3(testenv.SilentServer(t), "rushgate", anyCredentials)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var cfg bootstrap.Config
			tweaks := []func(*bootstrap.Config){}
			if tc.storage != nil {
				tweaks = append(tweaks, tc.storage(t))
			}
			s := startServer(t, testBackends[0], append(tweaks, func(c *bootstrap.Config) { cfg = *c })...)
			if tc.disturb != nil {
				tc.disturb(t, cfg)
			}

			started := time.Now()
			res := s.do("GET", "/readyz", "", "")
			took := time.Since(started)

			checks, _ := res.body["checks"].(map[string]any)
			if tc.ready {
				if res.status != http.StatusOK || checks["storage"] != "ok" {
					t.Fatalf("/readyz with storage healthy: %d %s", res.status, res.raw)
				}
				return
			}
			assertError(t, res, http.StatusServiceUnavailable, "UNAVAILABLE")
			if checks["storage"] != "failing" || !strings.Contains(res.str("message"), "storage") {
				t.Fatalf("/readyz does not name storage failing: %s", res.raw)
			}
			if checks["database"] != "ok" || checks["redis"] != "ok" {
				t.Fatalf("/readyz blames more than storage: %s", res.raw)
			}
			if limit := readinessS3Timeout + 500*time.Millisecond; took > limit {
				t.Fatalf("/readyz answered after %v, want within the storage timeout + slack (%v)", took, limit)
			}
		})
	}
}
