package localblob_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rushgate/rushgate/adapters/localblob"
	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testkit"
)

// secret signs every fixture's URLs.
var secret = []byte("localblob-test-secret-localblob-test-secret")

// fixture is a store on dir, signing URLs under http://rushgate.test/, on a clock that moves
// only when told to.
type fixture struct {
	dir   string
	clock *memory.Clock
	store *localblob.Store
}

func newFixture(t *testing.T, dir string) *fixture {
	t.Helper()
	clock := memory.NewClock(time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC))
	store, err := localblob.New(dir, func() string { return "http://rushgate.test/" }, secret, clock)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{dir: dir, clock: clock, store: store}
}

func grant(key string, body []byte) ports.UploadGrant {
	return ports.UploadGrant{Key: key, ContentType: "image/png", ContentLength: int64(len(body)), Expiry: 10 * time.Minute}
}

// upload is the Upload a client sends of body with the URL and headers PresignPut gave for g,
// as the upload route reads it.
func (f *fixture) upload(t *testing.T, g ports.UploadGrant, body []byte) localblob.Upload {
	t.Helper()
	signed, err := f.store.PresignPut(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(signed.URL)
	if err != nil {
		t.Fatal(err)
	}
	key, err := url.PathUnescape(strings.TrimPrefix(u.EscapedPath(), localblob.RoutePrefix))
	if err != nil {
		t.Fatal(err)
	}
	length, err := strconv.ParseInt(signed.RequiredHeaders["Content-Length"], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return localblob.Upload{Key: key, ContentType: signed.RequiredHeaders["Content-Type"], ContentLength: length,
		Expires: u.Query().Get("expires"), Signature: u.Query().Get("signature"), Body: bytes.NewReader(body)}
}

// assertStored checks key holds exactly want.
func (f *fixture) assertStored(t *testing.T, key string, want []byte) {
	t.Helper()
	size, err := f.store.Stat(context.Background(), key)
	if err != nil || size != int64(len(want)) {
		t.Fatalf("Stat %s: %d, %v; want %d", key, size, err, len(want))
	}
	got, err := f.store.ReadHead(context.Background(), key, len(want)+10)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("ReadHead %s: %q, %v; want %q", key, got, err, want)
	}
}

// assertAbsent checks nothing is stored under key and no partial upload is left behind.
func (f *fixture) assertAbsent(t *testing.T, key string) {
	t.Helper()
	if _, err := f.store.Stat(context.Background(), key); !errors.Is(err, ports.ErrObjectNotFound) {
		t.Fatalf("Stat %s: %v, want ErrObjectNotFound", key, err)
	}
	if entries, err := os.ReadDir(filepath.Join(f.dir, ".incoming")); err != nil || len(entries) != 0 {
		t.Fatalf("the incoming directory holds %v (%v), want nothing", entries, err)
	}
}

var pngBytes = append([]byte("\x89PNG\r\n\x1a\n"), []byte("0123456789abcdef")...)

func TestNew_RefusesAShortSecret(t *testing.T) {
	if _, err := localblob.New(t.TempDir(), func() string { return "" }, secret[:31], memory.NewClock(time.Now())); err == nil {
		t.Fatal("a 31-byte secret was accepted")
	}
}

// The URL is the public URL (its trailing slash dropped), the route and the key as one escaped
// segment, with the expiry and the signature; the required headers are the grant's type and
// length.
func TestPresignPut_SignsTheGrantIntoTheURL(t *testing.T) {
	f := newFixture(t, t.TempDir())
	signed, err := f.store.PresignPut(context.Background(), grant("users/u-1/photo.png", pngBytes))
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(signed.URL)
	if err != nil {
		t.Fatal(err)
	}
	if u.Scheme+"://"+u.Host != "http://rushgate.test" || u.EscapedPath() != "/uploads/users%2Fu-1%2Fphoto.png" {
		t.Fatalf("URL %s", signed.URL)
	}
	if want := strconv.FormatInt(f.clock.Now().Add(10*time.Minute).Unix(), 10); u.Query().Get("expires") != want {
		t.Fatalf("expires %s, want %s", u.Query().Get("expires"), want)
	}
	if len(u.Query().Get("signature")) != 64 {
		t.Fatalf("signature %q, want 64 hex digits", u.Query().Get("signature"))
	}
	want := map[string]string{"Content-Type": "image/png", "Content-Length": strconv.Itoa(len(pngBytes))}
	if len(signed.RequiredHeaders) != len(want) || signed.RequiredHeaders["Content-Type"] != want["Content-Type"] ||
		signed.RequiredHeaders["Content-Length"] != want["Content-Length"] {
		t.Fatalf("headers %v, want %v", signed.RequiredHeaders, want)
	}
	f.assertAbsent(t, "users/u-1/photo.png") // signing touches no file
}

// A key is "/"-separated segments of letters, digits, '.', '_' and '-', at most MaxKeyLength
// bytes: nothing that could leave the data directory or mean something to the file system.
// The signer refuses any other key and the store reads none.
func TestValidateKey_AllowsPlainSegmentsOnly(t *testing.T) {
	f := newFixture(t, t.TempDir())
	for _, key := range []string{"a", "users/u_1/photo-2.v1.png", strings.Repeat("k", localblob.MaxKeyLength)} {
		if err := localblob.ValidateKey(key); err != nil {
			t.Errorf("%q: %v", key, err)
		}
	}
	for _, key := range []string{
		"", strings.Repeat("k", localblob.MaxKeyLength+1),
		"/etc/passwd", "a//b", "a/", `a\b`, "a b", "a%2Fb", "a:b", "사진.png", "a\x00b",
	} {
		if err := localblob.ValidateKey(key); !errors.Is(err, domain.ErrValidation) {
			t.Errorf("%q: %v, want VALIDATION_FAILED", key, err)
		}
		if _, err := f.store.PresignPut(context.Background(), grant(key, pngBytes)); !errors.Is(err, domain.ErrValidation) {
			t.Errorf("PresignPut %q: %v, want VALIDATION_FAILED", key, err)
		}
		if _, err := f.store.Stat(context.Background(), key); !errors.Is(err, ports.ErrObjectNotFound) {
			t.Errorf("Stat %q: %v, want ErrObjectNotFound", key, err)
		}
		if _, err := f.store.ReadHead(context.Background(), key, 8); !errors.Is(err, ports.ErrObjectNotFound) {
			t.Errorf("ReadHead %q: %v, want ErrObjectNotFound", key, err)
		}
	}
}

// An upload sent as signed is stored under its key: Stat answers its size and ReadHead its
// first bytes, all of them when it is shorter than asked.
func TestReceive_StoresTheSignedUpload(t *testing.T) {
	f := newFixture(t, t.TempDir())
	const key = "users/u1/photo.png"
	if err := f.store.Receive(f.upload(t, grant(key, pngBytes), pngBytes)); err != nil {
		t.Fatal(err)
	}
	f.assertStored(t, key, pngBytes)
	head, err := f.store.ReadHead(context.Background(), key, 8)
	if err != nil || !bytes.Equal(head, pngBytes[:8]) {
		t.Fatalf("ReadHead 8: %q, %v", head, err)
	}
	if _, err := f.store.Stat(context.Background(), "users/u1/other.png"); !errors.Is(err, ports.ErrObjectNotFound) {
		t.Fatalf("Stat of a key never uploaded: %v", err)
	}
	if _, err := f.store.ReadHead(context.Background(), "users/u1/other.png", 8); !errors.Is(err, ports.ErrObjectNotFound) {
		t.Fatalf("ReadHead of a key never uploaded: %v", err)
	}
}

// The signature covers the key, the content type, the length and the expiry: changing any one
// of them is UPLOAD_SIGNATURE_INVALID, as is a URL signed with another secret, and nothing is
// stored.
func TestReceive_RefusesWhatTheSignatureDoesNotCover(t *testing.T) {
	for name, edit := range map[string]func(*localblob.Upload){
		"another key":          func(u *localblob.Upload) { u.Key = "users/u1/other.png" },
		"another content type": func(u *localblob.Upload) { u.ContentType = "image/jpeg" },
		"another length": func(u *localblob.Upload) {
			u.ContentLength++
			u.Body = bytes.NewReader(append(pngBytes, 'x'))
		},
		"a later expiry": func(u *localblob.Upload) {
			expires, _ := strconv.ParseInt(u.Expires, 10, 64)
			u.Expires = strconv.FormatInt(expires+3600, 10)
		},
		"no signature":            func(u *localblob.Upload) { u.Signature = "" },
		"an upper-case signature": func(u *localblob.Upload) { u.Signature = strings.ToUpper(u.Signature) },
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, t.TempDir())
			u := f.upload(t, grant("users/u1/photo.png", pngBytes), pngBytes)
			edit(&u)
			if err := f.store.Receive(u); !errors.Is(err, localblob.ErrSignatureInvalid) {
				t.Fatalf("%v, want UPLOAD_SIGNATURE_INVALID", err)
			}
			f.assertAbsent(t, "users/u1/photo.png")
			f.assertAbsent(t, u.Key)
		})
	}
	t.Run("another secret", func(t *testing.T) {
		dir := t.TempDir()
		f := newFixture(t, dir)
		other, err := localblob.New(dir, func() string { return "http://rushgate.test" }, []byte(strings.Repeat("o", 32)), f.clock)
		if err != nil {
			t.Fatal(err)
		}
		if err := other.Receive(f.upload(t, grant("users/u1/photo.png", pngBytes), pngBytes)); !errors.Is(err, localblob.ErrSignatureInvalid) {
			t.Fatalf("%v, want UPLOAD_SIGNATURE_INVALID", err)
		}
		f.assertAbsent(t, "users/u1/photo.png")
	})
}

