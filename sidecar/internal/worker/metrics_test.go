package worker

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// A job's outcome is counted by kind; a bad answer and a resolved conflict
// also on their own; reconciliation's outcomes feed the lost-callback,
// mismatch and reported counters.
func TestMetricsCountOutcomes(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	m, err := NewMetrics(reg)
	require.NoError(t, err)
	_, err = NewMetrics(reg)
	require.Error(t, err, "a second registration on one registry is refused")

	resolve := (ResolveConflictArgs{}).Kind()
	precancel := (PrecancelCheckArgs{}).Kind()
	m.Outcome(resolve, "reinstated")
	m.Outcome(resolve, "reinstated")
	m.Outcome(resolve, "snoozed")
	m.Outcome(resolve, "bad_answer")
	m.Outcome(resolve, "throttled")
	m.Outcome(resolve, "paused")
	m.Outcome(resolve, "bad_request")
	m.Outcome(resolve, "disputed")
	m.Outcome(precancel, "bad_answer")
	m.Outcome(precancel, "cancelled")
	require.Equal(t, 2.0, testutil.ToFloat64(m.jobs.WithLabelValues(resolve, "reinstated")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.jobs.WithLabelValues(precancel, "cancelled")))
	require.Equal(t, 2.0, testutil.ToFloat64(m.conflictsResolved.WithLabelValues("reinstated")))
	require.Equal(t, 1, testutil.CollectAndCount(m.conflictsResolved), "snoozed, throttled, paused, bad_answer, bad_request and disputed resolve nothing")
	require.Equal(t, 2.0, testutil.ToFloat64(m.badAnswers.WithLabelValues(resolve)), "a request not sent counts too")
	require.Equal(t, 1.0, testutil.ToFloat64(m.badAnswers.WithLabelValues(precancel)))

	for _, outcome := range []string{"ok", "confirmed", "amount_differs", "unknown_order"} {
		m.Reconciled(outcome)
	}
	require.Equal(t, 4, testutil.CollectAndCount(m.reconciled))
	require.Equal(t, 1.0, testutil.ToFloat64(m.lostCallbacks))
	require.Equal(t, 1.0, testutil.ToFloat64(m.mismatches))
	require.Equal(t, 2, testutil.CollectAndCount(m.reported))
	require.Equal(t, 1.0, testutil.ToFloat64(m.reported.WithLabelValues("unknown_order")))

	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	require.Empty(t, problems)
}
