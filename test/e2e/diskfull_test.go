package e2e

import (
	"database/sql"
	"fmt"
	"net/http"
	"os/exec"
	"os/user"
	"sync"
	"testing"

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
	options := fmt.Sprintf("size=8m,mode=0700,uid=%s,gid=%s", owner.Uid, owner.Gid)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", options, "tmpfs", disk).CombinedOutput(); err != nil {
		testenv.Unreachable(t, "mounting a tmpfs (needs root)", fmt.Errorf("%w: %s", err, out))
	}
	// Lazily: the server, stopped by a cleanup that runs after this one, still holds its files.
	t.Cleanup(func() { _ = exec.Command("umount", "--lazy", disk).Run() })
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
