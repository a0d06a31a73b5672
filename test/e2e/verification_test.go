package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rushgate/rushgate/bootstrap"
	"github.com/rushgate/rushgate/test/testenv"
	"github.com/rushgate/rushgate/test/testkit"
)

// verificationBackend is a backend with its object storage: local disk through rushgate's
// signed route, or a real S3-compatible server (versitygw) that checks SigV4 presigned URLs.
type verificationBackend struct {
	backend
	s3 bool
}

// verificationBackends are the three: the embedded default, Postgres + Redis +
// versitygw, and MySQL + Redis on local disk.
func verificationBackends() []verificationBackend {
	return []verificationBackend{{backend: testBackends[0]}, {backend: testBackends[1], s3: true}, {backend: testBackends[2]}}
}

func (vb verificationBackend) name() string {
	if vb.s3 {
		return vb.backend.name + "+versitygw"
	}
	return vb.backend.name + "+local"
}

// startVerificationServer starts a server on vb, with versitygw as its storage when vb asks.
func startVerificationServer(t *testing.T, vb verificationBackend, tweak ...func(*bootstrap.Config)) *server {
	t.Helper()
	if vb.s3 {
		s3 := testenv.Versitygw(t)
		tweak = append([]func(*bootstrap.Config){func(cfg *bootstrap.Config) {
			cfg.Storage.S3Endpoint, cfg.Storage.S3Bucket, cfg.Storage.S3Region = s3.Endpoint, s3.Bucket, s3.Region
			cfg.Storage.S3AccessKey, cfg.Storage.S3SecretKey, cfg.Storage.S3PathStyle = s3.AccessKey, s3.SecretKey, true
		}}, tweak...)
	}
	return startServer(t, vb.backend, tweak...)
}

// pngImage is a real PNG of a few hundred bytes.
var pngImage = sync.OnceValue(func() []byte {
	img := image.NewRGBA(image.Rect(0, 0, 16, 16))
	for i := range img.Pix {
		img.Pix[i] = byte(i * 7)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		panic(err)
	}
	return b.Bytes()
})

func (s *server) createChallenge(deadline time.Time) string {
	s.t.Helper()
	res := s.do("POST", "/admin/challenges", s.adminToken(), fmt.Sprintf(`{"title":"e2e challenge","deadline":%q}`, deadline.Format(time.RFC3339Nano)))
	if res.status != http.StatusCreated || res.str("id") == "" {
		s.t.Fatalf("create challenge: %d %s", res.status, res.raw)
	}
	return res.str("id")
}

// session is an opened upload session.
type session struct {
	ID, URL, Key string
	Headers      map[string]string
}

func (s *server) openSession(user, fileName, contentType string, size int) (session, response) {
	s.t.Helper()
	res := s.do("POST", "/upload-sessions", s.token(user), fmt.Sprintf(`{"fileName":%q,"contentType":%q,"fileSize":%d}`, fileName, contentType, size))
	var out session
	if res.status == http.StatusOK {
		out = session{ID: res.str("sessionId"), URL: res.str("presignedUrl"), Key: res.str("objectKey"), Headers: map[string]string{}}
		headers, _ := res.body["requiredHeaders"].(map[string]any)
		for k, v := range headers {
			out.Headers[k] = v.(string)
		}
	}
	return out, res
}

// uploadedSession opens a session for a PNG and uploads it.
func (s *server) uploadedSession(user string) session {
	s.t.Helper()
	img := pngImage()
	sess, res := s.openSession(user, "photo.png", "image/png", len(img))
	if res.status != http.StatusOK {
		s.t.Fatalf("open session: %d %s", res.status, res.raw)
	}
	if status, body := s.put(sess.URL, sess.Headers, img, nil); status != http.StatusOK {
		s.t.Fatalf("upload: %d %s", status, body)
	}
	return sess
}

