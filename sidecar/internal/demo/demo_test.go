package demo_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/demo"
	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
	"github.com/ordertimeout/ordertimeout/sidecar/sidecarproc"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestDemo runs the demo for 15 seconds against a fresh database with the
// real sidecar and fake gateway, and checks that every story happened and the
// invariants hold. Besides the demo's own verdicts it reads the key facts
// from the database itself.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("the demo takes 15 seconds")
	}
	pool := pgtest.NewPool(t)
	bin := buildSidecar(t)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	result, err := demo.Run(ctx, demo.Config{
		DatabaseURL: pgtest.URL(t, pool),
		SidecarBin:  bin,
		Duration:    15 * time.Second,
		LogDir:      t.TempDir(),
		Stdout:      &stdout,
		Stderr:      &stderr,
	})
	t.Log("stderr:\n" + stderr.String())
	t.Log("report:\n" + stdout.String())
	require.NoError(t, err)

	require.True(t, result.OK(), "invariants:\n%s", result.Invariants)
	require.True(t, result.Settled, "every order should end PAID or CANCELLED with no open conflict")
	require.Empty(t, result.Problems)
	for _, id := range []string{
		demo.StoryAbandoned, demo.StorySilent, demo.StoryDeclined,
		demo.StoryExtended, demo.StoryLate, demo.StoryLateSold, demo.StoryQR,
	} {
		story, found := result.Story(id)
		require.True(t, found, "story %s", id)
		require.True(t, story.OK, "story %s: %s", id, story.Outcome)
	}

	// The same facts, straight from the database.
	status := func(id string) (status, cause string) {
		t.Helper()
		require.NoError(t, pool.QueryRow(ctx,
			"SELECT status, coalesce(cancel_cause, '') FROM ordertimeout.order_info($1)", id).Scan(&status, &cause))
		return status, cause
	}
	conflict := func(id string) (kind, resolution string) {
		t.Helper()
		require.NoError(t, pool.QueryRow(ctx,
			"SELECT kind, coalesce(resolution, 'open') FROM ordertimeout.conflicts WHERE order_id = $1", id).Scan(&kind, &resolution))
		return kind, resolution
	}

	st, cause := status(demo.StoryAbandoned)
	require.Equal(t, "CANCELLED", st)
	require.Equal(t, "timeout", cause)

	st, _ = status(demo.StorySilent)
	require.Equal(t, "PAID", st, "the silent payment is found at the gateway")

	st, _ = status(demo.StoryLate)
	require.Equal(t, "PAID", st)
	kind, resolution := conflict(demo.StoryLate)
	require.Equal(t, "late_payment", kind)
	require.Equal(t, "reinstated", resolution)

	st, _ = status(demo.StoryLateSold)
	require.Equal(t, "CANCELLED", st)
	kind, resolution = conflict(demo.StoryLateSold)
	require.Equal(t, "late_payment", kind)
	require.Equal(t, "refunded", resolution)

	st, _ = status(demo.StoryQR)
	kind, resolution = conflict(demo.StoryQR)
	require.Equal(t, "late_payment", kind, "the QR payment is found by reconciliation")
	require.Contains(t, []string{"reinstated PAID", "refunded CANCELLED"}, resolution+" "+st)

	var paid, cancelled int
	require.NoError(t, pool.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE status = 'PAID'), count(*) FILTER (WHERE status = 'CANCELLED')
FROM ordertimeout.orders`).Scan(&paid, &cancelled))
	require.Positive(t, paid, "background orders are paid")
	require.Positive(t, cancelled, "background orders are cancelled")
}

// buildSidecar builds the ordertimeout and ordertimeout-fakegateway binaries
// into a temporary directory, or skips the test when they do not build.
func buildSidecar(t *testing.T) string {
	t.Helper()
	bin, err := sidecarproc.Build(t.Context(), t.TempDir())
	if err != nil {
		t.Skipf("the binaries do not build (yet): %v", err)
	}
	return bin
}
