package gormdb

import (
	"context"
	"database/sql"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/rushgate/rushgate/domain/draw"
	"github.com/rushgate/rushgate/domain/raffle"
	"github.com/rushgate/rushgate/ports"
)

var (
	_ ports.RaffleRepository      = (*RaffleRepository)(nil)
	_ ports.RaffleEntryRepository = (*RaffleEntryRepository)(nil)
)

// raffleColumns are the raffles table's columns in the order scanRaffle reads them.
const raffleColumns = "id, name, winners, closes_at, product_id, seed, status, entries, cutoff_ticket, drawn_at, created_at"

// RaffleRepository stores raffles; it implements ports.RaffleRepository.
type RaffleRepository struct {
	db *DB
	// Hand-written statements (see statement.go), bound to db's dialect once.
	createSQL, getSQL, getForDrawSQL, saveClosingSQL, saveDrawnSQL, dueSQL, forProductSQL string
}

// NewRaffleRepository returns the raffle repository of db.
func NewRaffleRepository(db *DB) *RaffleRepository {
	get := "SELECT " + raffleColumns + " FROM raffles WHERE id = ?"
	return &RaffleRepository{
		db: db,
		createSQL: Bind(db.dialect, "INSERT INTO raffles (id, name, winners, closes_at, product_id, seed, status, entries, created_at) "+
			"VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?)"),
		getSQL:         Bind(db.dialect, get),
		getForDrawSQL:  Bind(db.dialect, get+" FOR UPDATE"),
		saveClosingSQL: Bind(db.dialect, "UPDATE raffles SET status = ? WHERE id = ? AND status = 'OPEN'"),
		saveDrawnSQL: Bind(db.dialect, "UPDATE raffles SET status = ?, entries = ?, cutoff_ticket = ?, drawn_at = ? "+
			"WHERE id = ? AND status = 'CLOSING'"),
		dueSQL: Bind(db.dialect, "SELECT id FROM raffles WHERE (status = 'OPEN' AND closes_at <= ?) OR status = 'CLOSING' "+
			"ORDER BY closes_at LIMIT ?"),
		forProductSQL: Bind(db.dialect, "SELECT "+raffleColumns+" FROM raffles WHERE product_id = ?"),
	}
}

// Create inserts the raffle with its seed.
func (r *RaffleRepository) Create(ctx context.Context, rf *raffle.Raffle) error {
	_, err := r.db.exec(ctx, errorMeanings{op: "create raffle"}, r.createSQL, rf.ID(), rf.Name(), rf.Winners(),
		rf.ClosesAt().UTC(), nullable(rf.ProductID()), rf.Seed().Bytes(), string(rf.Status()), rf.CreatedAt().UTC())
	return err
}

// Get returns the raffle, or raffle.ErrNotFound.
func (r *RaffleRepository) Get(ctx context.Context, id string) (*raffle.Raffle, error) {
	return r.getOne(ctx, "get raffle", r.getSQL, id)
}

// GetForDraw reads the raffle with SELECT … FOR UPDATE, which waits for every entry statement
// holding its share lock. Outside TxRunner.InTx it fails.
func (r *RaffleRepository) GetForDraw(ctx context.Context, id string) (*raffle.Raffle, error) {
	if _, ok := r.db.transaction(ctx); !ok {
		return nil, errNoTransaction
	}
	return r.getOne(ctx, "get raffle for draw", r.getForDrawSQL, id)
}

func (r *RaffleRepository) getOne(ctx context.Context, op, query, id string) (*raffle.Raffle, error) {
	var found *raffle.Raffle
	ok, err := r.db.queryOne(ctx, errorMeanings{op: op}, query, []any{id}, func(rows *sql.Rows) (err error) {
		found, err = scanRaffle(rows)
		return err
	})
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, raffle.ErrNotFound
	}
	return found, nil
}

// SaveClosing writes CLOSING with UPDATE … WHERE status = 'OPEN', or returns raffle.ErrNotDue.
func (r *RaffleRepository) SaveClosing(ctx context.Context, rf *raffle.Raffle) error {
	updated, err := r.db.exec(ctx, errorMeanings{op: "close raffle"}, r.saveClosingSQL, string(rf.Status()), rf.ID())
	return notDueUnless(updated, err)
}

