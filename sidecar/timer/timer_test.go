package timer_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
	"github.com/ordertimeout/ordertimeout/sidecar/timer"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestCreateOrderWritesTimer checks that the timer row create_order writes
// has kind and queue Name.
func TestCreateOrderWritesTimer(t *testing.T) {
	t.Parallel()
	db := pgtest.NewPool(t)
	ctx := context.Background()
	_, err := db.Exec(ctx, `SELECT ordertimeout.put_stock('A', 5)`)
	require.NoError(t, err)
	_, err = db.Exec(ctx, `SELECT ordertimeout.create_order('T1', '[{"sku":"A","qty":1}]', interval '1 hour')`)
	require.NoError(t, err)

	var kind, queue string
	require.NoError(t, db.QueryRow(ctx, `
		SELECT kind, queue FROM public.river_job WHERE args ->> 'order_id' = 'T1'`).Scan(&kind, &queue))
	require.Equal(t, timer.Name, kind)
	require.Equal(t, timer.Name, queue)
}
