package verification_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rushgate/rushgate/adapters/localblob"
	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/adapters/memory/memorytest"
	"github.com/rushgate/rushgate/adapters/system"
	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/application/verification"
	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/challenge"
	"github.com/rushgate/rushgate/domain/crew"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testkit"
)

var pngBytes = append([]byte("\x89PNG\r\n\x1a\n"), []byte("0123456789abcdef")...)

// fixture is the use cases on memory adapters, local-disk storage and a clock that moves only
// when told to.
type fixture struct {
	t       *testing.T
	clock   *memory.Clock
	stores  ports.Stores
	blobs   *localblob.Store
	blobDir string // where blobs keeps its objects
	storage ports.ObjectStorage
	guard   *guard.Guard
	svc     *verification.Service
	keys    atomic.Int64
}

func newFixture(t *testing.T, wrap func(ports.ObjectStorage) ports.ObjectStorage, opts ...memorytest.Option) *fixture {
	t.Helper()
	env := memorytest.New(opts...)
	blobDir := t.TempDir()
	blobs, err := localblob.New(blobDir, func() string { return "http://rushgate.test" }, []byte(strings.Repeat("s", 32)), env.Clock)
	if err != nil {
		t.Fatal(err)
	}
	stores := env.Stores
	f := &fixture{t: t, clock: env.FakeClock, stores: stores, blobs: blobs, blobDir: blobDir, storage: blobs, guard: env.Guard}
	if wrap != nil {
		f.storage = wrap(blobs)
	}
	f.svc = verification.NewService(verification.Deps{
		Tx: stores.Tx, Challenges: stores.Challenges, Sessions: stores.UploadSessions, Verifications: stores.Verifications,
		Crews: stores.Crews, Storage: f.storage, Guard: env.Guard, Clock: env.Clock, IDs: system.UUIDs{},
	}, verification.Config{})
	return f
}

func (f *fixture) challenge(deadline time.Time) string {
	f.t.Helper()
	c, err := f.svc.CreateChallenge(context.Background(), verification.CreateChallengeCommand{Title: "unit", Deadline: deadline})
	if err != nil {
		f.t.Fatal(err)
	}
	return c.ID
}

