package e2e

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rushgate/rushgate/bootstrap"
	"github.com/rushgate/rushgate/test/testenv"
)

// fullDatabase is a private database server whose storage the test can fill and free.
type fullDatabase struct {
	privateDatabase
	// createFiller creates the empty table fill grows, where the server's tables are stored.
	createFiller string
	// fillChunk adds a few hundred kilobytes to the filler table.
	fillChunk string
	// awaitFreed, when set, returns once the dropped filler's space can be used again.
	awaitFreed string
}

// TestDatabaseOutOfSpace_WritesAnswer503UntilSpaceIsFreed: a database whose storage is full -
// Postgres tables on a small tmpfs, MariaDB's system tablespace at its maximum size - refuses
// the writes that need more room. A join it refuses answers 503 UNAVAILABLE with Retry-After,
// never 500, and leaves nothing half-written; reads still answer and the server stays ready.
// Once space is freed, the same server joins again on several pooled connections at once, and
// the refused join tried again joins too, without a restart.
func TestDatabaseOutOfSpace_WritesAnswer503UntilSpaceIsFreed(t *testing.T) {
	for _, newDatabase := range []func(*testing.T) fullDatabase{startPostgresOnSmallDisk, startMariaDBWithSmallTablespace} {
		db := newDatabase(t)
		t.Run(db.name, func(t *testing.T) {
			s := startServer(t, backend{name: db.name, databaseURL: db.url, redisURL: redisURL(t)})
			crewID := s.createCrew(10_000)
			filler := openDatabase(t, db.url)
			mustExec(t, filler, db.createFiller)
			t.Logf("the database is full: %v", fill(t, filler, db.fillChunk))

			// A join fits while the pages its rows go to have room, and is refused once one needs
			// a new page: the B-trees' leaves fill one by one, so refusals and successes mix.
			const refusalsWanted = 5
			joined, refused := 0, 0
			var firstRefused string
			for n := 0; refused < refusalsWanted; n++ {
				if n == 3000 {
					t.Fatalf("%d joins in a full database: %d refused, %d fit", n, refused, joined)
				}
				user := fmt.Sprint("while-full-", n)
				switch a := s.joinFromAnyGoroutine(crewID, user, user); {
				case a.status == http.StatusCreated:
					joined++
				case a.err == nil && a.status == http.StatusServiceUnavailable && a.code == "UNAVAILABLE" && a.retryAfter != "":
					refused++
					if firstRefused == "" {
						firstRefused = user
					}
				default:
					t.Fatalf("join on the full database (after %d fit): want 201, or 503 UNAVAILABLE with Retry-After, got %v", joined, a)
				}
			}
			t.Logf("while full: %d joins fit, %d refused", joined, refused)
			if st := s.stored(crewID); st.currentMembers != joined || st.members != joined || st.distinctUsers != joined {
				t.Fatalf("while full, after %d joins: %+v", joined, st)
			}
			// Reads need no room, and /readyz only pings.
			s.read(listedRead{path: "/crews/" + crewID, check: hasField("currentMembers", joined)})
			if res := s.do("GET", "/readyz", "", ""); res.status != http.StatusOK {
				t.Fatalf("/readyz while the database is full: %d %s", res.status, res.raw)
			}

			mustExec(t, filler, "DROP TABLE disk_filler")
			if db.awaitFreed != "" {
				mustExec(t, filler, db.awaitFreed)
			}
			// At once, so that they take several of the pool's connections: none was left broken.
			const together = 8
			answers := make([]answer, together)
			var wg sync.WaitGroup
			for i := range answers {
				wg.Go(func() {
					user := fmt.Sprint("after-free-", i)
					answers[i] = s.joinFromAnyGoroutine(crewID, user, user)
				})
			}
			wg.Wait()
			for _, a := range answers {
				if a.status != http.StatusCreated {
					t.Errorf("join once space is freed: want 201, got %v", a)
				}
			}
			joined += together
			// The client that heard 503 tries again, with the same Idempotency-Key.
			if a := s.joinFromAnyGoroutine(crewID, firstRefused, firstRefused); a.status != http.StatusCreated {
				t.Errorf("a refused join tried again once space is freed: want 201, got %v", a)
			}
			joined++
			if st := s.stored(crewID); st.currentMembers != joined || st.members != joined || st.distinctUsers != joined {
				t.Fatalf("after %d joins in all: %+v", joined, st)
			}
		})
	}
}

