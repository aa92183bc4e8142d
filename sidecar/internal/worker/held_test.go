package worker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/worker"
	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
)

// byPayment answers Order as a driver that reads payments by their ids
// (Stripe): for the payment ref names when it names one, else for the
// order (its last payment).
type byPayment struct {
	gateway.Gateway
	answers map[string]gateway.Order // by payment id; "" for the order
	err     error
	asked   [][]string
	byID    bool // says it answers about the payment asked about (Stripe)
}

func (g *byPayment) AnswersByPayment() bool { return g.byID }

func (g *byPayment) Order(_ context.Context, ref gateway.Ref) (gateway.Order, error) {
	g.asked = append(g.asked, slices.Clone(ref.PaymentIDs))
	if g.err != nil {
		return gateway.Order{}, g.err
	}
	if len(ref.PaymentIDs) == 1 {
		if o, ok := g.answers[ref.PaymentIDs[0]]; ok {
			return o, nil
		}
	}
	return g.answers[""], nil
}

// CheckHeld before a reinstatement, answer by answer. A review found a
// buyer's two late payments, the first refunded in full at Stripe: the
// check asked about the order, Stripe's driver answered with the second
// payment (paid), and the first was reinstated; the second was then
// refunded, and the order stayed PAID for no money. It asks about the
// conflict's payment alone now, and an answer for another payment is no
// confirmation. Pending is asked again later; an unusable answer or a
// refused request is an error, never a confirmation.
func TestCheckHeld(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewPool(t)
	sidecartest.Setup(t, db)
	sidecartest.CreateOrder(t, db, "H1", time.Hour, `{"amount": 12.50, "currency": "EUR"}`)
	sidecartest.Exec(t, db, "SELECT ordertimeout.cancel_order('H1')")
	sidecartest.Exec(t, db, "SELECT ordertimeout.confirm_payment('H1', 'pi_d1', 12.50, 'EUR')")
	sidecartest.Exec(t, db, "SELECT ordertimeout.confirm_payment('H1', 'pi_d2', 12.50, 'EUR')")
	id := sidecartest.Int(t, db, "SELECT conflict_id FROM ordertimeout.conflicts WHERE payment_id = 'pi_d1'")
	paid := func(p, amount, currency string) gateway.Order {
		return gateway.Order{OrderID: "H1", Status: gateway.StatusPaid, PaymentID: p, Amount: gateway.Amount(amount), Currency: gateway.Currency(currency)}
	}
	for _, tc := range []struct {
		name    string
		byID    bool
		answers map[string]gateway.Order
		err     error
		want    error // nil: held
	}{
		{name: "held", answers: map[string]gateway.Order{"pi_d1": paid("pi_d1", "12.5", "EUR")}},
		{name: "refunded in full, the other payment paid (Stripe)", byID: true, answers: map[string]gateway.Order{
			"pi_d1": {OrderID: "H1", Status: gateway.StatusFailed}, "": paid("pi_d2", "12.50", "EUR")}, want: worker.ErrNotHeld},
		{name: "the order's payment failed, of two (JSON contract: which one?)", answers: map[string]gateway.Order{
			"": {OrderID: "H1", Status: gateway.StatusFailed}}, want: worker.ErrCannotTell},
		{name: "none for the order (JSON contract): unknown", answers: map[string]gateway.Order{"": {OrderID: "H1", Status: gateway.StatusNone}}},
		{name: "none for the payment asked about by id (Stripe: another account?)", byID: true,
			answers: map[string]gateway.Order{"pi_d1": {OrderID: "H1", Status: gateway.StatusNone}}, want: worker.ErrCannotTell},
		{name: "refunded in part", answers: map[string]gateway.Order{"pi_d1": paid("pi_d1", "2.50", "EUR")}, want: worker.ErrNotHeld},
		{name: "another currency", answers: map[string]gateway.Order{"pi_d1": paid("pi_d1", "12.50", "USD")}, want: worker.ErrOtherCurrency},
		{name: "the order's answer names another payment", answers: map[string]gateway.Order{"": paid("pi_d2", "12.50", "EUR")}, want: worker.ErrCannotTell},
		{name: "pending", answers: map[string]gateway.Order{"pi_d1": {OrderID: "H1", Status: gateway.StatusPending}}, want: worker.ErrCannotTell},
		{name: "a refused request, counted as a bad answer", err: fmt.Errorf("401 api_key_expired: %w", gateway.ErrBadRequest), want: gateway.ErrBadAnswer},
		{name: "an unusable answer", err: fmt.Errorf("404: %w", gateway.ErrBadAnswer), want: worker.ErrCannotTell},
		{name: "unavailable", err: gateway.ErrUnavailable, want: gateway.ErrUnavailable},
	} {
		g := &byPayment{answers: tc.answers, err: tc.err, byID: tc.byID}
		err := worker.CheckHeld(ctx, g, db, id)
		if tc.want == nil {
			require.NoError(t, err, tc.name)
		} else {
			require.True(t, errors.Is(err, tc.want), "%s: %v", tc.name, err)
		}
		require.Equal(t, [][]string{{"pi_d1"}}, g.asked, "%s: asked about the conflict's payment alone", tc.name)
	}

	// The other payment reinstated, the order is PAID: this one cannot be
	// reinstated (OT132), and the gateway is not asked.
	sidecartest.Exec(t, db, "SELECT ordertimeout.resolve_conflict(conflict_id, 'reinstate') FROM ordertimeout.conflicts WHERE payment_id = 'pi_d2'")
	g := &byPayment{err: gateway.ErrUnavailable}
	require.NoError(t, worker.CheckHeld(ctx, g, db, id))
	require.Empty(t, g.asked, "not asked about a conflict whose order is PAID")
}

