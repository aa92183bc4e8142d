package dbclock_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/dbclock"
	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// shifted is a real PostgreSQL whose clock_timestamp() answers by later
// than its clock: as seen from this host, a database clock ahead by "by" is
// the same as this host's clock behind by it.
type shifted struct {
	db *pgxpool.Pool
	by string
}

func (s shifted) QueryRow(ctx context.Context, _ string, _ ...any) pgx.Row {
	return s.db.QueryRow(ctx, "SELECT clock_timestamp() + $1::interval", s.by)
}

func TestMeasureFollowsTheDatabase(t *testing.T) {
	t.Parallel()
	db := pgtest.NewPool(t)
	ctx := t.Context()
	for _, tc := range []struct {
		by   string
		want time.Duration
	}{
		{"0", 0},
		{"10 minutes", 10 * time.Minute},
		{"-10 minutes", -10 * time.Minute},
	} {
		t.Run(tc.by, func(t *testing.T) {
			c := &dbclock.Clock{}
			_, measured := c.Offset()
			require.False(t, measured, "a new clock is not measured")
			offset, err := c.Measure(ctx, shifted{db, tc.by})
			require.NoError(t, err)
			// Host and database share a clock here: only the round trip separates them.
			require.InDelta(t, tc.want.Seconds(), offset.Seconds(), 0.5, "the offset is the database's lead")
			got, measured := c.Offset()
			require.True(t, measured)
			require.Equal(t, offset, got)
			require.Less(t, c.Uncertainty(), 500*time.Millisecond)

			var dbNow time.Time
			require.NoError(t, shifted{db, tc.by}.QueryRow(ctx, "").Scan(&dbNow))
			require.InDelta(t, 0, c.Now().Sub(dbNow).Seconds(), 0.5, "Now is the database's time")
			require.Contains(t, c.Now().String(), "m=", "Now keeps the monotonic reading")
			require.Nil(t, c.NowOrNil(), "River's queries use the database's now()")
		})
	}
}

func TestMeasureFailureKeepsTheLastOffset(t *testing.T) {
	t.Parallel()
	db := pgtest.NewPool(t)
	c := &dbclock.Clock{}
	offset, err := c.Measure(t.Context(), shifted{db, "1 hour"})
	require.NoError(t, err)

	closed, err := pgxpool.New(t.Context(), pgtest.URL(t, db))
	require.NoError(t, err)
	closed.Close()
	_, err = c.Measure(t.Context(), closed)
	require.ErrorContains(t, err, "read the database's clock")
	got, measured := c.Offset()
	require.True(t, measured)
	require.Equal(t, offset, got, "a failed measurement keeps the offset in use")
}

func TestRunMeasuresUntilCancelled(t *testing.T) {
	t.Parallel()
	db := pgtest.NewPool(t)
	c := &dbclock.Clock{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx, shifted{db, "5 seconds"}, 10*time.Millisecond, nil)
	}()
	require.Eventually(t, func() bool { _, m := c.Offset(); return m }, 10*time.Second, 10*time.Millisecond)
	cancel()
	<-done
	o, _ := c.Offset()
	require.InDelta(t, 5, o.Seconds(), 0.5)
}
