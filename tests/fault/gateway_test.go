package fault

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/sidecarproc"
	"github.com/ordertimeout/ordertimeout/tests/internal/outcome"
)

// The gateway misbehaves in three ways, one after the other: down (503),
// slow (answers after the sidecar's gateway timeout), and answering garbage
// (HTTP 200 with malformed JSON, an unknown status, or "paid" without a
// payment id). Each time a due order waits for its precancel check and a
// PAYING order for its payment check. While the gateway misbehaves nothing
// changes: the first stays PENDING (awaiting its check), the second PAYING.
// Down and slow are "unavailable": the checks snooze (no attempt used up, no
// job error) and the gateway calls count as unavailable in /metrics, with a
// warning in the log. Garbage is a bad answer: the checks snooze too, an
// error line names the order and what was wrong, and
// ordertimeout_gateway_bad_answers_total counts it. Once the gateway behaves,
// the unpaid order is cancelled exactly once and the paid one ends PAID.
func TestGatewayMisbehaves(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	ctx := t.Context()
	s := e.startSidecar("g1", "--gateway-timeout", "500ms", "--gateway-retries", "1")

	checkJob := func(kind, orderID string) (state string, attempt, snoozes, errs int, lastErr string) {
		t.Helper()
		err := e.db.QueryRow(ctx, `
			SELECT state::text, attempt, coalesce((metadata->>'snoozes')::int, 0),
			       coalesce(array_length(errors, 1), 0), coalesce(errors[array_length(errors, 1)]->>'error', '')
			FROM river_job WHERE kind = $1 AND args->>'order_id' = $2
			ORDER BY id DESC LIMIT 1`, kind, orderID).Scan(&state, &attempt, &snoozes, &errs, &lastErr)
		if errors.Is(err, pgx.ErrNoRows) {
			return "", 0, 0, 0, "" // not inserted yet
		}
		require.NoError(t, err)
		return
	}
	const precancel, payment = "ordertimeout_precancel_check", "ordertimeout_payment_check"

	// begin places a due order that needs a precancel check (nobody paid)
	// and a PAYING order whose payment went through at the gateway without
	// a callback (silent).
	begin := func(phase string) (unpaidID, paidID string) {
		unpaidID, paidID = phase+"-unpaid", phase+"-paid"
		e.createOrder(unpaidID, 300*time.Millisecond, `{"precheck": "always"}`)
		e.createOrder(paidID, time.Hour, "")
		e.beginPayment(paidID, paidID+"-p", 300*time.Millisecond)
		require.NoError(t, e.fake.SetOrder(ctx, paidID, sidecarproc.Behaviour{Behaviour: sidecarproc.Silent, PaymentID: paidID + "-p"}))
		return unpaidID, paidID
	}
	unchanged := func(unpaidID, paidID string) {
		t.Helper()
		require.Equal(t, "PENDING", e.status(unpaidID))
		require.EqualValues(t, 1, e.count("SELECT count(*) FROM ordertimeout.orders WHERE order_id = $1 AND check_job_id IS NOT NULL", unpaidID),
			"the unpaid order waits for its check")
		require.Equal(t, "PAYING", e.status(paidID))
	}
	recovered := func(unpaidID, paidID string) {
		t.Helper()
		e.waitStatus(unpaidID, "CANCELLED", 30*time.Second)
		e.waitStatus(paidID, "PAID", 30*time.Second)
	}

	for _, phase := range []struct {
		name      string
		behaviour string
		delay     time.Duration
	}{
		{"down", sidecarproc.Down, 0},
		{"slow", sidecarproc.Slow, 2 * time.Second},
	} {
		unavailable := s.metrics(t).Sum("ordertimeout_gateway_calls_total", "op", "order", "result", "unavailable")
		require.NoError(t, e.fake.SetGateway(ctx, phase.behaviour, phase.delay))
		unpaidID, paidID := begin(phase.name)
		eventually(t, 30*time.Second, phase.name+": both checks snoozed twice", func() bool {
			_, _, a, _, _ := checkJob(precancel, unpaidID)
			_, _, b, _, _ := checkJob(payment, paidID)
			return a >= 2 && b >= 2
		})
		unchanged(unpaidID, paidID)
		for _, kind := range []string{precancel, payment} {
			id := map[string]string{precancel: unpaidID, payment: paidID}[kind]
			_, attempt, _, errs, _ := checkJob(kind, id)
			require.Zero(t, errs, "%s %s: a snooze records no error", phase.name, kind)
			require.LessOrEqual(t, attempt, 1, "%s %s: a snooze uses up no attempt", phase.name, kind)
		}
		require.Greater(t, s.metrics(t).Sum("ordertimeout_gateway_calls_total", "op", "order", "result", "unavailable"), unavailable)
		require.Contains(t, s.out.String(), "gateway unavailable, asking again later")

		require.NoError(t, e.fake.SetGateway(ctx, sidecarproc.Normal, 0))
		recovered(unpaidID, paidID)
	}

	// Garbage: each answer is a bad answer, and the check snoozes. The
	// gateway is fixed as soon as the first snooze is recorded: the next try
	// comes about a second later.
	for i, garbage := range []struct{ body, want string }{
		{`{"order_id": "x", "status": "pa`, "malformed JSON answer"},
		{`{"status": "maybe"}`, `unknown status "maybe"`},
		{`{"status": "paid"}`, "status paid without payment_id"},
	} {
		phase := []string{"garbled", "unknown", "nopayment"}[i]
		unpaidID, paidID := phase+"-unpaid", phase+"-paid"
		e.gw.setGarbage(unpaidID, garbage.body)
		e.gw.setGarbage(paidID, garbage.body)
		begin(phase)
		eventually(t, 30*time.Second, phase+": a snooze on both checks", func() bool {
			_, _, a, _, _ := checkJob(precancel, unpaidID)
			_, _, b, _, _ := checkJob(payment, paidID)
			return a >= 1 && b >= 1
		})
		unchanged(unpaidID, paidID)
		for _, kind := range []string{precancel, payment} {
			id := map[string]string{precancel: unpaidID, payment: paidID}[kind]
			state, attempt, _, errs, _ := checkJob(kind, id)
			require.Contains(t, []string{"scheduled", "available", "running"}, state, "%s %s", phase, kind)
			require.Zero(t, errs, "%s %s: a snooze records no error", phase, kind)
			require.LessOrEqual(t, attempt, 1, "%s %s: a snooze uses up no attempt", phase, kind)
			require.Regexp(t, `level=ERROR msg="gateway gave a bad answer: nothing changed, asking again later".* kind=`+kind+` job_id=\d+ order_id=`+id+` .*`+
				regexp.QuoteMeta(strings.ReplaceAll(garbage.want, `"`, `\"`))+`.*payment gateway gave an unusable answer`, s.out.String(), "%s %s: the log says what was wrong", phase, kind)
			require.Positive(t, e.gw.garbageServed(id))
		}
		e.gw.setGarbage(unpaidID, "")
		e.gw.setGarbage(paidID, "")
		recovered(unpaidID, paidID)
	}
	require.Positive(t, s.metrics(t).Sum("ordertimeout_gateway_calls_total", "op", "order", "result", "bad_answer"))
	require.Positive(t, s.metrics(t).Sum("ordertimeout_gateway_bad_answers_total", "kind", precancel))
	require.Positive(t, s.metrics(t).Sum("ordertimeout_gateway_bad_answers_total", "kind", payment))

	var unpaid, paid []string
	for _, phase := range []string{"down", "slow", "garbled", "unknown", "nopayment"} {
		unpaid = append(unpaid, phase+"-unpaid")
		paid = append(paid, phase+"-paid")
	}
	e.check(0, outcome.Expect{Created: append(append([]string{}, unpaid...), paid...), Paid: paid, Cancelled: unpaid, Settled: true})
	require.Zero(t, e.count("SELECT count(*) FROM river_job WHERE state = 'discarded'"))
	require.False(t, strings.Contains(s.out.String(), "panic"))
}