// SaveDrawn writes the result with UPDATE … WHERE status = 'CLOSING': of two draws one updates
// the row, the other finds it drawn and gets raffle.ErrNotDue.
func (r *RaffleRepository) SaveDrawn(ctx context.Context, rf *raffle.Raffle) error {
	res := rf.Result()
	updated, err := r.db.exec(ctx, errorMeanings{op: "save drawn raffle"}, r.saveDrawnSQL, string(rf.Status()), res.Entries,
		nullable(res.CutoffTicket), res.DrawnAt.UTC(), rf.ID())
	return notDueUnless(updated, err)
}

// notDueUnless is raffle.ErrNotDue for a conditional UPDATE that matched no row.
func notDueUnless(updated int64, err error) error {
	if err == nil && updated == 0 {
		return raffle.ErrNotDue
	}
	return err
}

// Due returns up to limit raffles to draw (OPEN past closes_at, or CLOSING), earliest first,
// through the (status, closes_at) index.
func (r *RaffleRepository) Due(ctx context.Context, now time.Time, limit int) ([]string, error) {
	var ids []string
	err := r.db.query(ctx, errorMeanings{op: "find due raffles"}, r.dueSQL, []any{now.UTC(), limit}, func(rows *sql.Rows) error {
		var id string
		if err := rows.Scan(&id); err != nil {
			return err
		}
		ids = append(ids, id)
		return nil
	})
	return ids, err
}

// ForProduct returns the raffles of productID, through the product_id index.
func (r *RaffleRepository) ForProduct(ctx context.Context, productID string) ([]*raffle.Raffle, error) {
	var found []*raffle.Raffle
	err := r.db.query(ctx, errorMeanings{op: "find the product's raffles"}, r.forProductSQL, []any{productID}, func(rows *sql.Rows) error {
		rf, err := scanRaffle(rows)
		if err != nil {
			return err
		}
		found = append(found, rf)
		return nil
	})
	return found, err
}

// scanRaffle reads a row of raffleColumns.
func scanRaffle(rows *sql.Rows) (*raffle.Raffle, error) {
	var (
		id, name, status        string
		winners, entries        int
		closesAt, createdAt     time.Time
		productID, cutoffTicket sql.NullString
		drawnAt                 sql.NullTime
		seedBytes               []byte
	)
	if err := rows.Scan(&id, &name, &winners, &closesAt, &productID, &seedBytes, &status, &entries, &cutoffTicket,
		&drawnAt, &createdAt); err != nil {
		return nil, err
	}
	seed, err := draw.SeedFromBytes(seedBytes)
	if err != nil {
		return nil, err
	}
	result := raffle.Result{Entries: entries, CutoffTicket: cutoffTicket.String, DrawnAt: drawnAt.Time.UTC()}
	return raffle.Rebuild(id, name, winners, closesAt.UTC(), productID.String, seed, raffle.Status(status), result,
		createdAt.UTC()), nil
}