// A gateway that does not tell whether it holds the late payment (here an
// answer that cannot be used: a 404 for a record expired there, an expired
// key) is asked again, HeldAsks times, then the conflict is left open for a
// person (outcome unconfirmed): nothing is reinstated without the gateway's
// word, and the wait ends. A review found it asked for ever.
func TestResolveLeavesForAPersonWhatTheGatewayDoesNotTell(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewPool(t)
	sidecartest.Setup(t, db)
	sidecartest.CreateOrder(t, db, "U1", time.Hour, `{"amount": 10, "currency": "EUR"}`)
	sidecartest.Exec(t, db, "SELECT ordertimeout.cancel_order('U1')")
	sidecartest.Exec(t, db, "SELECT ordertimeout.confirm_payment('U1', 'PU1', 10, 'EUR')")
	id := sidecartest.Int(t, db, "SELECT conflict_id FROM ordertimeout.conflicts WHERE payment_id = 'PU1'")
	outcomes := map[string]int{}
	w := &worker.ResolveConflictWorker{Deps: &worker.Deps{Pool: db, Logger: sidecartest.Logger(),
		Gateway: &byPayment{err: fmt.Errorf("HTTP 404: %w", gateway.ErrBadAnswer)},
		Outcome: func(_, o string) { outcomes[o]++ }}}
	job := func(snoozed, asked int) *river.Job[worker.ResolveConflictArgs] {
		return &river.Job[worker.ResolveConflictArgs]{
			JobRow: &rivertype.JobRow{ID: 1, Kind: "ordertimeout_resolve_conflict", Attempt: 1, MaxAttempts: 25,
				EncodedArgs: []byte(fmt.Sprintf(`{"conflict_id": %d}`, id)),
				Metadata:    []byte(fmt.Sprintf(`{"snoozes": %d, "ordertimeout_held_asks": %d}`, snoozed, asked))},
			Args: worker.ResolveConflictArgs{ConflictID: id}}
	}
	var snooze *river.JobSnoozeError
	require.ErrorAs(t, w.Work(ctx, job(0, 0)), &snooze, "asked again")
	require.ErrorAs(t, w.Work(ctx, job(20, 0)), &snooze, "snoozed often for other reasons (an outage): asked again")
	require.ErrorAs(t, w.Work(ctx, job(0, worker.HeldAsks-2)), &snooze, "asked again")
	require.Equal(t, 3, outcomes["bad_answer"], "counted as bad answers")
	require.NoError(t, w.Work(ctx, job(0, worker.HeldAsks-1)), "the last ask")
	require.Equal(t, 4, outcomes["bad_answer"], "the last one counted too")
	require.Equal(t, 1, outcomes["unconfirmed"])
	require.Equal(t, "CANCELLED", sidecartest.Status(t, db, "U1"), "not reinstated")
	require.EqualValues(t, 1, sidecartest.Int(t, db, "SELECT count(*) FROM ordertimeout.conflicts WHERE payment_id = 'PU1' AND state = 'open'"),
		"left open for a person")
}