// A URL works until its expiry and not at it: one second before it stores, at it is
// UPLOAD_URL_EXPIRED and stores nothing.
func TestReceive_RefusesAnExpiredURL(t *testing.T) {
	f := newFixture(t, t.TempDir())
	early := f.upload(t, grant("early.png", pngBytes), pngBytes)
	late := f.upload(t, grant("late.png", pngBytes), pngBytes)
	f.clock.Advance(10*time.Minute - time.Second)
	if err := f.store.Receive(early); err != nil {
		t.Fatalf("a second before the expiry: %v", err)
	}
	f.clock.Advance(time.Second)
	if err := f.store.Receive(late); !errors.Is(err, localblob.ErrURLExpired) {
		t.Fatalf("at the expiry: %v, want UPLOAD_URL_EXPIRED", err)
	}
	f.assertStored(t, "early.png", pngBytes)
	f.assertAbsent(t, "late.png")
}

// The URL carries whole seconds, rounded up: signed part-way through a second, it still works
// at signing time + the expiry (the end the client was told), and is expired a second later.
func TestReceive_AURLSignedMidSecondWorksForTheWholeExpiry(t *testing.T) {
	f := newFixture(t, t.TempDir())
	f.clock.Advance(700 * time.Millisecond)
	g := grant("mid.png", pngBytes)
	inTime := f.upload(t, g, pngBytes)
	late := f.upload(t, grant("late.png", pngBytes), pngBytes)
	f.clock.Advance(g.Expiry)
	if err := f.store.Receive(inTime); err != nil {
		t.Fatalf("at signing time + the expiry: %v", err)
	}
	f.clock.Advance(time.Second)
	if err := f.store.Receive(late); !errors.Is(err, localblob.ErrURLExpired) {
		t.Fatalf("a second past it: %v, want UPLOAD_URL_EXPIRED", err)
	}
	f.assertStored(t, "mid.png", pngBytes)
	f.assertAbsent(t, "late.png")
}