// put PUTs body to url with headers (Content-Length sets the declared length), changed by edit,
// and returns the status and body; putAnswer has its headers too.
func (s *server) put(url string, headers map[string]string, body []byte, edit func(*http.Request)) (int, string) {
	s.t.Helper()
	res, err := s.putAnswer(url, headers, body, edit)
	if err != nil {
		return 0, err.Error()
	}
	return res.status, string(res.raw)
}

// putAnswer is put's whole answer, its JSON body decoded when it has one, or the error of a
// request that got none. Answers of rushgate's own upload route are checked against
// openapi.yaml.
func (s *server) putAnswer(url string, headers map[string]string, body []byte, edit func(*http.Request)) (response, error) {
	s.t.Helper()
	req, err := http.NewRequest("PUT", url, bytes.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	for k, v := range headers {
		if strings.EqualFold(k, "Content-Length") {
			n, _ := strconv.ParseInt(v, 10, 64)
			req.ContentLength = n
			continue
		}
		req.Header.Set(k, v)
	}
	if edit != nil {
		edit(req)
	}
	res, err := s.http.Do(req)
	if err != nil {
		return response{}, err
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if strings.HasPrefix(url, s.url) {
		checkAgainstOpenAPI(s.t, req, res, raw)
	}
	out := response{status: res.StatusCode, header: res.Header, raw: raw}
	_ = json.Unmarshal(raw, &out.body) // S3's answers are XML; an error leaves body nil
	return out, nil
}

func (s *server) verify(user, sessionID, challengeID, imageKey, key string) response {
	return s.do("POST", "/verifications", s.token(user),
		fmt.Sprintf(`{"sessionId":%q,"challengeId":%q,"imageKey":%q}`, sessionID, challengeID, imageKey), "Idempotency-Key", s.run+key)
}

// verificationCounts reads what a challenge's verifications left in the database: verifications,
// distinct users among them, and their sessions that are COMPLETED (on memory, through the API).
type verificationCounts struct{ verifications, users, completed int }

func (s *server) verificationCounts(challengeID string) verificationCounts {
	s.t.Helper()
	if s.db == nil {
		page := s.do("GET", "/challenges/"+challengeID+"/verifications?limit=500", s.adminToken(), "")
		items, _ := page.body["items"].([]any)
		users := map[string]bool{}
		for _, it := range items {
			users[it.(map[string]any)["userId"].(string)] = true
		}
		return verificationCounts{verifications: len(items), users: len(users), completed: -1}
	}
	var c verificationCounts
	q := s.query("SELECT COUNT(*), COUNT(DISTINCT v.user_id), COUNT(CASE WHEN u.status = 'COMPLETED' THEN 1 END) " +
		"FROM verifications v JOIN upload_sessions u ON u.id = v.upload_session_id WHERE v.challenge_id = ?")
	if err := s.db.QueryRow(q, challengeID).Scan(&c.verifications, &c.users, &c.completed); err != nil {
		s.t.Fatal(err)
	}
	return c
}

// sessionStatus reads a session's status from the database.
func (s *server) sessionStatus(sessionID string) string {
	s.t.Helper()
	var status string
	if err := s.db.QueryRow(s.query("SELECT status FROM upload_sessions WHERE id = ?"), sessionID).Scan(&status); err != nil {
		s.t.Fatal(err)
	}
	return status
}

// TestVerification_Flow: a challenge, a session, the upload to the presigned URL, the
// verification, its replay and the lists, on every storage.
func TestVerification_Flow(t *testing.T) {
	for _, vb := range verificationBackends() {
		t.Run(vb.name(), func(t *testing.T) {
			s := startVerificationServer(t, vb)
			challengeID := s.createChallenge(time.Now().Add(time.Hour))
			got := s.do("GET", "/challenges/"+challengeID, s.token("u1"), "")
			if got.status != http.StatusOK || got.str("title") != "e2e challenge" || got.body["crewId"] != nil {
				t.Fatalf("get challenge: %d %s", got.status, got.raw)
			}

			sess := s.uploadedSession("u1")
			if sess.Headers["Content-Type"] != "image/png" || sess.Headers["Content-Length"] != strconv.Itoa(len(pngImage())) {
				t.Fatalf("required headers %v", sess.Headers)
			}
			res := s.verify("u1", sess.ID, challengeID, sess.Key, "v1")
			if res.status != http.StatusCreated || res.str("userId") != "u1" || res.str("challengeId") != challengeID ||
				res.str("uploadSessionId") != sess.ID || res.str("imageKey") != sess.Key || res.str("status") != "APPROVED" || res.str("requestedAt") == "" {
				t.Fatalf("verify: %d %s", res.status, res.raw)
			}
			replay := s.verify("u1", sess.ID, challengeID, sess.Key, "v1")
			if replay.status != http.StatusCreated || replay.header.Get("Idempotent-Replayed") != "true" || string(replay.raw) != string(res.raw) {
				t.Fatalf("replay: %d %v %s", replay.status, replay.header, replay.raw)
			}

			other := s.uploadedSession("u2")
			if r := s.verify("u2", other.ID, challengeID, other.Key, "v1"); r.status != http.StatusCreated {
				t.Fatalf("u2 verifies: %d %s", r.status, r.raw)
			}
			mine := s.do("GET", "/challenges/"+challengeID+"/verifications", s.token("u1"), "")
			if items, _ := mine.body["items"].([]any); mine.status != http.StatusOK || len(items) != 1 || mine.body["nextCursor"] != nil {
				t.Fatalf("u1's list: %d %s", mine.status, mine.raw)
			}
			page := s.do("GET", "/challenges/"+challengeID+"/verifications?limit=1", s.adminToken(), "")
			if items, _ := page.body["items"].([]any); page.status != http.StatusOK || len(items) != 1 || page.str("nextCursor") == "" {
				t.Fatalf("admin's page 1: %d %s", page.status, page.raw)
			}
			page2 := s.do("GET", "/challenges/"+challengeID+"/verifications?limit=1&cursor="+page.str("nextCursor"), s.adminToken(), "")
			if items, _ := page2.body["items"].([]any); page2.status != http.StatusOK || len(items) != 1 || page2.body["nextCursor"] != nil {
				t.Fatalf("admin's page 2: %d %s", page2.status, page2.raw)
			}
			if c := s.verificationCounts(challengeID); c.verifications != 2 || c.users != 2 || (s.db != nil && c.completed != 2) {
				t.Fatalf("stored %+v", c)
			}
		})
	}
}

// TestVerification_EveryStatus walks the verification's answers on every storage.
func TestVerification_EveryStatus(t *testing.T) {
	for _, vb := range verificationBackends() {
		t.Run(vb.name(), func(t *testing.T) {
			s := startVerificationServer(t, vb)
			challengeID := s.createChallenge(time.Now().Add(time.Hour))
			user := s.token("u1")

			for _, body := range []string{
				`{"fileName":"virus.exe","contentType":"image/png","fileSize":10}`,
				`{"fileName":"photo.png","contentType":"image/jpeg","fileSize":10}`,
				`{"fileName":"photo.jpg","contentType":"image/jpeg","fileSize":0}`,
				`{"fileName":"photo.heic","contentType":"image/heic","fileSize":10485761}`,
			} {
				assertError(t, s.do("POST", "/upload-sessions", user, body), http.StatusBadRequest, "UNSUPPORTED_FILE")
			}
			assertError(t, s.do("POST", "/upload-sessions", user, `{"fileName":"a.png","contentType":"image/png","fileSize":"10"}`), http.StatusBadRequest, "VALIDATION_FAILED")

			sess := s.uploadedSession("u1")
			unknown := "0190a0b0-0000-7000-8000-000000000000"
			assertError(t, s.verify("u1", unknown, challengeID, sess.Key, "k1"), http.StatusBadRequest, "INVALID_SESSION")
			assertError(t, s.verify("intruder", sess.ID, challengeID, sess.Key, "k1"), http.StatusBadRequest, "INVALID_SESSION")
			assertError(t, s.verify("u1", sess.ID, challengeID, sess.Key+"x", "k1"), http.StatusBadRequest, "INVALID_IMAGE_KEY")
			assertError(t, s.verify("u1", sess.ID, unknown, sess.Key, "k1"), http.StatusNotFound, "CHALLENGE_NOT_FOUND")
			assertError(t, s.do("GET", "/challenges/"+unknown, user, ""), http.StatusNotFound, "CHALLENGE_NOT_FOUND")
			assertError(t, s.do("POST", "/verifications", user, fmt.Sprintf(`{"sessionId":%q,"challengeId":%q,"imageKey":%q}`, sess.ID, challengeID, sess.Key)),
				http.StatusBadRequest, "IDEMPOTENCY_KEY_REQUIRED")

			late := s.createChallenge(time.Now().Add(-time.Second))
			assertError(t, s.verify("u1", sess.ID, late, sess.Key, "k1"), http.StatusBadRequest, "DEADLINE_PASSED")

			notUploaded, _ := s.openSession("u1", "photo.png", "image/png", len(pngImage()))
			assertError(t, s.verify("u1", notUploaded.ID, challengeID, notUploaded.Key, "k1"), http.StatusBadRequest, "IMAGE_NOT_UPLOADED")
			// An executable renamed .png, of the declared length: uploaded, but not an image.
			exe := append([]byte("MZ\x90\x00\x03\x00\x00\x00\x04\x00\x00\x00\xff\xff"), make([]byte, 200)...)
			renamed, _ := s.openSession("u1", "photo.png", "image/png", len(exe))
			if status, body := s.put(renamed.URL, renamed.Headers, exe, nil); status != http.StatusOK {
				t.Fatalf("upload the executable: %d %s", status, body)
			}
			assertError(t, s.verify("u1", renamed.ID, challengeID, renamed.Key, "k1"), http.StatusBadRequest, "IMAGE_NOT_UPLOADED")

			// Every rejection dropped the key: it now verifies.
			if res := s.verify("u1", sess.ID, challengeID, sess.Key, "k1"); res.status != http.StatusCreated {
				t.Fatalf("verify: %d %s", res.status, res.raw)
			}
			assertError(t, s.verify("u1", sess.ID, challengeID, sess.Key, "k2"), http.StatusConflict, "SESSION_ALREADY_USED")
			assertError(t, s.verify("u1", sess.ID, late, sess.Key, "k1"), http.StatusUnprocessableEntity, "IDEMPOTENCY_KEY_REUSED")
			second := s.uploadedSession("u1")
			assertError(t, s.verify("u1", second.ID, challengeID, second.Key, "k3"), http.StatusConflict, "ALREADY_VERIFIED")

			if c := s.verificationCounts(challengeID); c.verifications != 1 || c.users != 1 {
				t.Fatalf("stored %+v", c)
			}
			if s.db != nil {
				for id, want := range map[string]string{sess.ID: "COMPLETED", second.ID: "PENDING", notUploaded.ID: "PENDING", renamed.ID: "PENDING"} {
					if got := s.sessionStatus(id); got != want {
						t.Errorf("session %s: %s, want %s", id, got, want)
					}
				}
			}
		})
	}
}

// TestVerification_SessionPastItsExpiryIsRefusedBeforeTheWorkerRuns: with the worker far off,
// a session older than RUSHGATE_UPLOAD_SESSION_EXPIRY is INVALID_SESSION; with it running, the
// session becomes EXPIRED in the database.
func TestVerification_SessionPastItsExpiry(t *testing.T) {
	for _, vb := range verificationBackends() {
		t.Run(vb.name(), func(t *testing.T) {
			const expiry = 1500 * time.Millisecond
			if vb.provision != nil {
				databaseURL, redisURL := vb.provision(t)
				vb.backend = backend{name: vb.backend.name, databaseURL: databaseURL, redisURL: redisURL}
			}
			s := startVerificationServer(t, vb, func(cfg *bootstrap.Config) {
				cfg.Upload.SessionExpiry = expiry
				cfg.Upload.ExpiryInterval = time.Hour
			})
			challengeID := s.createChallenge(time.Now().Add(time.Hour))
			sess := s.uploadedSession("u1")
			time.Sleep(expiry + 100*time.Millisecond) // the session's age is the condition under test
			assertError(t, s.verify("u1", sess.ID, challengeID, sess.Key, "k1"), http.StatusBadRequest, "INVALID_SESSION")
			if s.db == nil {
				return
			}
			if got := s.sessionStatus(sess.ID); got != "PENDING" {
				t.Fatalf("session %s before any worker ran", got)
			}
			// Two instances on the same database run the worker at once.
			workers := []*server{}
			for range 2 {
				workers = append(workers, startServer(t, vb.backend, func(cfg *bootstrap.Config) {
					cfg.Upload.SessionExpiry = expiry
					cfg.Upload.ExpiryInterval = 20 * time.Millisecond
				}))
			}
			testkit.Eventually(t, 10*time.Second, "the workers expire the session", func() error {
				if status := s.sessionStatus(sess.ID); status != "EXPIRED" {
					return fmt.Errorf("session %s", status)
				}
				return nil
			})
			assertError(t, workers[0].verify("u1", sess.ID, challengeID, sess.Key, "k2"), http.StatusBadRequest, "INVALID_SESSION")
		})
	}
}

// TestVerification_ConcurrentSubmissionsOfOneSessionVerifyOnce: one session submitted 50 times
// at once with 50 keys makes exactly one verification and one COMPLETED session.
func TestVerification_ConcurrentSubmissionsOfOneSessionVerifyOnce(t *testing.T) {
	for _, vb := range verificationBackends() {
		t.Run(vb.name(), func(t *testing.T) {
			s := startVerificationServer(t, vb)
			challengeID := s.createChallenge(time.Now().Add(time.Hour))
			sess := s.uploadedSession("clicker")
			token := s.token("clicker")
			body := fmt.Sprintf(`{"sessionId":%q,"challengeId":%q,"imageKey":%q}`, sess.ID, challengeID, sess.Key)
			counts, answers := fire(50, func(i int) response {
				return s.do("POST", "/verifications", token, body, "Idempotency-Key", s.run+"click-"+strconv.Itoa(i))
			})
			t.Logf("statuses: %v", counts)
			for _, a := range answers {
				if a.status != http.StatusCreated && (a.status != http.StatusConflict || a.str("error") != "SESSION_ALREADY_USED") {
					t.Fatalf("unexpected answer %d %s (all: %v)", a.status, a.raw, counts)
				}
			}
			if counts[http.StatusCreated] != 1 {
				t.Fatalf("%d verifications answered 201, want 1 (%v)", counts[http.StatusCreated], counts)
			}
			if c := s.verificationCounts(challengeID); c.verifications != 1 || (s.db != nil && c.completed != 1) {
				t.Fatalf("stored %+v", c)
			}
			if s.db != nil {
				if got := s.sessionStatus(sess.ID); got != "COMPLETED" {
					t.Fatalf("session %s", got)
				}
			}
		})
	}
}

// TestUpload_RefusesBadInputAndWritesNothing drives rushgate's own upload route with every
// tampering and checks the data directory stays empty until the good upload. The URLs it uses
// live the default 5 minutes; the expired one comes from a second server whose URLs live 1 s.
func TestUpload_RefusesBadInputAndWritesNothing(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, testBackends[0], func(cfg *bootstrap.Config) { cfg.Storage.DataDir = dir })
	const shortExpiry = time.Second
	short := startServer(t, testBackends[0], func(cfg *bootstrap.Config) {
		cfg.Storage.DataDir = dir
		cfg.Upload.URLExpiry = shortExpiry
	})
	img := pngImage()
	expiring, _ := short.openSession("u1", "photo.png", "image/png", len(img))
	expiringURL, err := url.Parse(expiring.URL)
	if err != nil {
		t.Fatal(err)
	}
	// The URL carries its end in whole seconds, at least shortExpiry after it was signed.
	expiresUnix, err := strconv.ParseInt(expiringURL.Query().Get("expires"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	sess, _ := s.openSession("u1", "photo.png", "image/png", len(img))
	other, _ := s.openSession("u1", "other.png", "image/png", len(img))

	tampered := strings.Replace(sess.URL, "signature=", "signature=0", 1)
	traversal := strings.Replace(sess.URL, "/uploads/uploads%2F", "/uploads/..%2F..%2F", 1)
	otherKey := strings.Replace(other.URL, "?", "?x=1&", 1)
	otherKey = otherKey[:strings.Index(otherKey, "?")] + sess.URL[strings.Index(sess.URL, "?"):]
	for _, tc := range []struct {
		name   string
		url    string
		body   []byte
		edit   func(*http.Request)
		status int
		code   string
	}{
		{"tampered signature", tampered, img, nil, http.StatusForbidden, "UPLOAD_SIGNATURE_INVALID"},
		{"another key", otherKey, img, nil, http.StatusForbidden, "UPLOAD_SIGNATURE_INVALID"},
		{"dot-dot key", traversal, img, nil, http.StatusBadRequest, "VALIDATION_FAILED"},
		{"longer body", sess.URL, append(img, 0), func(r *http.Request) { r.ContentLength++ }, http.StatusForbidden, "UPLOAD_SIGNATURE_INVALID"},
		{"other content type", sess.URL, img, func(r *http.Request) { r.Header.Set("Content-Type", "image/jpeg") }, http.StatusForbidden, "UPLOAD_SIGNATURE_INVALID"},
		{"chunked body", sess.URL, img, func(r *http.Request) { r.ContentLength = -1; r.Body = io.NopCloser(bytes.NewReader(img)) }, http.StatusBadRequest, "VALIDATION_FAILED"},
	} {
		status, body := s.put(tc.url, sess.Headers, tc.body, tc.edit)
		if status != tc.status || !strings.Contains(body, `"`+tc.code+`"`) {
			t.Errorf("%s: %d %s, want %d %s", tc.name, status, body, tc.status, tc.code)
		}
	}
	time.Sleep(time.Until(time.Unix(expiresUnix, 0))) // the condition: the URL's expiry has passed
	if status, body := short.put(expiring.URL, expiring.Headers, img, nil); status != http.StatusForbidden || !strings.Contains(body, "UPLOAD_URL_EXPIRED") {
		t.Errorf("expired URL: %d %s", status, body)
	}
	if files := regularFiles(t, dir); len(files) != 0 {
		t.Fatalf("refused uploads wrote %v", files)
	}
	fresh, _ := s.openSession("u1", "photo.png", "image/png", len(img))
	if status, body := s.put(fresh.URL, fresh.Headers, img, nil); status != http.StatusOK {
		t.Fatalf("good upload: %d %s", status, body)
	}
	if status, body := s.put(fresh.URL, fresh.Headers, bytes.Repeat([]byte{1}, len(img)), nil); status != http.StatusConflict {
		t.Fatalf("overwrite: %d %s", status, body)
	}
	files := regularFiles(t, dir)
	if len(files) != 1 || !strings.HasSuffix(files[0], filepath.FromSlash(fresh.Key)) {
		t.Fatalf("files %v, want the one upload", files)
	}
	if stored, _ := os.ReadFile(files[0]); !bytes.Equal(stored, img) {
		t.Fatal("the stored file is not the uploaded image")
	}
}

func regularFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestVerification_StorageDownAnswers503: with S3 unreachable, the object check answers 503
// UNAVAILABLE with Retry-After within the storage timeout, and nothing is verified.
func TestVerification_StorageDownAnswers503(t *testing.T) {
	ports, err := testenv.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, testBackends[0], productionTimeouts, func(cfg *bootstrap.Config) {
		cfg.Storage.S3Endpoint, cfg.Storage.S3Bucket, cfg.Storage.S3PathStyle = "http://127.0.0.1:"+strconv.Itoa(ports[0]), "down", true
		cfg.Storage.S3AccessKey, cfg.Storage.S3SecretKey = "key", "secret"
	})
	challengeID := s.createChallenge(time.Now().Add(time.Hour))
	sess, res := s.openSession("u1", "photo.png", "image/png", len(pngImage()))
	if res.status != http.StatusOK {
		t.Fatalf("a session needs no call to storage: %d %s", res.status, res.raw)
	}
	began := time.Now()
	down := s.verify("u1", sess.ID, challengeID, sess.Key, "k1")
	assertError(t, down, http.StatusServiceUnavailable, "UNAVAILABLE")
	// Refused at once; the bound is the storage timeout plus slack for a busy machine.
	if bound := bootstrap.DefaultConfig().Storage.S3Timeout + time.Second; down.header.Get("Retry-After") == "" || time.Since(began) > bound {
		t.Fatalf("503 after %v with Retry-After %q", time.Since(began), down.header.Get("Retry-After"))
	}
	if c := s.verificationCounts(challengeID); c.verifications != 0 {
		t.Fatalf("stored %+v", c)
	}
}

// TestVerification_CrossedSubmissionsUseEachSessionAndChallengeOnce: one user submits each of
// several uploaded sessions to each of as many challenges, all at once, each submission with its
// own key, so the lanes of different challenges lock the same sessions. Each session verifies at
// most one challenge and each challenge is verified at most once; every other submission hears
// SESSION_ALREADY_USED or ALREADY_VERIFIED; and the database agrees.
func TestVerification_CrossedSubmissionsUseEachSessionAndChallengeOnce(t *testing.T) {
	const n = 12
	for _, vb := range verificationBackends() {
		t.Run(vb.name(), func(t *testing.T) {
			s := startVerificationServer(t, vb)
			challenges, sessions := make([]string, n), make([]session, n)
			for i := range n {
				challenges[i] = s.createChallenge(time.Now().Add(time.Hour))
				sessions[i] = s.uploadedSession("crosser")
			}
			// Submission i is session i%n to challenge (i/n + i%n)%n, so each lane's batch takes
			// the sessions in another order.
			submission := func(i int) (session, string) { return sessions[i%n], challenges[(i/n+i%n)%n] }
			counts, answers := fire(n*n, func(i int) response {
				sess, challengeID := submission(i)
				return s.verify("crosser", sess.ID, challengeID, sess.Key, fmt.Sprintf("cross-%d", i))
			})
			t.Logf("statuses: %v", counts)
			usedSessions, verifiedChallenges := map[string]int{}, map[string]int{}
			for i, a := range answers {
				sess, challengeID := submission(i)
				switch {
				case a.status == http.StatusCreated:
					usedSessions[sess.ID]++
					verifiedChallenges[challengeID]++
				case a.status == http.StatusConflict && (a.str("error") == "SESSION_ALREADY_USED" || a.str("error") == "ALREADY_VERIFIED"):
				default:
					t.Errorf("session %d to challenge %s: %d %s", i%n, challengeID, a.status, a.raw)
				}
			}
			for id, used := range usedSessions {
				if used > 1 {
					t.Errorf("session %s verified %d challenges", id, used)
				}
			}
			for _, id := range challenges {
				if c := s.verificationCounts(id); verifiedChallenges[id] > 1 || c.verifications != verifiedChallenges[id] ||
					s.db != nil && c.completed != c.verifications {
					t.Errorf("challenge %s: %d answered 201, stored %+v", id, verifiedChallenges[id], c)
				}
			}
		})
	}
}
