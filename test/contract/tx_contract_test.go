package contract_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/adapters/gormdb"
	"github.com/rushgate/rushgate/domain/crew"
	"github.com/rushgate/rushgate/ports"
)

// TestTxRunnerContract checks the sentences of ports.TxRunner against every backend.
func TestTxRunnerContract(t *testing.T) {
	cases := []contractCase[crewStore]{
		{"CommitMakesWritesVisible", testTxCommitMakesWritesVisible},
		{"ErrorRollsBackAndIsReturnedUnchanged", testTxErrorRollsBack},
		{"NestedInTxJoinsOuter", testTxNestedJoinsOuter},
		{"FailedCommitIsReturned", testTxFailedCommitIsReturned},
	}
	runContract(t, crewBackends, cases)
}

// joinInTx is the crew join use case's transaction: lock the crew, take a seat, store both.
func joinInTx(ctx context.Context, s crewStore, crewID, userID string) error {
	return s.tx.InTx(ctx, func(ctx context.Context) error {
		c, err := s.crews.GetForUpdate(ctx, crewID)
		if err != nil {
			return err
		}
		m, err := c.Join(userID, now())
		if err != nil {
			return err
		}
		if err := s.crews.Save(ctx, c); err != nil {
			return err
		}
		return s.members.Add(ctx, m)
	})
}

func testTxCommitMakesWritesVisible(t *testing.T, s crewStore) {
	ctx := context.Background()
	c, err := crew.New(newCrewID(), "committed", 5, now())
	require.NoError(t, err)
	userID := newUserID()

	err = s.tx.InTx(ctx, func(txCtx context.Context) error {
		require.NoError(t, s.crews.Create(txCtx, c))
		m, err := c.Join(userID, now())
		require.NoError(t, err)
		require.NoError(t, s.crews.Save(txCtx, c))
		require.NoError(t, s.members.Add(txCtx, m))

		// Outside the transaction nothing is visible before the commit.
		_, err = s.crews.Get(ctx, c.ID())
		require.ErrorIs(t, err, crew.ErrNotFound)
		return nil
	})
	require.NoError(t, err)

	stored, err := s.crews.Get(ctx, c.ID())
	require.NoError(t, err)
	assert.Equal(t, 1, stored.CurrentMembers())
	exists, err := s.members.Exists(ctx, c.ID(), userID)
	require.NoError(t, err)
	assert.True(t, exists)
}

func testTxErrorRollsBack(t *testing.T, s crewStore) {
	for _, fnErr := range []error{
		errors.New("plain failure"),
		fmt.Errorf("join: %w", crew.ErrFull),
	} {
		t.Run(fnErr.Error(), func(t *testing.T) {
			ctx := context.Background()
			c, err := crew.New(newCrewID(), "rolled back", 5, now())
			require.NoError(t, err)

			err = s.tx.InTx(ctx, func(ctx context.Context) error {
				require.NoError(t, s.crews.Create(ctx, c))
				m, err := c.Join(newUserID(), now())
				require.NoError(t, err)
				require.NoError(t, s.members.Add(ctx, m))
				return fnErr
			})

			assert.Same(t, fnErr, err, "fn's error is returned unchanged")
			_, err = s.crews.Get(ctx, c.ID())
			assert.ErrorIs(t, err, crew.ErrNotFound)
			n, err := s.members.Count(ctx, c.ID())
			require.NoError(t, err)
			assert.Zero(t, n)
		})
	}
}

func testTxNestedJoinsOuter(t *testing.T, s crewStore) {
	ctx := context.Background()
	c, err := crew.New(newCrewID(), "nested", 5, now())
	require.NoError(t, err)
	userID := newUserID()
	abort := errors.New("abort outer")

	err = s.tx.InTx(ctx, func(ctx context.Context) error {
		require.NoError(t, s.crews.Create(ctx, c))
		innerErr := s.tx.InTx(ctx, func(ctx context.Context) error {
			// Only the outer transaction can see, and lock, the crew it has not committed.
			locked, err := s.crews.GetForUpdate(ctx, c.ID())
			if err != nil {
				return err
			}
			m, err := locked.Join(userID, now())
			if err != nil {
				return err
			}
			return s.members.Add(ctx, m)
		})
		require.NoError(t, innerErr)
		return abort
	})
	require.Same(t, abort, err)

	// The inner InTx committed nothing of its own: the outer rollback undid its write too.
	exists, err := s.members.Exists(ctx, c.ID(), userID)
	require.NoError(t, err)
	assert.False(t, exists)
	_, err = s.crews.Get(ctx, c.ID())
	assert.ErrorIs(t, err, crew.ErrNotFound)
}