// Two late payments of one order, the first refunded in full by a person at
// Stripe, the second reinstated: the first is neither reinstated nor
// refunded; it is handed to a person (resolution manual, the gateway's
// answer as its note). A review found it refunded once the
// order was PAID (the check was skipped for an order no longer cancelled):
// a refund Stripe refused (charge_already_refunded), the conflict stuck
// refunding, which a person can no longer resolve.
func TestResolveDoesNotRefundWhatTheGatewayNoLongerHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewPool(t)
	sidecartest.Setup(t, db)
	sidecartest.CreateOrder(t, db, "R2", time.Hour, `{"amount": 12.50, "currency": "EUR"}`)
	sidecartest.Exec(t, db, "SELECT ordertimeout.cancel_order('R2')")
	sidecartest.Exec(t, db, "SELECT ordertimeout.confirm_payment('R2', 'pi_a', 12.50, 'EUR')")
	sidecartest.Exec(t, db, "SELECT ordertimeout.confirm_payment('R2', 'pi_b', 12.50, 'EUR')")
	sidecartest.Exec(t, db, "SELECT ordertimeout.resolve_conflict(conflict_id, 'reinstate') FROM ordertimeout.conflicts WHERE payment_id = 'pi_b'")
	require.Equal(t, "PAID", sidecartest.Status(t, db, "R2"))
	id := sidecartest.Int(t, db, "SELECT conflict_id FROM ordertimeout.conflicts WHERE payment_id = 'pi_a'")

	outcomes := map[string]int{}
	// Its Refund is the embedded nil Gateway's: a call would panic.
	g := &byPayment{byID: true, answers: map[string]gateway.Order{"pi_a": {OrderID: "R2", Status: gateway.StatusFailed}}}
	w := &worker.ResolveConflictWorker{Deps: &worker.Deps{Pool: db, Logger: sidecartest.Logger(), Gateway: g,
		Outcome: func(_, o string) { outcomes[o]++ }}}
	job := &river.Job[worker.ResolveConflictArgs]{
		JobRow: &rivertype.JobRow{ID: 1, Kind: "ordertimeout_resolve_conflict", Attempt: 1, MaxAttempts: 25,
			EncodedArgs: []byte(fmt.Sprintf(`{"conflict_id": %d}`, id)), Metadata: []byte(`{}`)},
		Args: worker.ResolveConflictArgs{ConflictID: id}}
	require.NoError(t, w.Work(ctx, job))
	require.Equal(t, map[string]int{"not_held": 1}, outcomes)
	require.EqualValues(t, 1, sidecartest.Int(t, db, `SELECT count(*) FROM ordertimeout.conflicts
		WHERE payment_id = 'pi_a' AND resolution = 'manual' AND note LIKE 'sidecar: not reinstated nor refunded: %'`),
		"handed to a person, not claimed for a refund")
}
