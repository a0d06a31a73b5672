package gormdb

import (
	"context"
	"database/sql"
	"time"

	"github.com/rushgate/rushgate/domain/commerce/wallet"
	"github.com/rushgate/rushgate/ports"
)

var _ ports.WalletRepository = (*WalletRepository)(nil)

// WalletRepository stores points accounts in the users table and their ledger in
// balance_ledger; it implements ports.WalletRepository.
type WalletRepository struct {
	db *DB
	// Hand-written statements (see statement.go), bound to db's dialect once.
	createSQL, getSQL, getForUpdateSQL, applySQL, totalsSQL string
}

// NewWalletRepository returns the wallet repository of db.
func NewWalletRepository(db *DB) *WalletRepository {
	const get = "SELECT id, balance, created_at, updated_at FROM users WHERE id = ?"
	// SUM of a bigint is numeric on Postgres and DECIMAL on MySQL; cast it back.
	totals := "SELECT CAST(COALESCE(SUM(amount), 0) AS SIGNED), COUNT(*) FROM balance_ledger WHERE user_id = ?"
	if db.dialect == Postgres {
		totals = "SELECT CAST(COALESCE(SUM(amount), 0) AS bigint), COUNT(*) FROM balance_ledger WHERE user_id = ?"
	}
	return &WalletRepository{
		db:              db,
		createSQL:       Bind(db.dialect, "INSERT INTO users (id, balance, created_at, updated_at) VALUES (?, ?, ?, ?)"),
		getSQL:          Bind(db.dialect, get),
		getForUpdateSQL: Bind(db.dialect, get+" FOR UPDATE"),
		applySQL:        Bind(db.dialect, "UPDATE users SET balance = ?, updated_at = ? WHERE id = ?"),
		totalsSQL:       Bind(db.dialect, totals),
	}
}

// Create inserts the user's row and the opening ledger entry in ctx's transaction; an existing
// id is wallet.ErrUserExists. Outside TxRunner.InTx it fails: the two rows must commit together.
func (r *WalletRepository) Create(ctx context.Context, a *wallet.Account, opening wallet.Entry) error {
	if _, ok := r.db.transaction(ctx); !ok {
		return errNoTransaction
	}
	_, err := r.db.exec(ctx, errorMeanings{op: "create user", duplicate: wallet.ErrUserExists}, r.createSQL,
		a.UserID(), a.Balance(), a.CreatedAt().UTC(), a.UpdatedAt().UTC())
	if err != nil {
		return err
	}
	return r.appendEntries(ctx, []wallet.Entry{opening})
}

// Get returns the account, or wallet.ErrUserNotFound.
func (r *WalletRepository) Get(ctx context.Context, userID string) (*wallet.Account, error) {
	return r.get(ctx, r.getSQL, userID)
}

// GetForUpdate reads the account with SELECT ... FOR UPDATE, locking its row until the
// transaction in ctx ends. Outside TxRunner.InTx it fails: the lock would be released at once.
func (r *WalletRepository) GetForUpdate(ctx context.Context, userID string) (*wallet.Account, error) {
	if _, ok := r.db.transaction(ctx); !ok {
		return nil, errNoTransaction
	}
	return r.get(ctx, r.getForUpdateSQL, userID)
}

func (r *WalletRepository) get(ctx context.Context, query, userID string) (*wallet.Account, error) {
	var found *wallet.Account
	err := r.db.query(ctx, errorMeanings{op: "get user"}, query, []any{userID}, func(rows *sql.Rows) error {
		var (
			id                   string
			balance              int64
			createdAt, updatedAt time.Time
		)
		if err := rows.Scan(&id, &balance, &createdAt, &updatedAt); err != nil {
			return err
		}
		found = wallet.Rebuild(id, balance, createdAt.UTC(), updatedAt.UTC())
		return nil
	})
	if err != nil {
		return nil, err
	}
	if found == nil {
		return nil, wallet.ErrUserNotFound
	}
	return found, nil
}

// Apply writes the balance with one UPDATE and the entries with one multi-row INSERT, in ctx's
// transaction. Outside TxRunner.InTx it fails.
func (r *WalletRepository) Apply(ctx context.Context, a *wallet.Account, entries ...wallet.Entry) error {
	if _, ok := r.db.transaction(ctx); !ok {
		return errNoTransaction
	}
	updated, err := r.db.exec(ctx, errorMeanings{op: "update balance"}, r.applySQL, a.Balance(), a.UpdatedAt().UTC(), a.UserID())
	if err != nil {
		return err
	}
	if updated == 0 {
		return wallet.ErrUserNotFound
	}
	return r.appendEntries(ctx, entries)
}

// appendEntries inserts ledger entries in one statement. A call carries at most 9,362 entries
// (seven parameters each, and both databases take at most 65,535 per statement).
func (r *WalletRepository) appendEntries(ctx context.Context, entries []wallet.Entry) error {
	if len(entries) == 0 {
		return nil
	}
	query := Bind(r.db.dialect, "INSERT INTO balance_ledger (id, user_id, kind, amount, balance_after, reference, created_at) VALUES "+
		tuples(len(entries), 7))
	args := make([]any, 0, 7*len(entries))
	for _, e := range entries {
		args = append(args, e.ID, e.UserID, string(e.Kind), e.Amount, e.BalanceAfter, e.Reference, e.CreatedAt.UTC())
	}
	_, err := r.db.exec(ctx, errorMeanings{op: "append ledger entries", notFound: wallet.ErrUserNotFound}, query, args...)
	return err
}

// Totals sums the user's ledger in one aggregate on its index.
func (r *WalletRepository) Totals(ctx context.Context, userID string) (int64, int, error) {
	var (
		sum int64
		n   int
	)
	err := r.db.query(ctx, errorMeanings{op: "sum ledger"}, r.totalsSQL, []any{userID}, func(rows *sql.Rows) error {
		return rows.Scan(&sum, &n)
	})
	return sum, n, err
}
