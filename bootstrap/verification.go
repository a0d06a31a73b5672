package bootstrap

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/fx"

	"github.com/rushgate/rushgate/adapters/gormdb"
	rghttp "github.com/rushgate/rushgate/adapters/http"
	"github.com/rushgate/rushgate/adapters/localblob"
	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/adapters/s3"
	"github.com/rushgate/rushgate/adapters/telemetry"
	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/application/verification"
	"github.com/rushgate/rushgate/domain/challenge"
	"github.com/rushgate/rushgate/ports"
)

// sessionExpiryBatch bounds one UPDATE of the expiry worker.
const sessionExpiryBatch = 500

// VerificationModule builds the challenge verification use cases on S3 or local-disk storage.
var VerificationModule = flow("verification",
	fx.Provide(storesOn(memory.NewVerificationStores, gormdb.NewVerificationStores),
		provideObjectStorage, provideVerificationService, func() *listenAddress { return &listenAddress{} }),
	fx.Invoke(runSessionExpirer),
	routes(rghttp.VerificationRoutes),
)

// StorageConfig is where uploaded photos go: an S3 bucket when RUSHGATE_S3_BUCKET is set, else
// files under DataDir uploaded through rushgate's own signed route.
type StorageConfig struct {
	// S3Endpoint is the S3 API's base URL, e.g. http://127.0.0.1:7070. Unset: AWS's endpoint of
	// the region.
	S3Endpoint string `env:"RUSHGATE_S3_ENDPOINT"`
	// S3Bucket selects S3 storage. Unset: local disk under RUSHGATE_DATA_DIR.
	S3Bucket string `env:"RUSHGATE_S3_BUCKET"`
	// S3Region is the bucket's region.
	S3Region string `env:"RUSHGATE_S3_REGION"`
	// S3AccessKey and S3SecretKey are the credentials presigned URLs are signed with.
	S3AccessKey string `env:"RUSHGATE_S3_ACCESS_KEY"`
	S3SecretKey string `env:"RUSHGATE_S3_SECRET_KEY"`
	// S3PathStyle addresses the bucket in the path, as S3-compatible servers usually need.
	S3PathStyle bool `env:"RUSHGATE_S3_PATH_STYLE"`
	// S3Timeout bounds each call to S3 (503 beyond).
	S3Timeout time.Duration `env:"RUSHGATE_S3_TIMEOUT"`
	// DataDir holds local uploads. Unset: rushgate-uploads under the OS temp directory.
	DataDir string `env:"RUSHGATE_DATA_DIR"`
	// PublicURL is the base of local upload URLs, as clients reach this server. Unset: http://
	// and the address the server listens on.
	PublicURL string `env:"RUSHGATE_PUBLIC_URL"`
}

func (c *StorageConfig) setDefaults() {
	c.S3Region = "us-east-1"
	c.S3Timeout = time.Second
}

// Validate checks the storage settings.
func (c StorageConfig) Validate() error {
	if c.S3Bucket == "" {
		if c.S3Endpoint != "" || c.S3AccessKey != "" || c.S3SecretKey != "" {
			return errors.New("RUSHGATE_S3_BUCKET: must be set with the other RUSHGATE_S3_* settings")
		}
	} else if c.S3AccessKey == "" || c.S3SecretKey == "" {
		return errors.New("RUSHGATE_S3_ACCESS_KEY: RUSHGATE_S3_ACCESS_KEY and RUSHGATE_S3_SECRET_KEY are required with RUSHGATE_S3_BUCKET")
	}
	if c.S3Endpoint != "" {
		if u, err := url.Parse(c.S3Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("RUSHGATE_S3_ENDPOINT: %q is not an http(s) URL", c.S3Endpoint)
		}
	}
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("RUSHGATE_PUBLIC_URL: %q is not an http(s) URL", c.PublicURL)
		}
		// Upload URLs are this base, the route's path and their signed query: a path prefix
		// (a proxy's) carries over, a query, fragment or credentials would break them.
		if u.RawQuery != "" || u.ForceQuery || strings.Contains(c.PublicURL, "#") || u.User != nil {
			return fmt.Errorf("RUSHGATE_PUBLIC_URL: %q has a query, fragment or credentials; give scheme, host and path only", c.PublicURL)
		}
	}
	return allPositive(positive{"RUSHGATE_S3_TIMEOUT", c.S3Timeout > 0})
}

// UploadConfig bounds uploads and their sessions.
type UploadConfig struct {
	// MaxBytes is the largest file a session accepts.
	MaxBytes int64 `env:"RUSHGATE_UPLOAD_MAX_BYTES"`
	// URLExpiry is how long a presigned upload URL works.
	URLExpiry time.Duration `env:"RUSHGATE_UPLOAD_URL_EXPIRY"`
	// SessionExpiry is how old a PENDING session may get before it is refused and expired.
	SessionExpiry time.Duration `env:"RUSHGATE_UPLOAD_SESSION_EXPIRY"`
	// ExpiryInterval is how often the expiry worker runs.
	ExpiryInterval time.Duration `env:"RUSHGATE_EXPIRY_INTERVAL"`
}

func (c *UploadConfig) setDefaults() {
	c.MaxBytes = challenge.DefaultMaxFileBytes
	c.URLExpiry = verification.DefaultUploadURLExpiry
	c.SessionExpiry = verification.DefaultSessionExpiry
	c.ExpiryInterval = time.Minute
}

