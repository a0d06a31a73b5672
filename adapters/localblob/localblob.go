// Package localblob is the embedded default's object storage: files under a data directory,
// uploaded with URLs that rushgate signs itself (HMAC-SHA256 over the method, key, content type,
// content length and expiry) and serves on its own PUT route (Receive). It implements
// ports.ObjectStorage.
package localblob

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/ports"
)

var _ ports.ObjectStorage = (*Store)(nil)

// RoutePrefix is the path of the upload route; the object key follows as one escaped segment.
const RoutePrefix = "/uploads/"

// MaxKeyLength bounds an object key.
const MaxKeyLength = 512

// incomingDir holds uploads being received, under the data directory; keys cannot name it
// (no segment starts with a dot).
const incomingDir = ".incoming"

// Refusals of the upload route; the edge maps their codes to statuses.
var (
	ErrSignatureInvalid = domain.NewError(domain.KindForbidden, "UPLOAD_SIGNATURE_INVALID", "the upload URL's signature does not match this request")
	ErrURLExpired       = domain.NewError(domain.KindForbidden, "UPLOAD_URL_EXPIRED", "the upload URL has expired")
	ErrAlreadyUploaded  = domain.NewError(domain.KindConflict, "UPLOAD_ALREADY_DONE", "an object was already uploaded under this key")
)

// errOutOfSpace marks a file call the data directory's file system refused for want of space
// (ENOSPC, which also means no inode left) or of quota (EDQUOT). It comes with
// ports.ErrUnavailable: the call may succeed once space is freed, which needs no restart.
var errOutOfSpace = errors.New("localblob: the data directory is out of disk space or quota")

// outOfSpace reports a file call refused for want of space or quota.
func outOfSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// fileError wraps err, a failed file call, with errOutOfSpace and ports.ErrUnavailable when it
// was refused for want of space.
func fileError(err error) error {
	if outOfSpace(err) {
		return fmt.Errorf("%w: %w: %w", errOutOfSpace, ports.ErrUnavailable, err)
	}
	return fmt.Errorf("localblob: %w", err)
}

// probeContent is what a readiness probe writes: one block, since a file system with no block
// left still creates an empty file.
var probeContent = make([]byte, 4096)

// Store keeps objects as files under a directory.
type Store struct {
	dir     string
	baseURL func() string
	secret  []byte
	clock   ports.Clock
	probing atomic.Bool // a Ping's probe file call has not returned yet
}

// New returns a store on dir (created if missing) whose upload URLs start with what publicURL
// returns when one is signed (a server listening on port 0 knows its URL only once it listens)
// and are signed with secret; clock decides expiry.
func New(dir string, publicURL func() string, secret []byte, clock ports.Clock) (*Store, error) {
	if len(secret) < 32 {
		return nil, errors.New("localblob: the signing secret must be at least 32 bytes")
	}
	if err := os.MkdirAll(filepath.Join(dir, incomingDir), 0o700); err != nil {
		return nil, fmt.Errorf("localblob: data directory: %w", err)
	}
	return &Store{dir: dir, baseURL: publicURL, secret: secret, clock: clock}, nil
}

// PresignPut signs a PUT of grant's exact content type and length to grant's key, valid until
// now + grant.Expiry rounded up to a whole second (the URL carries whole seconds, and rounding
// down would end it before the expiry the client was told). It touches no file.
func (s *Store) PresignPut(_ context.Context, grant ports.UploadGrant) (ports.PresignedUpload, error) {
	if err := ValidateKey(grant.Key); err != nil {
		return ports.PresignedUpload{}, err
	}
	until := s.clock.Now().Add(grant.Expiry)
	expiresAt := until.Unix()
	if until.After(time.Unix(expiresAt, 0)) {
		expiresAt++
	}
	expires := strconv.FormatInt(expiresAt, 10)
	length := strconv.FormatInt(grant.ContentLength, 10)
	query := url.Values{"expires": {expires}, "signature": {s.sign(grant.Key, grant.ContentType, length, expires)}}
	return ports.PresignedUpload{
		URL:             strings.TrimSuffix(s.baseURL(), "/") + RoutePrefix + url.PathEscape(grant.Key) + "?" + query.Encode(),
		RequiredHeaders: map[string]string{"Content-Type": grant.ContentType, "Content-Length": length},
	}, nil
}

// sign is the hex HMAC-SHA256 of the request a URL allows.
func (s *Store) sign(key, contentType, length, expires string) string {
	mac := hmac.New(sha256.New, s.secret)
	mac.Write([]byte(strings.Join([]string{"PUT", key, contentType, length, expires}, "\n")))
	return hex.EncodeToString(mac.Sum(nil))
}

// Stat returns the object's size, or ports.ErrObjectNotFound.
func (s *Store) Stat(_ context.Context, key string) (int64, error) {
	path, err := s.path(key)
	if err != nil {
		return 0, ports.ErrObjectNotFound
	}
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, ports.ErrObjectNotFound
	}
	if err != nil {
		return 0, fmt.Errorf("localblob: stat %s: %w", key, err)
	}
	return info.Size(), nil
}

// ReadHead returns the object's first n bytes (fewer when it is shorter).
func (s *Store) ReadHead(_ context.Context, key string, n int) ([]byte, error) {
	path, err := s.path(key)
	if err != nil {
		return nil, ports.ErrObjectNotFound
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ports.ErrObjectNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("localblob: open %s: %w", key, err)
	}
	defer f.Close()
	head := make([]byte, n)
	read, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("localblob: read %s: %w", key, err)
	}
	return head[:read], nil
}