func testTxFailedCommitIsReturned(t *testing.T, s crewStore) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	c, err := crew.New(newCrewID(), "never committed", 5, now())
	require.NoError(t, err)

	err = s.tx.InTx(ctx, func(ctx context.Context) error {
		require.NoError(t, s.crews.Create(ctx, c))
		<-ctx.Done() // the transaction's deadline passes before fn returns
		return nil
	})

	require.ErrorIs(t, err, context.DeadlineExceeded)
	_, err = s.crews.Get(context.Background(), c.ID())
	assert.ErrorIs(t, err, crew.ErrNotFound)
}

// TestSQLOpen_UnreachableServerFailsFast: Open answers within its connect timeout with
// ports.ErrUnavailable naming the dialect and host, never the password, whether the server
// refuses connections or accepts them and stays silent.
func TestSQLOpen_UnreachableServerFailsFast(t *testing.T) {
	t.Parallel()
	const password = "s3cret-pw"
	silent := silentServer(t)
	cases := []struct {
		name, url, dialect, host string
	}{
		{"postgres refusing", "postgres://app:" + password + "@127.0.0.1:1/app?sslmode=disable", "postgres", "127.0.0.1:1"},
		{"mysql refusing", "mysql://app:" + password + "@127.0.0.1:1/app", "mysql", "127.0.0.1:1"},
		{"postgres silent", "postgres://app:" + password + "@" + silent + "/app?sslmode=disable", "postgres", silent},
		{"mysql silent", "mysql://app:" + password + "@" + silent + "/app", "mysql", silent},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			db, err := gormdb.Open(context.Background(), tc.url, gormdb.Options{})
			elapsed := time.Since(start)

			require.Error(t, err)
			assert.Nil(t, db)
			assert.Less(t, elapsed, 3*time.Second)
			assert.ErrorIs(t, err, ports.ErrUnavailable)
			assert.Contains(t, err.Error(), tc.dialect)
			assert.Contains(t, err.Error(), tc.host)
			assert.NotContains(t, err.Error(), password)
		})
	}
}

// TestSQLTxTimeout_BoundsRowLockWait: a transaction waiting for a row lock held elsewhere gives
// up when its TxTimeout passes, with ports.ErrUnavailable, instead of hanging.
func TestSQLTxTimeout_BoundsRowLockWait(t *testing.T) {
	const txTimeout = 300 * time.Millisecond
	for _, server := range sqlServers {
		t.Run(server.name, func(t *testing.T) {
			t.Parallel()
			database := server.fresh(t)
			holder := sqlCrewStore(openSQL(t, database, gormdb.Options{TxTimeout: contractTxTimeout}))
			waiter := sqlCrewStore(openSQL(t, database, gormdb.Options{TxTimeout: txTimeout}))
			c := createCrew(t, holder, 5)

			locked, release := make(chan struct{}), make(chan struct{})
			holderDone := make(chan error, 1)
			go func() {
				holderDone <- holder.tx.InTx(context.Background(), func(ctx context.Context) error {
					if _, err := holder.crews.GetForUpdate(ctx, c.ID()); err != nil {
						return err
					}
					close(locked)
					<-release
					return nil
				})
			}()
			select {
			case <-locked:
			case err := <-holderDone:
				t.Fatalf("holder could not lock the crew: %v", err)
			}

			start := time.Now()
			err := waiter.tx.InTx(context.Background(), func(ctx context.Context) error {
				_, err := waiter.crews.GetForUpdate(ctx, c.ID())
				return err
			})
			elapsed := time.Since(start)
			close(release)

			require.ErrorIs(t, err, ports.ErrUnavailable)
			assert.GreaterOrEqual(t, elapsed, txTimeout)
			assert.Less(t, elapsed, txTimeout+2*time.Second)
			require.NoError(t, <-holderDone, "the holder's transaction is unaffected")
		})
	}
}

// TestSQLTxTimeout_OverrunCommitIsUnavailable: a transaction still running when TxTimeout
// passes is rolled back, and InTx reports ports.ErrUnavailable rather than success.
func TestSQLTxTimeout_OverrunCommitIsUnavailable(t *testing.T) {
	const txTimeout = 200 * time.Millisecond
	for _, server := range sqlServers {
		t.Run(server.name, func(t *testing.T) {
			t.Parallel()
			s := sqlCrewStore(openSQL(t, server.fresh(t), gormdb.Options{TxTimeout: txTimeout}))
			c, err := crew.New(newCrewID(), "overran", 5, now())
			require.NoError(t, err)

			err = s.tx.InTx(context.Background(), func(ctx context.Context) error {
				require.NoError(t, s.crews.Create(ctx, c))
				<-ctx.Done() // TxTimeout passes while fn still runs
				return nil
			})

			require.ErrorIs(t, err, ports.ErrUnavailable)
			_, err = s.crews.Get(context.Background(), c.ID())
			assert.ErrorIs(t, err, crew.ErrNotFound)
		})
	}
}
