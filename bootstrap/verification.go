package bootstrap

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"

	"go.uber.org/fx"

	"github.com/rushgate/rushgate/adapters/localblob"
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
var VerificationModule = fx.Module("verification",
	fx.Provide(provideObjectStorage, provideVerificationService, func() *listenAddress { return &listenAddress{} }),
)

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
		return objectStorage{}, err
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

func provideVerificationService(cfg Config, stores ports.Stores, storage ports.ObjectStorage, g *guard.Guard,
	clock ports.Clock, ids ports.IDGenerator) *verification.Service {
	return verification.NewService(verification.Deps{
		Tx:            stores.Tx,
		Challenges:    stores.Challenges,
		Sessions:      stores.UploadSessions,
		Verifications: stores.Verifications,
		Crews:         stores.Crews,
		Storage:       storage,
		Guard:         g,
		Clock:         clock,
		IDs:           ids,
	}, verification.Config{
		Files:           challenge.FileRules{MaxBytes: cfg.Upload.MaxBytes},
		UploadURLExpiry: cfg.Upload.URLExpiry,
		SessionExpiry:   cfg.Upload.SessionExpiry,
		MaxBatch:        cfg.Guard.LockMaxBatch,
	})
}

// runSessionExpirer expires abandoned upload sessions every RUSHGATE_EXPIRY_INTERVAL.
func runSessionExpirer(lc fx.Lifecycle, cfg Config, service *verification.Service, log *slog.Logger) {
	every(lc, cfg.Upload.ExpiryInterval, func(ctx context.Context) {
		n, err := service.ExpireSessions(ctx, sessionExpiryBatch)
		if err != nil && ctx.Err() == nil {
			log.Warn("expiring upload sessions failed; next round retries", "error", err, "expired", n)
		}
	})
}