// Ping reports whether the data directory takes new files, as an upload needs: it creates, writes
// a block to and removes a probe file where uploads are received. File calls cannot be cancelled, so a probe
// the file system does not answer is abandoned when ctx ends, and no other starts until it
// returns: a hung disk holds one goroutine however often readiness is asked. Every failure
// wraps ports.ErrUnavailable.
func (s *Store) Ping(ctx context.Context) error {
	if !s.probing.CompareAndSwap(false, true) {
		return fmt.Errorf("localblob: %w: the previous probe of %s has not returned", ports.ErrUnavailable, s.dir)
	}
	done := make(chan error, 1)
	go func() {
		defer s.probing.Store(false)
		done <- s.probe()
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("localblob: probe %s: %w: %w", s.dir, ports.ErrUnavailable, ctx.Err())
	}
}

// probe creates, writes and removes a file under the directory uploads are received in.
func (s *Store) probe() error {
	f, err := os.CreateTemp(filepath.Join(s.dir, incomingDir), "ready-*")
	if err == nil {
		_, err = f.Write(probeContent)
		err = errors.Join(err, f.Close(), os.Remove(f.Name()))
	}
	switch {
	case err == nil:
		return nil
	case outOfSpace(err):
		return fmt.Errorf("localblob: data directory %s: %w", s.dir, fileError(err))
	default:
		return fmt.Errorf("localblob: data directory %s is not writable: %w: %w", s.dir, ports.ErrUnavailable, err)
	}
}

// Upload is one PUT to the upload route, as received.
type Upload struct {
	Key           string
	ContentType   string
	ContentLength int64 // -1 when the request declared none
	Expires       string
	Signature     string
	Body          io.Reader
}

// Receive stores an upload if its URL allows exactly this request: a valid key, a signature
// (compared in constant time) over this key, content type, length and expiry, an expiry not
// passed, and a body of exactly the signed length. It writes to a temporary file first and
// links it into place only once written, synced and closed, so a refused, cut-short or
// out-of-space upload leaves nothing, and an object already uploaded is never replaced
// (ErrAlreadyUploaded). A body read failure is returned wrapped, for the caller to tell the
// client's fault; a file system out of space or quota is ports.ErrUnavailable.
func (s *Store) Receive(u Upload) error {
	if err := ValidateKey(u.Key); err != nil {
		return err
	}
	if u.ContentLength < 0 {
		return domain.Invalid("Content-Length", "is required: send the signed length, not a chunked body")
	}
	want := s.sign(u.Key, u.ContentType, strconv.FormatInt(u.ContentLength, 10), u.Expires)
	if !hmac.Equal([]byte(want), []byte(u.Signature)) {
		return ErrSignatureInvalid
	}
	expires, err := strconv.ParseInt(u.Expires, 10, 64)
	if err != nil || !s.clock.Now().Before(time.Unix(expires, 0)) {
		return ErrURLExpired
	}
	final, _ := s.path(u.Key)
	if _, err := os.Stat(final); err == nil {
		return ErrAlreadyUploaded
	}
	return s.write(final, u.Body, u.ContentLength)
}

// write copies exactly length bytes of body to a temporary file and links it to final.
func (s *Store) write(final string, body io.Reader, length int64) error {
	tmp, err := os.CreateTemp(filepath.Join(s.dir, incomingDir), "upload-*")
	if err != nil {
		return fileError(err)
	}
	defer os.Remove(tmp.Name())
	err = fillFile(tmp, body, length)
	// Some file systems report a failed write only when the file is closed.
	if closeErr := tmp.Close(); err == nil && closeErr != nil {
		err = fileError(closeErr)
	}
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o700); err != nil {
		return fileError(err)
	}
	// A link fails when final exists, so of two uploads racing for one key exactly one lands.
	if err := os.Link(tmp.Name(), final); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return ErrAlreadyUploaded
		}
		return fileError(err)
	}
	return nil
}

// fillFile copies exactly length bytes of body to f and syncs it.
func fillFile(f *os.File, body io.Reader, length int64) error {
	written, err := io.Copy(f, io.LimitReader(body, length))
	if err != nil {
		return fileError(err)
	}
	if written != length {
		return fmt.Errorf("localblob: %w after %d of %d bytes", io.ErrUnexpectedEOF, written, length)
	}
	if err := f.Sync(); err != nil {
		return fileError(err)
	}
	return nil
}

// path is the file of a valid key.
func (s *Store) path(key string) (string, error) {
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	return filepath.Join(s.dir, filepath.FromSlash(key)), nil
}

// ValidateKey accepts keys of "/"-separated segments of [A-Za-z0-9._-], none empty and none
// starting with a dot, so a key can neither climb out of the data directory ("..") nor name
// the incoming directory.
func ValidateKey(key string) error {
	if key == "" || len(key) > MaxKeyLength {
		return domain.Invalid("key", "must be 1..%d characters", MaxKeyLength)
	}
	for segment := range strings.SplitSeq(key, "/") {
		if segment == "" || segment[0] == '.' {
			return domain.Invalid("key", "must be segments that are not empty and do not start with a dot")
		}
		for i := 0; i < len(segment); i++ {
			switch c := segment[i]; {
			case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
			default:
				return domain.Invalid("key", "must hold only letters, digits, '.', '_', '-' and '/'")
			}
		}
	}
	return nil
}