// nullable is NULL for an empty string.
func nullable(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// RaffleEntryRepository stores raffle entries; it implements ports.RaffleEntryRepository.
type RaffleEntryRepository struct {
	db                         *DB
	getSQL, countSQL, usersSQL string
}

// NewRaffleEntryRepository returns the raffle entry repository of db.
func NewRaffleEntryRepository(db *DB) *RaffleEntryRepository {
	return &RaffleEntryRepository{
		db:       db,
		getSQL:   Bind(db.dialect, "SELECT raffle_id, user_id, entered_at FROM raffle_entries WHERE raffle_id = ? AND user_id = ?"),
		countSQL: Bind(db.dialect, "SELECT COUNT(*) FROM raffle_entries WHERE raffle_id = ?"),
		usersSQL: Bind(db.dialect, "SELECT user_id FROM raffle_entries WHERE raffle_id = ? AND user_id > ? ORDER BY user_id LIMIT ?"),
	}
}

// addWhileOpenSQL is Postgres's entry statement: the users of the array $3 joined to the raffle's
// row, read in share mode and only while open at $2, inserted with ON CONFLICT DO NOTHING, which
// skips a user with an entry (waiting for a concurrent insert of that user to end), and
// RETURNING the users it stored. The row's share lock waits for a draw's close and the close
// for it; a close committed while the statement waited makes Postgres re-read the row, now
// CLOSING, so the statement stores nothing.
const addWhileOpenSQL = "INSERT INTO raffle_entries (raffle_id, user_id, entered_at) " +
	"SELECT r.id, u.user_id, $2 FROM (SELECT id FROM raffles WHERE id = $1 AND status = 'OPEN' AND closes_at > $2 FOR SHARE) r " +
	"CROSS JOIN unnest($3::text[]) AS u(user_id) ON CONFLICT DO NOTHING RETURNING user_id"

// errEntryExists is a MySQL entry statement refused because one of its users has an entry.
var errEntryExists = errors.New("gormdb: a user of the batch has a raffle entry")

// addAttempts bounds how often MySQL's entry statement runs again without the users a refused
// run found entered: only entries stored, or a deadlock lost, in between can refuse it again.
const addAttempts = 5

// AddWhileOpen stores the entries in one statement that holds the raffle's row in share mode
// while it checks that the raffle is open at at. The users go in byte-wise order, so two
// statements of overlapping users wait for each other's keys in one order, never in a cycle.
// Postgres skips the users with an entry and returns those it stored (addWhileOpenSQL). MySQL
// has no RETURNING: its INSERT … SELECT stores all or none, so a refusal for a duplicate (or a
// lost deadlock) is followed by a read of who is entered and a run without them, and the
// entries that read found are returned; a run that stores nothing found the raffle not open.
//
// Outside a transaction, all of it is bounded by one TxTimeout, as a transaction is, and runs
// again on another connection when its connection is lost (rerunIdempotent): after an operator
// or a pooler ended the pool's connections, a batch would otherwise take a dead one and fail.
// It is rerun even when the lost run's statement may have reached the database, since the pgx
// driver cannot tell that from a statement sent on a connection already dead: a rerun stores
// nobody twice, as it skips (Postgres) or reads (MySQL) the users with an entry. A user whom
// the lost run did store is then answered as already entered, by that entry, not as created.
func (r *RaffleEntryRepository) AddWhileOpen(ctx context.Context, raffleID string, at time.Time, userIDs []string) (
	stored []string, entered map[string]raffle.Entry, err error) {
	users := slices.Clone(userIDs)
	slices.Sort(users)
	users = slices.Compact(users)
	if len(users) == 0 {
		return nil, nil, nil
	}
	err = r.db.rerunIdempotent(ctx, func(ctx context.Context) (err error) {
		if r.db.dialect == Postgres {
			stored, err = r.addOnPostgres(ctx, raffleID, at, users)
		} else {
			stored, entered, err = r.addOnMySQL(ctx, raffleID, at, users)
		}
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return stored, entered, nil
}

// addEntriesMeanings are the entry statement's.
var addEntriesMeanings = errorMeanings{op: "add raffle entries", duplicate: errEntryExists}

// addOnPostgres runs addWhileOpenSQL for users, sorted and distinct.
func (r *RaffleEntryRepository) addOnPostgres(ctx context.Context, raffleID string, at time.Time, users []string) ([]string, error) {
	var stored []string
	err := r.db.query(ctx, addEntriesMeanings, addWhileOpenSQL, []any{raffleID, at.UTC(), users}, func(rows *sql.Rows) error {
		var u string
		if err := rows.Scan(&u); err != nil {
			return err
		}
		stored = append(stored, u)
		return nil
	})
	return stored, err
}

// addOnMySQL runs addWhileOpenMySQL for users, sorted and distinct, again without the
// users a refused run found entered.
func (r *RaffleEntryRepository) addOnMySQL(ctx context.Context, raffleID string, at time.Time, users []string) ([]string, map[string]raffle.Entry, error) {
	_, inTx := r.db.transaction(ctx)
	entered := map[string]raffle.Entry{}
	for attempt := 1; ; attempt++ {
		added, err := r.db.exec(ctx, addEntriesMeanings, addWhileOpenMySQL(len(users)), addWhileOpenArgs(raffleID, at, users)...)
		if err == nil {
			if added == 0 {
				return nil, entered, nil
			}
			return users, entered, nil
		}
		// InnoDB's duplicate checks lock the entered users' rows, so statements racing for one
		// user can deadlock; the victim, rolled back alone when it is not part of a longer
		// transaction, runs again too.
		conflict := errors.Is(err, errTxConflict) && !inTx
		if !errors.Is(err, errEntryExists) && !conflict || attempt == addAttempts {
			return nil, nil, err
		}
		if conflict {
			select {
			case <-ctx.Done():
				return nil, nil, translate(ctx.Err(), addEntriesMeanings)
			case <-time.After(conflictPause(attempt)):
			}
		}
		found, err := r.Existing(ctx, raffleID, users)
		if err != nil {
			return nil, nil, err
		}
		maps.Copy(entered, found)
		users = slices.DeleteFunc(users, func(u string) bool { _, ok := found[u]; return ok })
		if len(users) == 0 {
			return nil, entered, nil
		}
	}
}

// addWhileOpenMySQL is MySQL's entry statement for n users, bound as addWhileOpenArgs: the
// users, a derived table of n rows read in the order given, joined to the raffle's row (a
// constant table, read first) read with LOCK IN SHARE MODE (MariaDB's spelling, which MySQL
// takes too) and only while open. A locking read reads
// the latest committed row, so a statement that waited for a draw's close finds it CLOSING.
func addWhileOpenMySQL(n int) string {
	return "INSERT INTO raffle_entries (raffle_id, user_id, entered_at) SELECT r.id, u.user_id, ? FROM raffles r " +
		"JOIN (SELECT ? AS user_id" + strings.Repeat(" UNION ALL SELECT ?", n-1) + ") u " +
		"WHERE r.id = ? AND r.status = 'OPEN' AND r.closes_at > ? LOCK IN SHARE MODE"
}

func addWhileOpenArgs(raffleID string, at time.Time, users []string) []any {
	args := make([]any, 0, len(users)+3)
	args = append(args, at.UTC())
	for _, u := range users {
		args = append(args, u)
	}
	return append(args, raffleID, at.UTC())
}

// Existing returns the entries of those of userIDs who entered, in one SELECT on the primary key.
func (r *RaffleEntryRepository) Existing(ctx context.Context, raffleID string, userIDs []string) (map[string]raffle.Entry, error) {
	existing := make(map[string]raffle.Entry)
	if len(userIDs) == 0 {
		return existing, nil
	}
	query := Bind(r.db.dialect, "SELECT raffle_id, user_id, entered_at FROM raffle_entries WHERE raffle_id = ? AND user_id IN "+
		tuples(1, len(userIDs)))
	args := make([]any, 0, 1+len(userIDs))
	args = append(args, raffleID)
	for _, u := range userIDs {
		args = append(args, u)
	}
	err := r.db.query(ctx, errorMeanings{op: "find existing raffle entries"}, query, args, func(rows *sql.Rows) error {
		var e raffle.Entry
		if err := rows.Scan(&e.RaffleID, &e.UserID, &e.EnteredAt); err != nil {
			return err
		}
		e.EnteredAt = e.EnteredAt.UTC()
		existing[e.UserID] = e
		return nil
	})
	if err != nil {
		return nil, err
	}
	return existing, nil
}

// Get returns the user's entry, or raffle.ErrNotEntered.
func (r *RaffleEntryRepository) Get(ctx context.Context, raffleID, userID string) (raffle.Entry, error) {
	var e raffle.Entry
	ok, err := r.db.queryOne(ctx, errorMeanings{op: "get raffle entry"}, r.getSQL, []any{raffleID, userID}, func(rows *sql.Rows) error {
		return rows.Scan(&e.RaffleID, &e.UserID, &e.EnteredAt)
	})
	if err != nil {
		return raffle.Entry{}, err
	}
	if !ok {
		return raffle.Entry{}, raffle.ErrNotEntered
	}
	e.EnteredAt = e.EnteredAt.UTC()
	return e, nil
}

// Count returns the number of the raffle's entries.
func (r *RaffleEntryRepository) Count(ctx context.Context, raffleID string) (int, error) {
	var n int
	_, err := r.db.queryOne(ctx, errorMeanings{op: "count raffle entries"}, r.countSQL, []any{raffleID}, func(rows *sql.Rows) error {
		return rows.Scan(&n)
	})
	return n, err
}

// UserIDs returns up to limit entrants after the id after, seeking on the primary key
// (raffle_id, user_id), whose byte-wise collation gives the order.
func (r *RaffleEntryRepository) UserIDs(ctx context.Context, raffleID, after string, limit int) ([]string, error) {
	var ids []string
	err := r.db.query(ctx, errorMeanings{op: "read raffle entrants"}, r.usersSQL, []any{raffleID, after, limit}, func(rows *sql.Rows) error {
		var id string
		if err := rows.Scan(&id); err != nil {
			return err
		}
		ids = append(ids, id)
		return nil
	})
	return ids, err
}

// NewRaffleStores returns the raffle repositories of db.
func NewRaffleStores(db *DB) ports.RaffleStores {
	return ports.RaffleStores{Raffles: NewRaffleRepository(db), Entries: NewRaffleEntryRepository(db)}
}