// uploaded opens a session for user and uploads a PNG through the presigned URL, as the upload
// route would receive it.
func (f *fixture) uploaded(user string) verification.SessionView {
	f.t.Helper()
	s, err := f.svc.CreateUploadSession(context.Background(), verification.SessionCommand{
		UserID: user, FileName: "p.png", ContentType: "image/png", FileSize: int64(len(pngBytes))})
	if err != nil {
		f.t.Fatal(err)
	}
	u, err := url.Parse(s.PresignedURL)
	if err != nil {
		f.t.Fatal(err)
	}
	length, _ := strconv.ParseInt(s.RequiredHeaders["Content-Length"], 10, 64)
	err = f.blobs.Receive(localblob.Upload{Key: strings.TrimPrefix(u.Path, localblob.RoutePrefix), ContentType: s.RequiredHeaders["Content-Type"],
		ContentLength: length, Expires: u.Query().Get("expires"), Signature: u.Query().Get("signature"), Body: strings.NewReader(string(pngBytes))})
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

func (f *fixture) verify(user string, s verification.SessionView, challengeID string) (guard.Result[verification.View], error) {
	return f.svc.Verify(context.Background(), verification.VerifyCommand{UserID: user, SessionID: s.SessionID,
		ChallengeID: challengeID, ImageKey: s.ObjectKey, IdempotencyKey: "k" + strconv.FormatInt(f.keys.Add(1), 10)})
}

// TestVerify_DeadlineIsJudgedBySessionRequestedAt: a session requested exactly at the deadline
// is late; one requested before it is accepted even when verified after it.
func TestVerify_DeadlineIsJudgedBySessionRequestedAt(t *testing.T) {
	f := newFixture(t, nil)
	deadline := f.clock.Now().Add(time.Minute)
	challengeID := f.challenge(deadline)

	early := f.uploaded("early")
	f.clock.Advance(time.Minute)
	atDeadline := f.uploaded("exact")
	f.clock.Advance(10 * time.Minute)

	if _, err := f.verify("exact", atDeadline, challengeID); !errors.Is(err, challenge.ErrDeadlinePassed) {
		t.Fatalf("session requested at the deadline: %v, want DEADLINE_PASSED", err)
	}
	res, err := f.verify("early", early, challengeID)
	if err != nil {
		t.Fatalf("session requested before the deadline, verified after: %v", err)
	}
	if want := deadline.Add(-time.Minute); !res.Value.RequestedAt.Equal(want) {
		t.Fatalf("requestedAt %v, want the session's %v", res.Value.RequestedAt, want)
	}
}

// TestSessionExpiry_AtAndJustPastThirtyMinutes: a session exactly 30 minutes old is still valid
// and not expired by the worker; one a microsecond older is refused and expired, once.
func TestSessionExpiry_AtAndJustPastThirtyMinutes(t *testing.T) {
	f := newFixture(t, nil)
	challengeID := f.challenge(f.clock.Now().Add(24 * time.Hour))
	older := f.uploaded("older")
	f.clock.Advance(time.Microsecond)
	exact := f.uploaded("exact")
	f.clock.Advance(verification.DefaultSessionExpiry)

	n, err := f.svc.ExpireSessions(context.Background(), 10)
	if err != nil || n != 1 {
		t.Fatalf("expired %d (%v), want 1", n, err)
	}
	if n, _ := f.svc.ExpireSessions(context.Background(), 10); n != 0 {
		t.Fatalf("a second round expired %d", n)
	}
	status := func(id string) challenge.SessionStatus {
		s, err := f.stores.UploadSessions.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return s.Status()
	}
	if status(older.SessionID) != challenge.SessionExpired || status(exact.SessionID) != challenge.SessionPending {
		t.Fatalf("older %s, exact %s", status(older.SessionID), status(exact.SessionID))
	}
	if _, err := f.verify("older", older, challengeID); !errors.Is(err, challenge.ErrInvalidSession) {
		t.Fatalf("expired session: %v, want INVALID_SESSION", err)
	}
	if _, err := f.verify("exact", exact, challengeID); err != nil {
		t.Fatalf("session exactly 30 minutes old: %v", err)
	}
}

// TestVerify_PastExpiryRefusedBeforeTheWorkerRuns: the clock alone makes a PENDING session
// invalid.
func TestVerify_PastExpiryRefusedBeforeTheWorkerRuns(t *testing.T) {
	f := newFixture(t, nil)
	challengeID := f.challenge(f.clock.Now().Add(24 * time.Hour))
	s := f.uploaded("u1")
	f.clock.Advance(verification.DefaultSessionExpiry + time.Microsecond)
	if _, err := f.verify("u1", s, challengeID); !errors.Is(err, challenge.ErrInvalidSession) {
		t.Fatalf("%v, want INVALID_SESSION", err)
	}
}

// stored opens a session for user declaring a file of declaredSize bytes named fileName, and
// stores content under its object key directly, as a lenient upload route might have.
func (f *fixture) stored(user, fileName, contentType string, declaredSize int, content []byte) verification.SessionView {
	f.t.Helper()
	s, err := f.svc.CreateUploadSession(context.Background(), verification.SessionCommand{
		UserID: user, FileName: fileName, ContentType: contentType, FileSize: int64(declaredSize)})
	if err != nil {
		f.t.Fatal(err)
	}
	path := filepath.Join(f.blobDir, filepath.FromSlash(s.ObjectKey))
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(path, content, 0o600); err != nil {
		f.t.Fatal(err)
	}
	return s
}

// TestVerify_StoredObjectMustBeTheDeclaredFile: whatever storage holds under the key, a
// verification passes only for an object of exactly the declared size whose first bytes are
// the declared type's signature; a refusal is IMAGE_NOT_UPLOADED and changes nothing.
func TestVerify_StoredObjectMustBeTheDeclaredFile(t *testing.T) {
	f := newFixture(t, nil)
	challengeID := f.challenge(f.clock.Now().Add(time.Hour))
	jpeg := []byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01")
	nearJPEG := append([]byte("\xff\xd8\x00"), jpeg[3:]...)
	for _, tc := range []struct {
		name, fileName, contentType string
		declared                    int
		content                     []byte
	}{
		{"one byte more than declared", "p.png", "image/png", len(pngBytes), append(append([]byte{}, pngBytes...), 0)},
		{"one byte fewer than declared", "p.png", "image/png", len(pngBytes), pngBytes[:len(pngBytes)-1]},
		{"FF D8 not followed by FF", "p.jpg", "image/jpeg", len(nearJPEG), nearJPEG},
	} {
		user := "u-" + strings.ReplaceAll(tc.name, " ", "-") // each case its own user: no case hides another
		s := f.stored(user, tc.fileName, tc.contentType, tc.declared, tc.content)
		if _, err := f.verify(user, s, challengeID); !errors.Is(err, challenge.ErrImageNotUploaded) {
			t.Errorf("%s: %v, want IMAGE_NOT_UPLOADED", tc.name, err)
		}
		if got, err := f.stores.UploadSessions.Get(context.Background(), s.SessionID); err != nil || got.Status() != challenge.SessionPending {
			t.Errorf("%s: session %v, %v, want it still PENDING", tc.name, got.Status(), err)
		}
	}
	page, err := f.svc.ListVerifications(context.Background(), verification.ListCommand{ChallengeID: challengeID, Admin: true})
	if err != nil || len(page.Items) != 0 {
		t.Fatalf("verifications after refusals: %+v, %v", page.Items, err)
	}
	good := f.stored("u1", "p.jpg", "image/jpeg", len(jpeg), jpeg)
	if _, err := f.verify("u1", good, challengeID); err != nil {
		t.Fatalf("a JPEG of the declared size: %v", err)
	}
}

// parkedStorage holds Stat calls until released, so a request stays IN_PROGRESS; parked
// (buffered) hears that one is held.
type parkedStorage struct {
	ports.ObjectStorage
	parked  chan struct{}
	release chan struct{}
}

func (p parkedStorage) Stat(ctx context.Context, key string) (int64, error) {
	select {
	case p.parked <- struct{}{}:
	default:
	}
	<-p.release
	return p.ObjectStorage.Stat(ctx, key)
}

// signallingBegins closes taken once a Begin has taken a key: a request's precheck runs while
// its key is being taken, so a parked precheck alone does not say the key is held.
type signallingBegins struct {
	ports.IdempotencyStore
	taken chan struct{}
	once  *sync.Once
}

func (s signallingBegins) Begin(ctx context.Context, key ports.IdempotencyKey, fingerprint string, lease, ttl time.Duration) (ports.BeginResult, error) {
	res, err := s.IdempotencyStore.Begin(ctx, key, fingerprint, lease, ttl)
	if err == nil && res.State == ports.BeginStarted {
		s.once.Do(func() { close(s.taken) })
	}
	return res, err
}

// TestVerify_SameKeyWhileTheFirstRunsIsInProgress: a retry with the key of a request still
// running is IDEMPOTENCY_IN_PROGRESS; once the first is done, the retry is its replay.
func TestVerify_SameKeyWhileTheFirstRunsIsInProgress(t *testing.T) {
	parked := parkedStorage{parked: make(chan struct{}, 1), release: make(chan struct{})}
	begins := signallingBegins{taken: make(chan struct{}), once: &sync.Once{}}
	f := newFixture(t, func(s ports.ObjectStorage) ports.ObjectStorage { parked.ObjectStorage = s; return parked },
		memorytest.WithIdempotency(func(s ports.IdempotencyStore) ports.IdempotencyStore { begins.IdempotencyStore = s; return begins }))
	challengeID := f.challenge(f.clock.Now().Add(time.Hour))
	s := f.uploaded("u1")
	cmd := verification.VerifyCommand{UserID: "u1", SessionID: s.SessionID, ChallengeID: challengeID, ImageKey: s.ObjectKey, IdempotencyKey: "same"}
	first := make(chan error, 1)
	go func() {
		_, err := f.svc.Verify(context.Background(), cmd)
		first <- err
	}()
	<-parked.parked
	<-begins.taken
	if _, err := f.svc.Verify(context.Background(), cmd); !errors.Is(err, guard.ErrInProgress) {
		t.Fatalf("same key while the first runs: %v, want IDEMPOTENCY_IN_PROGRESS", err)
	}
	close(parked.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	res, err := f.svc.Verify(context.Background(), cmd)
	if err != nil || !res.Replayed {
		t.Fatalf("retry after: %+v %v, want a replay", res, err)
	}
}

func TestCreateChallenge_RefusesBadInput(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	for _, tc := range []struct {
		cmd  verification.CreateChallengeCommand
		want error
	}{
		{verification.CreateChallengeCommand{Title: "", Deadline: f.clock.Now()}, domain.ErrValidation},
		{verification.CreateChallengeCommand{Title: "t"}, domain.ErrValidation},
		{verification.CreateChallengeCommand{Title: "t", Deadline: f.clock.Now(), CrewID: "not-a-uuid"}, domain.ErrValidation},
		{verification.CreateChallengeCommand{Title: "t", Deadline: f.clock.Now(), CrewID: "0190a0b0-0000-7000-8000-000000000000"}, crew.ErrNotFound},
	} {
		if _, err := f.svc.CreateChallenge(ctx, tc.cmd); !errors.Is(err, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.cmd, err, tc.want)
		}
	}
}

// TestVerify_ConcurrentSubmissionsOfOneSessionVerifyOnce: 50 submissions of one session at once,
// each with its own key, make one verification; the others hear SESSION_ALREADY_USED.
func TestVerify_ConcurrentSubmissionsOfOneSessionVerifyOnce(t *testing.T) {
	f := newFixture(t, nil)
	challengeID := f.challenge(f.clock.Now().Add(time.Hour))
	s := f.uploaded("u1")
	const n = 50
	errs := make([]error, n)
	testkit.StartTogether(n, func(i int) { _, errs[i] = f.verify("u1", s, challengeID) })
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, challenge.ErrSessionAlreadyUsed):
			t.Fatalf("unexpected %v", err)
		}
	}
	page, err := f.svc.ListVerifications(context.Background(), verification.ListCommand{ChallengeID: challengeID, Admin: true})
	if ok != 1 || err != nil || len(page.Items) != 1 {
		t.Fatalf("%d succeeded, %d stored (%v), want 1", ok, len(page.Items), err)
	}
}

