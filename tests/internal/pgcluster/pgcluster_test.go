package pgcluster_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/tests/internal/pgcluster"
)

// A cluster starts, keeps its port across fast and immediate restarts, keeps
// every acknowledged commit through an immediate restart (a crash), and
// reports the cut connection as Unavailable.
func TestRestart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts PostgreSQL: not in -short mode")
	}
	ctx := t.Context()
	c := pgcluster.New(t, pgcluster.Options{})
	port := c.Port()

	conn, err := pgx.Connect(ctx, c.URL())
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE TABLE t (n int)")
	require.NoError(t, err)

	for i, mode := range []pgcluster.Mode{pgcluster.Fast, pgcluster.Immediate} {
		_, err = conn.Exec(ctx, "INSERT INTO t VALUES ($1)", i)
		require.NoError(t, err)
		require.NoError(t, c.Restart(ctx, mode))
		require.Equal(t, port, c.Port())

		_, err = conn.Exec(ctx, "SELECT 1")
		require.Error(t, err, "the old connection is gone after a %s restart", mode)
		require.True(t, pgcluster.Unavailable(err), "%s restart: %v", mode, err)
		conn.Close(context.Background())

		conn, err = pgx.Connect(ctx, c.URL())
		require.NoError(t, err)
		var n int
		require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n))
		require.Equal(t, i+1, n, "every acknowledged commit survives a %s restart", mode)
	}
	conn.Close(ctx)

	require.NoError(t, c.Stop(ctx, pgcluster.Fast))
	_, err = pgx.Connect(ctx, c.URL())
	require.True(t, pgcluster.Unavailable(err), "a stopped cluster refuses connections: %v", err)
	require.NoError(t, c.Start(ctx))
	require.NoError(t, c.Close())
	require.NoDirExists(t, c.Dir())
}
