package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/rushgate/rushgate/bootstrap"
)

// refusingWritesURL returns a URL of the pair's replica on which writes are refused with the
// server's read-only error: a Postgres standby refuses everyone's, a MariaDB replica set
// read_only those of a user without the READ ONLY ADMIN privilege, which root has.
func refusingWritesURL(t *testing.T, pair replicatedDatabase) string {
	t.Helper()
	if pair.name != "mariadb" {
		return pair.replicaURL
	}
	mustExec(t, pair.primary, "CREATE USER 'rushgate'@'%'")
	mustExec(t, pair.primary, "GRANT ALL ON app.* TO 'rushgate'@'%'")
	return strings.Replace(pair.replicaURL, "root@", "rushgate@", 1)
}

// TestReadOnlyDatabase_WritesAnswer503UntilFailoverCompletes: a server whose database URL leads
// to a server that refuses writes, as during a failover - a Postgres hot standby, a MariaDB
// replica set read_only - answers a join 503 UNAVAILABLE with Retry-After, never 500, and
// still serves reads; once that server takes writes (the standby promoted, read_only turned
// off), the same server joins again, without a restart.
func TestReadOnlyDatabase_WritesAnswer503UntilFailoverCompletes(t *testing.T) {
	for _, database := range replicatedDatabases {
		t.Run(database.name, func(t *testing.T) {
			pair := database.start(t)
			primary := startServer(t, backend{name: pair.name, databaseURL: pair.primaryURL, redisURL: redisURL(t)})
			crewID := primary.createCrew(5)
			readOnlyURL := refusingWritesURL(t, pair)
			pair.caughtUp(t)
			standby := startServer(t, backend{name: pair.name + " read-only", databaseURL: readOnlyURL, redisURL: redisURL(t)},
				func(c *bootstrap.Config) { c.Database.Migrate = false })

			for i, user := range []string{"standby-joiner-1", "standby-joiner-2"} {
				a := standby.joinFromAnyGoroutine(crewID, user, user)
				if a.err != nil || a.status != http.StatusServiceUnavailable || a.code != "UNAVAILABLE" || a.retryAfter == "" {
					t.Fatalf("join %d on the read-only database: want 503 UNAVAILABLE with Retry-After, got %v", i+1, a)
				}
			}
			standby.read(listedRead{path: "/crews/" + crewID, check: hasField("currentMembers", 0)})

			promote := map[string]string{"postgres": "SELECT pg_promote()", "mariadb": "SET GLOBAL read_only = OFF"}[pair.name]
			mustExec(t, pair.replica, promote)
			if a := standby.joinFromAnyGoroutine(crewID, "after-failover", "after-failover"); a.status != http.StatusCreated {
				t.Fatalf("join once the database takes writes: want 201, got %v", a)
			}
		})
	}
}