// fill runs chunk until the database refuses it, and returns the refusal.
func fill(t *testing.T, db *sql.DB, chunk string) error {
	t.Helper()
	for range 10_000 {
		if _, err := db.Exec(chunk); err != nil {
			return err
		}
	}
	t.Fatal("the database never filled up")
	return nil
}

// startPostgresOnSmallDisk is a private Postgres whose tables, the server's included, are stored
// in a tablespace on an 8 MiB tmpfs; its catalog and WAL stay in the data directory, so the
// server itself keeps running when the tablespace is full. Mounting needs root.
func startPostgresOnSmallDisk(t *testing.T) fullDatabase {
	t.Helper()
	db := startPrivatePostgres(t)
	owner, err := user.Lookup("postgres")
	if err != nil {
		testenv.Unreachable(t, "postgres user", err)
	}
	disk := privateDir(t, "rushgate-small-disk-", "postgres")
	mountTmpfs(t, disk, fmt.Sprintf("size=8m,mode=0700,uid=%s,gid=%s", owner.Uid, owner.Gid))
	admin := openDatabase(t, db.url)
	mustExec(t, admin, fmt.Sprintf("CREATE TABLESPACE small_disk LOCATION '%s'", disk))
	mustExec(t, admin, "ALTER DATABASE postgres SET default_tablespace = small_disk")
	return fullDatabase{
		privateDatabase: db,
		createFiller:    "CREATE TABLE disk_filler (pad text) TABLESPACE small_disk",
		fillChunk:       "INSERT INTO disk_filler SELECT repeat('x', 1000) FROM generate_series(1, 200)",
	}
}

// startMariaDBWithSmallTablespace is a private MariaDB that stores every table in a system
// tablespace that may not grow past 24 MiB.
func startMariaDBWithSmallTablespace(t *testing.T) fullDatabase {
	t.Helper()
	db := startPrivateMariaDBWith(t, "--innodb-file-per-table=0", "--innodb-data-file-path=ibdata1:12M:autoextend:max:24M")
	return fullDatabase{
		privateDatabase: db,
		createFiller:    "CREATE TABLE disk_filler (id INT AUTO_INCREMENT PRIMARY KEY, pad VARCHAR(2000)) ENGINE=InnoDB",
		fillChunk:       "INSERT INTO disk_filler (pad) SELECT REPEAT('x', 2000) FROM seq_1_to_200",
		// The purge returns a dropped table's pages to the tablespace a moment after the DROP;
		// this waits for it.
		awaitFreed: "SET GLOBAL innodb_max_purge_lag_wait = 0",
	}
}

// mountTmpfs mounts a tmpfs with options on dir until the test ends. Mounting needs root.
func mountTmpfs(t *testing.T, dir, options string) {
	t.Helper()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", options, "tmpfs", dir).CombinedOutput(); err != nil {
		testenv.Unreachable(t, "mounting a tmpfs (needs root)", fmt.Errorf("%w: %s", err, out))
	}
	// Lazily: a server, stopped by a cleanup that runs after this one, may still hold its files.
	t.Cleanup(func() { _ = exec.Command("umount", "--lazy", dir).Run() })
}

