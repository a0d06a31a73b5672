package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/rushgate/rushgate/adapters/gormdb"
)

// The ceiling is what the database alone can do: the crew join transaction issued directly
// through database/sql, with no HTTP, JSON, JWT, idempotency store or Redis lock in front of it,
// on crews of the same shape as the rushgate run's, at the same concurrency. It uses the gormdb
// default pool (the server's default too), so with one instance both runs reach the database
// through the same number of connections.

// The join transaction's statements, written with ? and rebound per dialect.
const (
	insertCrewSQL = `INSERT INTO crews (id, name, max_members, current_members, created_at) VALUES (?, ?, ?, 0, ?)`
	lockCrewSQL   = `SELECT current_members, max_members FROM crews WHERE id = ? FOR UPDATE`
	insertJoinSQL = `INSERT INTO crew_members (crew_id, user_id, joined_at) VALUES (?, ?, ?)`
	countJoinSQL  = `UPDATE crews SET current_members = current_members + 1 WHERE id = ?`
)

// errCrewFull means the ceiling's crew had no seat left: the transaction rolled back, as
// rushgate answers CREW_FULL.
var errCrewFull = errors.New("crew is full")

// joinStatements are the join transaction's statements in one dialect.
type joinStatements struct {
	lockCrew, insertMember, countMember string
}

func newJoinStatements(d gormdb.Dialect) joinStatements {
	return joinStatements{
		lockCrew:     gormdb.Bind(d, lockCrewSQL),
		insertMember: gormdb.Bind(d, insertJoinSQL),
		countMember:  gormdb.Bind(d, countJoinSQL),
	}
}

// joinTx takes a seat in crewID for userID as the server does: BEGIN, lock the crew row
// (SELECT … FOR UPDATE), check capacity, INSERT the member, UPDATE the count, COMMIT.
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
		return errCrewFull
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
