package rescue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/rescue"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// A job left running by a dead worker is handed back by Run once it has run
// longer than After by the database's clock; a younger one is not.
func TestRunRescuesStuckJobs(t *testing.T) {
	t.Parallel()
	db := pgtest.NewPool(t)
	sidecartest.Setup(t, db)
	sidecartest.Exec(t, db, `
		INSERT INTO river_job (kind, args, queue, state, attempt, attempted_at, metadata)
		VALUES ('ordertimeout_webhook', '{"n": 1}', 'ordertimeout', 'running', 1, clock_timestamp() - interval '1 hour', '{}'),
		       ('ordertimeout_webhook', '{"n": 2}', 'ordertimeout', 'running', 1, clock_timestamp(), '{}')`)

	r := &rescue.Rescuer{Pool: db, After: 30 * time.Second, Interval: 20 * time.Millisecond, Logger: sidecartest.Logger()}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	sidecartest.Eventually(t, 10*time.Second, "the old job rescued", func() (bool, error) {
		return sidecartest.Int(t, db, `SELECT count(*) FROM river_job WHERE args->>'n' = '1' AND state = 'available'`) == 1, nil
	})
	cancel()
	require.NoError(t, <-done)
	require.EqualValues(t, 1, r.Rescued())
	require.EqualValues(t, 1, sidecartest.Int(t, db, `SELECT count(*) FROM river_job WHERE args->>'n' = '2' AND state = 'running'`),
		"a job running for less than After stays with its worker")

	res, err := r.RescueOnce(t.Context())
	require.NoError(t, err)
	require.Zero(t, res.Total(), "nothing more to rescue")
}

func TestRescueOnceRefusesBadAfter(t *testing.T) {
	t.Parallel()
	db := pgtest.NewPool(t)
	sidecartest.Setup(t, db)
	r := &rescue.Rescuer{Pool: db, After: 10 * time.Millisecond}
	_, err := r.RescueOnce(t.Context())
	require.ErrorContains(t, err, "running_for must be between 1 second and 1 day")
}
