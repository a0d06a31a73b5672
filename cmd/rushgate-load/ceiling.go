package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/rushgate/rushgate/adapters/gormdb"
)

// The ceiling is what the database alone can do: SPEC §1's join transaction issued directly
// through database/sql, with no HTTP, JSON, JWT, idempotency store or Redis lock in front of it.
// Its crews are uncapped so every transaction commits, and it uses the gormdb default pool (the
// server's default too), so both runs reach the database through the same number of connections.

// The join transaction's statements, written with ? and rebound per dialect.
const (
	insertCrewSQL = `INSERT INTO crews (id, name, max_members, current_members, created_at) VALUES (?, ?, ?, 0, ?)`
	lockCrewSQL   = `SELECT current_members, max_members FROM crews WHERE id = ? FOR UPDATE`
	insertJoinSQL = `INSERT INTO crew_members (crew_id, user_id, joined_at) VALUES (?, ?, ?)`
	countJoinSQL  = `UPDATE crews SET current_members = current_members + 1 WHERE id = ?`
)

// errCeilingFull means a ceiling crew ran out of seats: the scenario sent it more users than
// maxCapacity, which newScenario rules out.
var errCeilingFull = errors.New("ceiling crew is full")

// joinStatements are the join transaction's statements in one dialect.
type joinStatements struct {
	lockCrew, insertMember, countMember string
}

// runCeiling creates sc.crews uncapped crews with SQL and joins sc.users users to them,
// round-robin as in the rushgate run, from concurrency workers.
func runCeiling(ctx context.Context, db *gormdb.DB, sc scenario, runID string, concurrency int, timeout time.Duration) (runStats, error) {
	dialect := db.Dialect()
	crewIDs := make([]string, sc.crews)
	createdAt := time.Now().UTC()
	for c := range crewIDs {
		crewIDs[c] = uuid.NewString()
		name := fmt.Sprintf("rushgate-load ceiling %s %s #%d", sc.name, runID, c)
		if _, err := db.SQL().ExecContext(ctx, rebind(dialect, insertCrewSQL), crewIDs[c], name, maxCapacity, createdAt); err != nil {
			return runStats{}, fmt.Errorf("ceiling: create crew: %w", err)
		}
	}

	stmts := joinStatements{
		lockCrew:     rebind(dialect, lockCrewSQL),
		insertMember: rebind(dialect, insertJoinSQL),
		countMember:  rebind(dialect, countJoinSQL),
	}
	attempts, elapsed := runConcurrently(ctx, sc.users, concurrency, func(ctx context.Context, i int) attempt {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		start := time.Now()
		err := joinTx(ctx, db.SQL(), stmts, crewIDs[sc.crewOf(i)], fmt.Sprintf("ceiling-%s-%d", runID, i))
		return attempt{latency: time.Since(start), ok: err == nil, err: err}
	})
	if err := ctx.Err(); err != nil {
		return runStats{}, fmt.Errorf("interrupted during the ceiling run: %w", err)
	}
	return statsOf(attempts, elapsed), nil
}

// joinTx takes a seat in crewID for userID the way SPEC §1 does: lock the crew row, check
// capacity, insert the member, count it, commit.
func joinTx(ctx context.Context, db *sql.DB, stmts joinStatements, crewID, userID string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // a no-op once committed

	var current, maxMembers int
	if err := tx.QueryRowContext(ctx, stmts.lockCrew, crewID).Scan(&current, &maxMembers); err != nil {
		return fmt.Errorf("lock crew: %w", err)
	}
	if current >= maxMembers {
		return errCeilingFull
	}
	if _, err := tx.ExecContext(ctx, stmts.insertMember, crewID, userID, time.Now().UTC()); err != nil {
		return fmt.Errorf("insert member: %w", err)
	}
	if _, err := tx.ExecContext(ctx, stmts.countMember, crewID); err != nil {
		return fmt.Errorf("count member: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// rebind rewrites ? placeholders as $1, $2, … for Postgres; MySQL takes ? as written. The
// statements here hold no ? inside string literals.
func rebind(dialect gormdb.Dialect, query string) string {
	if dialect != gormdb.Postgres {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