// The body is exactly the signed length: a shorter one fails as cut short and leaves nothing;
// bytes past the length are not stored; a request with no declared length (chunked) is refused
// VALIDATION_FAILED before anything is read.
func TestReceive_StoresExactlyTheSignedLength(t *testing.T) {
	t.Run("shorter", func(t *testing.T) {
		f := newFixture(t, t.TempDir())
		u := f.upload(t, grant("short.png", pngBytes), pngBytes[:len(pngBytes)-1])
		if err := f.store.Receive(u); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("%v, want io.ErrUnexpectedEOF", err)
		}
		f.assertAbsent(t, "short.png")
	})
	t.Run("longer", func(t *testing.T) {
		f := newFixture(t, t.TempDir())
		u := f.upload(t, grant("long.png", pngBytes), append(append([]byte(nil), pngBytes...), "trailing"...))
		if err := f.store.Receive(u); err != nil {
			t.Fatal(err)
		}
		f.assertStored(t, "long.png", pngBytes)
	})
	t.Run("undeclared", func(t *testing.T) {
		f := newFixture(t, t.TempDir())
		u := f.upload(t, grant("chunked.png", pngBytes), pngBytes)
		u.ContentLength = -1
		read := &countingReader{Reader: u.Body}
		u.Body = read
		if err := f.store.Receive(u); !errors.Is(err, domain.ErrValidation) {
			t.Fatalf("%v, want VALIDATION_FAILED", err)
		}
		if read.n.Load() != 0 {
			t.Fatalf("%d bytes read from a refused upload", read.n.Load())
		}
		f.assertAbsent(t, "chunked.png")
	})
}

