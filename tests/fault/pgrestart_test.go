package fault

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/sidecarproc"
	"github.com/ordertimeout/ordertimeout/tests/internal/pgcluster"
	"github.com/ordertimeout/ordertimeout/tests/internal/soak"
)

// PostgreSQL restarted under load, first with shutdown mode fast, then
// immediate (a crash), while one sidecar runs: the sidecar is never
// restarted (one process from start to end, and it exits 0 on SIGTERM
// afterwards), the overdue backlog clears after each restart, orders created
// after the restarts are worked too, and in the end nothing is lost, nothing
// done twice, every invariant holds. The run is a short soak (package soak)
// with those two faults only, on a private cluster (package pgcluster).
func TestPostgresRestart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("restarts PostgreSQL: not in -short mode")
	}
	progress := &sidecarproc.Buffer{}
	rep, err := soak.Run(t.Context(), soak.Config{
		Bin:          binary(t),
		Duration:     16 * time.Second,
		Rate:         50,
		Sidecars:     1,
		Faults:       []soak.Kind{soak.RestartFast, soak.RestartImmediate},
		Sequence:     true,
		FaultEvery:   4 * time.Second,
		CheckEvery:   3 * time.Second,
		DrainTimeout: 2 * time.Minute,
		Progress:     progress,
	})
	if errors.Is(err, pgcluster.ErrUnsupported) {
		t.Skipf("needs a private PostgreSQL cluster: %v", err)
	}
	require.NoError(t, err)
	rep.Print(progress)
	t.Log("\n" + progress.String())

	require.Len(t, rep.Restarts, 2)
	for _, f := range rep.Restarts {
		require.True(t, f.Recovered, "%s: the backlog must clear", f.Kind)
	}
	last := rep.Restarts[len(rep.Restarts)-1]
	require.Greater(t, rep.Created, last.CreatedAfter, "orders must be created and worked after the last restart")
	require.Len(t, rep.PIDs["s1"], 1, "the sidecar must never be restarted")
	require.Empty(t, rep.UnexpectedExits)
	require.Empty(t, rep.StopErrors, "the sidecar must still run and exit 0 on SIGTERM")
	require.Positive(t, rep.ChecksDuring, "invariants checked while the run went on")
	require.Zero(t, rep.Violations())
}