// deadlineSessions is an upload session repository that records the deadline each read
// received.
type deadlineSessions struct {
	ports.UploadSessionRepository
	testkit.Deadlines
}

func (d *deadlineSessions) Get(ctx context.Context, id string) (challenge.UploadSession, error) {
	d.Record(ctx, "Get")
	return d.UploadSessionRepository.Get(ctx, id)
}

func (d *deadlineSessions) GetForUpdate(ctx context.Context, id string) (challenge.UploadSession, error) {
	d.Record(ctx, "GetForUpdate")
	return d.UploadSessionRepository.GetForUpdate(ctx, id)
}

// TestVerify_ThePrecheckAndTheTransactionShareOneDatabaseTimeout: a verification reads its
// session (and challenge) before its lock, then locks them in its batch's transaction; both run
// until one Config.Timeout after the verification's arrival (its wait for the lock, none here,
// and its storage check aside), not one timeout each.
func TestVerify_ThePrecheckAndTheTransactionShareOneDatabaseTimeout(t *testing.T) {
	const timeout = time.Hour // never reached: only the deadlines are read
	f := newFixture(t, nil)
	challengeID := f.challenge(f.clock.Now().Add(time.Hour))
	s := f.uploaded("u1")
	sessions := &deadlineSessions{UploadSessionRepository: f.stores.UploadSessions}
	svc := verification.NewService(verification.Deps{
		Tx: f.stores.Tx, Challenges: f.stores.Challenges, Sessions: sessions, Verifications: f.stores.Verifications,
		Crews: f.stores.Crews, Storage: f.storage, Guard: f.guard, Clock: f.clock, IDs: system.UUIDs{},
	}, verification.Config{Timeout: timeout})

	before := time.Now()
	_, err := svc.Verify(context.Background(), verification.VerifyCommand{UserID: "u1", SessionID: s.SessionID,
		ChallengeID: challengeID, ImageKey: s.ObjectKey, IdempotencyKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	sessions.AssertOneTimeoutFromArrival(t, timeout, before, time.Now(), "Get", "GetForUpdate")
}