// TestDataDirectoryOutOfSpace_UploadsAnswer503UntilSpaceIsFreed: on the embedded default, with
// RUSHGATE_DATA_DIR on a 1 MiB tmpfs filled up, a PUT of a photo answers 503 UNAVAILABLE with
// Retry-After, never 500, whether the disk has no room at all or some but not enough, and
// leaves no file, whole or partial, under the upload's name or among those being received:
// verifying it answers IMAGE_NOT_UPLOADED, while a photo uploaded before the disk filled still
// verifies. /readyz names storage failing while no file can take a byte. Once space is freed
// the same PUT stores the photo and it verifies, and /readyz is ready, without a restart.
func TestDataDirectoryOutOfSpace_UploadsAnswer503UntilSpaceIsFreed(t *testing.T) {
	disk := privateDir(t, "rushgate-small-data-dir-", "")
	mountTmpfs(t, disk, "size=1m,mode=0700")
	s := startServer(t, testBackends[0], func(cfg *bootstrap.Config) { cfg.Storage.DataDir = disk })
	challengeID := s.createChallenge(time.Now().Add(time.Hour))
	early := s.uploadedSession("uploaded-before")

	// A photo larger than the room left in the second step below: its write fails midway.
	const roomLeft = 64 << 10
	photo := append(pngImage(), make([]byte, 4*roomLeft)...)
	sess, opened := s.openSession("uploader", "photo.png", "image/png", len(photo))
	if opened.status != http.StatusOK {
		t.Fatalf("open session: %d %s", opened.status, opened.raw)
	}
	filler := filepath.Join(disk, ".filler") // no key starts with a dot
	t.Logf("the data directory is full: %v", fillFile(t, filler))

	refusedPut := func(when string) {
		t.Helper()
		res, err := s.putAnswer(sess.URL, sess.Headers, photo, nil)
		if err != nil || res.status != http.StatusServiceUnavailable || res.str("error") != "UNAVAILABLE" ||
			res.str("message") == "" || res.header.Get("Retry-After") == "" {
			t.Fatalf("PUT %s: want 503 UNAVAILABLE with Retry-After, got %d %v %s (%v)", when, res.status, res.header, res.raw, err)
		}
		if files := regularFiles(t, disk); len(files) != 2 || !slices.Contains(files, filler) {
			t.Fatalf("PUT %s left files: %v, want only the filler and the early upload", when, files)
		}
		assertError(t, s.verify("uploader", sess.ID, challengeID, sess.Key, "refused-"+when), http.StatusBadRequest, "IMAGE_NOT_UPLOADED")
	}
	refusedPut("with no room")
	ready := s.do("GET", "/readyz", "", "")
	if checks, _ := ready.body["checks"].(map[string]any); ready.status != http.StatusServiceUnavailable || checks["storage"] != "failing" {
		t.Fatalf("/readyz with the data directory full: want 503 naming storage failing, got %d %s", ready.status, ready.raw)
	}
	if err := os.Truncate(filler, fileSize(t, filler)-roomLeft); err != nil {
		t.Fatal(err)
	}
	refusedPut("with too little room")
	// Reads need no room.
	if res := s.verify("uploaded-before", early.ID, challengeID, early.Key, "early"); res.status != http.StatusCreated {
		t.Fatalf("verify a photo uploaded before the disk filled: %d %s", res.status, res.raw)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if status, body := s.put(sess.URL, sess.Headers, photo, nil); status != http.StatusOK {
		t.Fatalf("the same PUT once space is freed: %d %s", status, body)
	}
	if stored, err := os.ReadFile(filepath.Join(disk, filepath.FromSlash(sess.Key))); err != nil || !bytes.Equal(stored, photo) {
		t.Fatalf("the stored photo (%v) is not the one uploaded", err)
	}
	if res := s.verify("uploader", sess.ID, challengeID, sess.Key, "after-free"); res.status != http.StatusCreated {
		t.Fatalf("verify once space is freed: %d %s", res.status, res.raw)
	}
	if res := s.do("GET", "/readyz", "", ""); res.status != http.StatusOK {
		t.Fatalf("/readyz once space is freed: %d %s", res.status, res.raw)
	}
}

// fillFile writes to path until its file system refuses, and returns the refusal, which must be
// for want of space.
func fillFile(t *testing.T, path string) error {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for range 100_000 {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", path, err)
			}
			return err
		}
	}
	t.Fatal("the file system never filled up")
	return nil
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Size()
}
