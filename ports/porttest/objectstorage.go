package porttest

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rushgate/rushgate/ports"
)

// TestObjectStorage checks ports.ObjectStorage through real PUTs to the presigned URLs: a PUT
// with exactly the required headers stores the object, which Stat and ReadHead then see; a
// missing key is ErrObjectNotFound; storage refuses, writing nothing, a PUT with another
// Content-Type, a longer body, the signature used for another key, and an expired URL; and a
// second PUT to a key never replaces the object. send
// makes the PUTs (over HTTP, outside this package, which imports no transport).
func TestObjectStorage(t *testing.T, open func(t *testing.T) ports.ObjectStorage, send Sender, caps Capabilities) {
	withSender := func(c func(t *testing.T, e env[ports.ObjectStorage], send Sender)) func(t *testing.T, e env[ports.ObjectStorage]) {
		return func(t *testing.T, e env[ports.ObjectStorage]) { c(t, e, send) }
	}
	run(t, open, caps, []testCase[ports.ObjectStorage]{
		{"PresignedPutStoresExactlyTheObject", withSender(testObjectPutThenStatAndReadHead)},
		{"MissingObjectIsNotFound", testObjectMissing},
		{"RefusesAnotherContentType", withSender(testObjectRefuses(func(p *put) { p.header["Content-Type"] = "image/jpeg" }))},
		{"RefusesALongerBody", withSender(testObjectRefuses(func(p *put) {
			p.body = append(p.body, 0)
			p.length++
		}))},
		{"RefusesTheSignatureOnAnotherKey", withSender(testObjectRefusesOtherKey)},
		{"NeverReplacesAnUploadedObject", withSender(testObjectNeverReplaced)},
		{"RefusesAnExpiredURL", withSender(testObjectRefusesExpired)},
	})
}

// objectBody is a small PNG-looking object.
var objectBody = append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte("rushgate"), 8)...)

// Sender sends one PUT of body to url with header and the declared Content-Length, and
// returns the answer's status.
type Sender func(url string, header map[string]string, contentLength int64, body []byte) (status int, err error)

// put is one PUT to a presigned URL.
type put struct {
	url    string
	header map[string]string
	length int64
	body   []byte
}

func presign(t *testing.T, s ports.ObjectStorage, key string, expiry time.Duration) put {
	t.Helper()
	p, err := s.PresignPut(context.Background(), ports.UploadGrant{Key: key, ContentType: "image/png", ContentLength: int64(len(objectBody)), Expiry: expiry})
	must(t, err, "presign")
	out := put{url: p.URL, header: map[string]string{}, length: int64(len(objectBody)), body: bytes.Clone(objectBody)}
	for name, value := range p.RequiredHeaders {
		if strings.EqualFold(name, "Content-Length") {
			expectEqual(t, value, strconv.Itoa(len(objectBody)), "required Content-Length")
			continue
		}
		out.header[name] = value
	}
	expectEqual(t, out.header["Content-Type"], "image/png", "required Content-Type")
	return out
}

func (p put) send(t *testing.T, send Sender) int {
	t.Helper()
	status, err := send(p.url, p.header, p.length, p.body)
	must(t, err, "PUT")
	return status
}

func newObjectKey() string { return "contract/" + randomID() + ".png" }

func expectAbsent(t *testing.T, s ports.ObjectStorage, key string) {
	t.Helper()
	_, err := s.Stat(context.Background(), key)
	expectIs(t, err, ports.ErrObjectNotFound, "stat of a refused upload")
}

func testObjectPutThenStatAndReadHead(t *testing.T, e env[ports.ObjectStorage], send Sender) {
	ctx := context.Background()
	key := newObjectKey()
	p := presign(t, e.impl, key, time.Minute)
	expectEqual(t, p.send(t, send), 200, "status")
	size, err := e.impl.Stat(ctx, key)
	must(t, err, "stat")
	expectEqual(t, size, int64(len(objectBody)), "size")
	head, err := e.impl.ReadHead(ctx, key, 8)
	must(t, err, "read head")
	expectEqual(t, string(head), string(objectBody[:8]), "first bytes")
	all, err := e.impl.ReadHead(ctx, key, 4096)
	must(t, err, "read past the end")
	expectEqual(t, string(all), string(objectBody), "whole object")
}

func testObjectMissing(t *testing.T, e env[ports.ObjectStorage]) {
	key := newObjectKey()
	expectAbsent(t, e.impl, key)
	_, err := e.impl.ReadHead(context.Background(), key, 8)
	expectIs(t, err, ports.ErrObjectNotFound, "read head")
}

func testObjectRefuses(edit func(*put)) func(t *testing.T, e env[ports.ObjectStorage], send Sender) {
	return func(t *testing.T, e env[ports.ObjectStorage], send Sender) {
		key := newObjectKey()
		p := presign(t, e.impl, key, time.Minute)
		edit(&p)
		if status := p.send(t, send); status < 400 || status >= 500 {
			t.Errorf("status %d, want a refusal", status)
		}
		expectAbsent(t, e.impl, key)
	}
}

func testObjectRefusesOtherKey(t *testing.T, e env[ports.ObjectStorage], send Sender) {
	key, other := newObjectKey(), newObjectKey()
	signed := presign(t, e.impl, key, time.Minute)
	target := presign(t, e.impl, other, time.Minute)
	// The other key's URL with this key's signature.
	forged := signed
	forged.url = target.url[:strings.Index(target.url, "?")] + signed.url[strings.Index(signed.url, "?"):]
	if status := forged.send(t, send); status < 400 || status >= 500 {
		t.Errorf("status %d, want a refusal", status)
	}
	expectAbsent(t, e.impl, key)
	expectAbsent(t, e.impl, other)
}

func testObjectRefusesExpired(t *testing.T, e env[ports.ObjectStorage], send Sender) {
	key := newObjectKey()
	p := presign(t, e.impl, key, time.Second)
	time.Sleep(2 * time.Second) // the URL's expiry passing is the condition under test
	if status := p.send(t, send); status < 400 || status >= 500 {
		t.Errorf("status %d, want a refusal", status)
	}
	expectAbsent(t, e.impl, key)
}

func testObjectNeverReplaced(t *testing.T, e env[ports.ObjectStorage], send Sender) {
	key := newObjectKey()
	p := presign(t, e.impl, key, time.Minute)
	expectEqual(t, p.send(t, send), 200, "first upload")
	again := p
	again.body = bytes.Repeat([]byte{'x'}, len(objectBody))
	if status := again.send(t, send); status < 400 || status >= 500 {
		t.Errorf("second upload to the key: status %d, want a refusal", status)
	}
	head, err := e.impl.ReadHead(context.Background(), key, len(objectBody))
	must(t, err, "read head")
	expectEqual(t, string(head), string(objectBody), "stored object")
}