// countingReader counts the bytes read through it.
type countingReader struct {
	io.Reader
	n atomic.Int64
}

func (r *countingReader) Read(p []byte) (int, error) {
	n, err := r.Reader.Read(p)
	r.n.Add(int64(n))
	return n, err
}

// An object is never replaced: a second upload of its key, even with a valid URL and other
// bytes, is UPLOAD_ALREADY_DONE and the first bytes stay; of many uploads racing for one key
// exactly one lands, whole.
func TestReceive_NeverReplacesAnObject(t *testing.T) {
	f := newFixture(t, t.TempDir())
	other := append([]byte("\x89PNG\r\n\x1a\n"), []byte("fedcba9876543210")...)
	if err := f.store.Receive(f.upload(t, grant("once.png", pngBytes), pngBytes)); err != nil {
		t.Fatal(err)
	}
	if err := f.store.Receive(f.upload(t, grant("once.png", other), other)); !errors.Is(err, localblob.ErrAlreadyUploaded) {
		t.Fatalf("second upload: %v, want UPLOAD_ALREADY_DONE", err)
	}
	f.assertStored(t, "once.png", pngBytes)

	const racers = 16
	bodies, uploads, errs := make([][]byte, racers), make([]localblob.Upload, racers), make([]error, racers)
	for i := range racers {
		bodies[i] = append(append([]byte(nil), pngBytes...), byte('a'+i))
		uploads[i] = f.upload(t, grant("raced.png", bodies[i]), bodies[i])
	}
	testkit.StartTogether(racers, func(i int) { errs[i] = f.store.Receive(uploads[i]) })
	landed := -1
	for i, err := range errs {
		switch {
		case err == nil && landed >= 0:
			t.Fatalf("uploads %d and %d both landed", landed, i)
		case err == nil:
			landed = i
		case !errors.Is(err, localblob.ErrAlreadyUploaded):
			t.Fatalf("upload %d: %v", i, err)
		}
	}
	if landed < 0 {
		t.Fatal("no upload landed")
	}
	f.assertStored(t, "raced.png", bodies[landed])
	if entries, err := os.ReadDir(filepath.Join(f.dir, ".incoming")); err != nil || len(entries) != 0 {
		t.Fatalf("the losers left %v (%v) behind", entries, err)
	}
}
