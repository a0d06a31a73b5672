// Package s3 stores uploads in an S3 bucket (AWS or an S3-compatible server) through
// aws-sdk-go-v2: presigned PUTs whose SigV4 signature covers Content-Type and Content-Length,
// HeadObject for Stat and a ranged GetObject for ReadHead. It implements ports.ObjectStorage.
package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/rushgate/rushgate/ports"
)

var _ ports.ObjectStorage = (*Store)(nil)

// Config is where the bucket is and how to reach it.
type Config struct {
	Endpoint  string // empty: AWS's endpoint for Region
	Bucket    string
	Region    string
	AccessKey string
	SecretKey string
	// PathStyle addresses the bucket in the path (endpoint/bucket/key), as S3-compatible servers
	// usually need, instead of as a host name.
	PathStyle bool
	// Timeout bounds each call to storage (ports.ErrUnavailable beyond).
	Timeout time.Duration
}

// Store is one bucket.
type Store struct {
	bucket  string
	client  *awss3.Client
	presign *awss3.PresignClient
}

// New returns the store of cfg's bucket; it does not call storage.
func New(cfg Config) *Store {
	client := awss3.New(awss3.Options{
		Region:       cfg.Region,
		Credentials:  credentials.NewStaticCredentialsProvider(cfg.AccessKey, cfg.SecretKey, ""),
		UsePathStyle: cfg.PathStyle,
		BaseEndpoint: optional(cfg.Endpoint),
		HTTPClient:   &http.Client{Timeout: cfg.Timeout},
		// Checksums are computed only where an operation requires one: a presigned PUT's body
		// is the client's, so the URL must not demand a checksum rushgate cannot know.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
		RetryMaxAttempts:           1,
	})
	return &Store{bucket: cfg.Bucket, client: client, presign: awss3.NewPresignClient(client)}
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// MaxURLExpiry is the longest grant.Expiry PresignPut signs: SigV4 signatures last at most a
// week, and PresignPut signs a second more than it is asked (see signedExpiry).
const MaxURLExpiry = 7*24*time.Hour - time.Second

// signedExpiry is how long a URL granted for expiry is signed for. SigV4 counts the expiry from
// the signing time truncated to the second, so a URL signed for exactly expiry would end up to a
// second before now + expiry, the end the client was told; whole seconds rounded up, plus one,
// always last until then.
func signedExpiry(expiry time.Duration) time.Duration {
	return (expiry + time.Second - 1).Truncate(time.Second) + time.Second
}

// PresignPut signs a PUT of grant's key, content type and length, only if the key holds no
// object yet, locally (no call to storage), valid at least until now + grant.Expiry (at most
// MaxURLExpiry); the signed headers other than Host are what the client must send.
func (s *Store) PresignPut(ctx context.Context, grant ports.UploadGrant) (ports.PresignedUpload, error) {
	if grant.Expiry > MaxURLExpiry {
		return ports.PresignedUpload{}, fmt.Errorf("s3: presign put %s: an expiry of %v is longer than %v", grant.Key, grant.Expiry, MaxURLExpiry)
	}
	req, err := s.presign.PresignPutObject(ctx, &awss3.PutObjectInput{
		Bucket:        &s.bucket,
		Key:           &grant.Key,
		ContentType:   &grant.ContentType,
		ContentLength: &grant.ContentLength,
		// A conditional write: storage refuses a PUT to a key that already holds an object, so a
		// checked upload cannot be replaced while its URL still works.
		IfNoneMatch: aws.String("*"),
	}, awss3.WithPresignExpires(signedExpiry(grant.Expiry)))
	if err != nil {
		return ports.PresignedUpload{}, fmt.Errorf("s3: presign put %s: %w", grant.Key, err)
	}
	headers := make(map[string]string, len(req.SignedHeader))
	for name, values := range req.SignedHeader {
		if name == "Host" || len(values) == 0 {
			continue
		}
		headers[http.CanonicalHeaderKey(name)] = values[0]
	}
	return ports.PresignedUpload{URL: req.URL, RequiredHeaders: headers}, nil
}

// Stat returns the object's size from HeadObject.
func (s *Store) Stat(ctx context.Context, key string) (int64, error) {
	out, err := s.client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &s.bucket, Key: &key})
	if err != nil {
		return 0, translate("head "+key, err)
	}
	return aws.ToInt64(out.ContentLength), nil
}

// ReadHead returns the object's first n bytes with one ranged GetObject.
func (s *Store) ReadHead(ctx context.Context, key string, n int) ([]byte, error) {
	byteRange := "bytes=0-" + strconv.Itoa(n-1)
	out, err := s.client.GetObject(ctx, &awss3.GetObjectInput{Bucket: &s.bucket, Key: &key, Range: &byteRange})
	if err != nil {
		var apiErr smithy.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode() == "InvalidRange" {
			return []byte{}, nil // an empty object has no byte 0
		}
		return nil, translate("get "+key, err)
	}
	defer out.Body.Close()
	head, err := io.ReadAll(io.LimitReader(out.Body, int64(n)))
	if err != nil {
		return nil, fmt.Errorf("s3: read %s: %w: %w", key, ports.ErrUnavailable, err)
	}
	return head, nil
}

// Ping reports whether the bucket answers: one HeadBucket, bounded by Config.Timeout like every
// call. No answer, a timeout or a 5xx wraps ports.ErrUnavailable; storage's refusal (no such
// bucket, credentials refused) is returned as its answer.
func (s *Store) Ping(ctx context.Context) error {
	_, err := s.client.HeadBucket(ctx, &awss3.HeadBucketInput{Bucket: &s.bucket})
	if err == nil {
		return nil
	}
	if err = translate("head bucket "+s.bucket, err); errors.Is(err, ports.ErrObjectNotFound) {
		return fmt.Errorf("s3: bucket %s does not exist", s.bucket) // HeadBucket's 404 names no object
	}
	return err
}

// accessHint is what a refusal (403) needs from the operator. A HEAD's answer has no body, so
// S3's 403 for a missing object to a caller without s3:ListBucket cannot be told from a refusal
// of the credentials themselves: rushgate takes neither as "not uploaded", and HeadBucket, the
// readiness check, needs s3:ListBucket too, so a bucket policy without it fails readiness
// rather than every verification.
const accessHint = "storage refused access: the credentials need s3:ListBucket on the bucket and " +
	"s3:PutObject and s3:GetObject on its objects"

// translate maps a missing object to ports.ErrObjectNotFound, an answer from storage to an
// error naming it (a refusal with what access rushgate needs), and anything else (no answer, a
// timeout, a 5xx) to ports.ErrUnavailable.
func translate(op string, err error) error {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode() {
		case "NotFound", "NoSuchKey":
			return ports.ErrObjectNotFound
		}
		var status interface{ HTTPStatusCode() int }
		if errors.As(err, &status) && status.HTTPStatusCode() == http.StatusForbidden {
			return fmt.Errorf("s3: %s: %s: %w", op, accessHint, err)
		}
		if errors.As(err, &status) && status.HTTPStatusCode() < 500 {
			return fmt.Errorf("s3: %s: %w", op, err)
		}
	}
	return fmt.Errorf("s3: %s: %w: %w", op, ports.ErrUnavailable, err)
}