// Validate checks the upload settings.
func (c UploadConfig) Validate() error {
	// S3's signatures (SigV4) last at most a week, a second of which the S3 store keeps for
	// rounding; the local store keeps the same bound.
	if c.URLExpiry > s3.MaxURLExpiry {
		return fmt.Errorf("RUSHGATE_UPLOAD_URL_EXPIRY: %v is longer than an S3 signature lasts (%v)", c.URLExpiry, s3.MaxURLExpiry)
	}
	return allPositive(
		positive{"RUSHGATE_UPLOAD_MAX_BYTES", c.MaxBytes > 0},
		positive{"RUSHGATE_UPLOAD_URL_EXPIRY", c.URLExpiry >= time.Second},
		positive{"RUSHGATE_UPLOAD_SESSION_EXPIRY", c.SessionExpiry > 0},
		positive{"RUSHGATE_EXPIRY_INTERVAL", c.ExpiryInterval > 0},
	)
}

// listenAddress is the address the HTTP server listens on, once it does: local upload URLs
// default to it, and with RUSHGATE_ADDR's port 0 it is known only then.
type listenAddress struct{ atomic.Pointer[net.Addr] }

// objectStorage is where uploads go; Uploads is set only for local disk, whose route the HTTP
// server serves.
type objectStorage struct {
	fx.Out
	Storage   ports.ObjectStorage
	Uploads   *localblob.Store
	Readiness telemetry.ReadinessCheck `group:"readiness"`
}

func provideObjectStorage(cfg Config, clock ports.Clock, listening *listenAddress, log *slog.Logger) (objectStorage, error) {
	sc := cfg.Storage
	if sc.S3Bucket != "" {
		store := s3.New(s3.Config{Endpoint: sc.S3Endpoint, Bucket: sc.S3Bucket, Region: sc.S3Region,
			AccessKey: sc.S3AccessKey, SecretKey: sc.S3SecretKey, PathStyle: sc.S3PathStyle, Timeout: sc.S3Timeout})
		log.Info("uploads go to S3", "bucket", sc.S3Bucket, "endpoint", sc.S3Endpoint)
		return objectStorage{Storage: store, Readiness: telemetry.ReadinessCheck{Name: "storage", Check: store.Ping}}, nil
	}
	dir := sc.DataDir
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "rushgate-uploads")
	}
	publicURL := func() string {
		if sc.PublicURL != "" {
			return sc.PublicURL
		}
		return urlOf(listening.Load())
	}
	store, err := localblob.New(dir, publicURL, uploadSecret(cfg), clock)
	if err != nil {
		return objectStorage{}, fmt.Errorf("RUSHGATE_DATA_DIR: %w", err)
	}
	log.Info("uploads go to local disk through rushgate's signed upload route; set RUSHGATE_S3_BUCKET to use S3", "dir", dir)
	return objectStorage{Storage: store, Uploads: store, Readiness: telemetry.ReadinessCheck{Name: "storage", Check: store.Ping}}, nil
}

// urlOf is the http URL of a listening address; a wildcard host becomes the loopback one.
func urlOf(addr *net.Addr) string {
	if addr == nil {
		return "http://127.0.0.1:8080"
	}
	host, port, _ := net.SplitHostPort((*addr).String())
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// uploadSecret signs local upload URLs: derived from RUSHGATE_JWT_SECRET, so every instance
// sharing the secret (and the data directory) accepts the others' URLs, or random for this
// process when no secret is set.
func uploadSecret(cfg Config) []byte {
	if cfg.Auth.JWTSecret == "" {
		secret := make([]byte, 32)
		_, _ = rand.Read(secret)
		return secret
	}
	mac := hmac.New(sha256.New, []byte(cfg.Auth.JWTSecret))
	mac.Write([]byte("rushgate local upload URLs"))
	return mac.Sum(nil)
}

func provideVerificationService(cfg Config, tx ports.TxRunner, stores ports.VerificationStores, crews ports.CrewStores, storage ports.ObjectStorage, g *guard.Guard,
	clock ports.Clock, ids ports.IDGenerator) *verification.Service {
	return verification.NewService(verification.Deps{
		Tx:            tx,
		Challenges:    stores.Challenges,
		Sessions:      stores.UploadSessions,
		Verifications: stores.Verifications,
		Crews:         crews.Crews,
		Storage:       storage,
		Guard:         g,
		Clock:         clock,
		IDs:           ids,
	}, verification.Config{
		Files:           challenge.FileRules{MaxBytes: cfg.Upload.MaxBytes},
		UploadURLExpiry: cfg.Upload.URLExpiry,
		SessionExpiry:   cfg.Upload.SessionExpiry,
		MaxBatch:        cfg.Guard.LockMaxBatch,
		Timeout:         cfg.Database.Timeout,
	})
}

// runSessionExpirer expires abandoned upload sessions every RUSHGATE_EXPIRY_INTERVAL.
func runSessionExpirer(lc fx.Lifecycle, cfg Config, service *verification.Service, log *slog.Logger) {
	runUntilStop(lc, every(cfg.Upload.ExpiryInterval, func(ctx context.Context) {
		n, err := service.ExpireSessions(ctx, sessionExpiryBatch)
		if err != nil && ctx.Err() == nil {
			log.Warn("expiring upload sessions failed; next round retries", "error", err, "expired", n)
		}
	}))
}
