package s3_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rushgate/rushgate/adapters/s3"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testenv"
)

// pingTimeout is the stores' Config.Timeout in these tests; slack is what a loaded machine adds,
// well short of the second timeout a retried call would wait.
const (
	pingTimeout = 2 * time.Second
	slack       = time.Second
)

func storeAt(endpoint, bucket string, gw testenv.S3) *s3.Store {
	return s3.New(s3.Config{Endpoint: endpoint, Bucket: bucket, Region: gw.Region,
		AccessKey: gw.AccessKey, SecretKey: gw.SecretKey, PathStyle: true, Timeout: pingTimeout})
}

func TestPing_PassesWhenTheBucketAnswers(t *testing.T) {
	t.Parallel()
	gw := testenv.Versitygw(t)

	if err := storeAt(gw.Endpoint, gw.Bucket, gw).Ping(context.Background()); err != nil {
		t.Fatalf("Ping of a live bucket: %v", err)
	}
}

func TestPing_FailsOnABucketThatDoesNotExist(t *testing.T) {
	t.Parallel()
	gw := testenv.Versitygw(t)

	err := storeAt(gw.Endpoint, "no-such-bucket", gw).Ping(context.Background())
	if err == nil || errors.Is(err, ports.ErrUnavailable) {
		t.Fatalf("Ping of a missing bucket: %v, want storage's refusal", err)
	}
}

// A server that is down (nothing listens) and one that accepts but never answers both fail
// Ping as unavailable, the second within the store's timeout.
func TestPing_FailsUnavailableWithinTheTimeoutWhenStorageDoesNotAnswer(t *testing.T) {
	t.Parallel()
	closed, err := testenv.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	for name, endpoint := range map[string]string{
		"nothing listening":  "http://127.0.0.1:" + strconv.Itoa(closed[0]),
		"accepts, no answer": testenv.SilentServer(t),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			store := storeAt(endpoint, "rushgate", testenv.S3{Region: "us-east-1", AccessKey: "a", SecretKey: "b"})
			started := time.Now()
			err := store.Ping(context.Background())
			took := time.Since(started)
			if !errors.Is(err, ports.ErrUnavailable) {
				t.Fatalf("Ping: %v, want ports.ErrUnavailable", err)
			}
			if took > pingTimeout+slack {
				t.Fatalf("Ping took %v, want within the %v timeout + %v", took, pingTimeout, slack)
			}
		})
	}
}

// A storage server that accepts the connection and never answers (frozen) fails each call a
// verification makes with ports.ErrUnavailable within the store's timeout, rather than holding
// the request that needs it.
func TestStore_AFrozenServerIsUnavailableWithinTheTimeout(t *testing.T) {
	t.Parallel()
	store := storeAt(testenv.SilentServer(t), "rushgate", testenv.S3{Region: "us-east-1", AccessKey: "a", SecretKey: "b"})
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
			t.Parallel()
			started := time.Now()
			err := call(context.Background())
			took := time.Since(started)
			if !errors.Is(err, ports.ErrUnavailable) {
				t.Fatalf("want ports.ErrUnavailable, got %v", err)
			}
			if took < pingTimeout || took > pingTimeout+slack {
				t.Fatalf("answered after %v, want the timeout %v (+ at most %v)", took, pingTimeout, slack)
			}
		})
	}
}

// A presigned URL lasts at least until the expiry the client is told, counted from before it was
// signed: SigV4 counts X-Amz-Expires from X-Amz-Date, the signing time truncated to the second,
// so the URL is signed for longer than the grant. Read from the URL, no clock is waited on.
func TestPresignPut_TheURLLastsAtLeastTheGrantedExpiry(t *testing.T) {
	t.Parallel()
	store := storeAt("http://127.0.0.1:1", "rushgate", testenv.S3{Region: "us-east-1", AccessKey: "a", SecretKey: "b"})
	for _, expiry := range []time.Duration{time.Second, 1500 * time.Millisecond, 5 * time.Minute, s3.MaxURLExpiry} {
		before := time.Now()
		signed, err := store.PresignPut(context.Background(), ports.UploadGrant{Key: "k", ContentType: "image/png", ContentLength: 4, Expiry: expiry})
		if err != nil {
			t.Fatal(err)
		}
		u, err := url.Parse(signed.URL)
		if err != nil {
			t.Fatal(err)
		}
		signedAt, err := time.Parse("20060102T150405Z", u.Query().Get("X-Amz-Date"))
		if err != nil {
			t.Fatal(err)
		}
		seconds, err := strconv.Atoi(u.Query().Get("X-Amz-Expires"))
		if err != nil {
			t.Fatal(err)
		}
		if until := signedAt.Add(time.Duration(seconds) * time.Second); until.Before(before.Add(expiry)) {
			t.Errorf("expiry %v: the URL ends at %v, before %v", expiry, until, before.Add(expiry))
		}
		if seconds > 7*24*3600 {
			t.Errorf("expiry %v: X-Amz-Expires %d is past S3's week", expiry, seconds)
		}
	}
	if _, err := store.PresignPut(context.Background(), ports.UploadGrant{Key: "k", ContentType: "image/png", ContentLength: 4,
		Expiry: s3.MaxURLExpiry + time.Millisecond}); err == nil {
		t.Error("an expiry past MaxURLExpiry was signed")
	}
}

// AWS answers a HEAD of a missing object with 403 when the caller lacks s3:ListBucket, exactly as
// it answers credentials it refuses (a HEAD's answer has no body to tell them apart). Neither is
// taken as "no object" (IMAGE_NOT_UPLOADED would hide a misconfigured server behind the
// client's fault): each call fails as storage's refusal, not unavailable, naming the access
// rushgate needs, and so does the readiness check.
func TestStore_ARefusalIsNeitherAMissingObjectNorUnavailableAndNamesTheAccessNeeded(t *testing.T) {
	t.Parallel()
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		if r.Method != http.MethodHead {
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`))
		}
	}))
	t.Cleanup(refusing.Close)
	store := storeAt(refusing.URL, "rushgate", testenv.S3{Region: "us-east-1", AccessKey: "a", SecretKey: "b"})
	calls := map[string]func(ctx context.Context) error{
		"Stat": func(ctx context.Context) error {
			_, err := store.Stat(ctx, "uploads/u/missing.png")
			return err
		},
		"ReadHead": func(ctx context.Context) error {
			_, err := store.ReadHead(ctx, "uploads/u/missing.png", 16)
			return err
		},
		"Ping": store.Ping,
	}
	for name, call := range calls {
		err := call(context.Background())
		if err == nil || errors.Is(err, ports.ErrObjectNotFound) || errors.Is(err, ports.ErrUnavailable) {
			t.Errorf("%s on a 403: %v, want storage's refusal", name, err)
			continue
		}
		if !strings.Contains(err.Error(), "s3:ListBucket") || !strings.Contains(err.Error(), "s3:GetObject") {
			t.Errorf("%s on a 403: %q does not name the access rushgate needs", name, err)
		}
	}
}
