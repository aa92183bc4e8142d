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
	byID    bool     // says it answers about the payment asked about (Stripe)
	refunds []string // the payment ids refunded
	amounts []gateway.Amount
	before  func() // runs in each Order call before it answers
}

func (g *byPayment) Refund(_ context.Context, req gateway.RefundRequest) (gateway.Refund, error) {
	g.refunds = append(g.refunds, req.PaymentID)
	g.amounts = append(g.amounts, req.Amount)
	return gateway.Refund{RefundID: "re_" + req.PaymentID, Status: gateway.RefundRefunded}, nil
}

func (g *byPayment) AnswersByPayment() bool { return g.byID }

func (g *byPayment) Order(_ context.Context, ref gateway.Ref) (gateway.Order, error) {
	g.asked = append(g.asked, slices.Clone(ref.PaymentIDs))
	if g.before != nil {
		g.before()
	}
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
		{name: "refunded in part", answers: map[string]gateway.Order{"pi_d1": paid("pi_d1", "2.50", "EUR")}, want: worker.ErrPartlyHeld},
		{name: "less, in a currency not named", answers: map[string]gateway.Order{"pi_d1": paid("pi_d1", "2.50", "")}, want: worker.ErrOtherAmount},
		{name: "another currency", answers: map[string]gateway.Order{"pi_d1": paid("pi_d1", "12.50", "USD")}, want: worker.ErrOtherCurrency},
		{name: "more than recorded here", answers: map[string]gateway.Order{"pi_d1": paid("pi_d1", "12.51", "EUR")}, want: worker.ErrOtherAmount},
		{name: "another currency and amount", answers: map[string]gateway.Order{"pi_d1": paid("pi_d1", "1250", "JPY")}, want: worker.ErrOtherAmount},
		{name: "another currency, no amount given", answers: map[string]gateway.Order{"pi_d1": paid("pi_d1", "", "USD")}, want: worker.ErrOtherAmount},
		{name: "the order's answer names another payment", answers: map[string]gateway.Order{"": paid("pi_d2", "12.50", "EUR")}, want: worker.ErrCannotTell},
		{name: "pending", answers: map[string]gateway.Order{"pi_d1": {OrderID: "H1", Status: gateway.StatusPending}}, want: worker.ErrCannotTell},
		{name: "a refused request, counted as a bad answer", err: fmt.Errorf("401 api_key_expired: %w", gateway.ErrBadRequest), want: gateway.ErrBadAnswer},
		{name: "an unusable answer", err: fmt.Errorf("404: %w", gateway.ErrBadAnswer), want: worker.ErrCannotTell},
		{name: "unavailable", err: gateway.ErrUnavailable, want: gateway.ErrUnavailable},
		{name: "under dispute", err: fmt.Errorf("dp_1 open: %w: %w", gateway.ErrDisputed, gateway.ErrUnavailable), want: gateway.ErrDisputed},
		{name: "taken back by a dispute lost", err: fmt.Errorf("dp_1 lost: %w", gateway.ErrChargedBack), want: worker.ErrPartlyHeld},
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
		return resolveJob(id, fmt.Sprintf(`{"snoozes": %d, "ordertimeout_held_asks": %d}`, snoozed, asked))
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
	require.EqualValues(t, 1, sidecartest.Int(t, db, `SELECT count(*) FROM ordertimeout.conflicts
		WHERE payment_id = 'PU1' AND state = 'open' AND handed_over_why LIKE 'sidecar: not reinstated nor refunded: asked 10 times: %HTTP 404%'`),
		"left open, handed to a person with the reason")
	// The rescan no longer queues it (before, every --conflict-rescan
	// queued it again and the gateway was asked 10 more times), and a job
	// woken for it anyway leaves it alone without asking.
	require.EqualValues(t, 0, sidecartest.Int(t, db, "SELECT count(*) FROM ordertimeout.conflicts_to_resolve()"))
	asked := len(w.Gateway.(*byPayment).asked)
	require.NoError(t, w.Work(ctx, job(0, 0)))
	require.Len(t, w.Gateway.(*byPayment).asked, asked, "not asked again")
	require.Equal(t, 1, outcomes["manual_pending"])
	require.Equal(t, "CANCELLED", sidecartest.Status(t, db, "U1"))

	// A person's claim of its refund brings it back to the sidecar, which
	// refunds it.
	sidecartest.Exec(t, db, "SELECT ordertimeout.resolve_conflict($1, 'refund', 'checked at the bank')", id)
	require.EqualValues(t, 1, sidecartest.Int(t, db, "SELECT count(*) FROM ordertimeout.conflicts_to_resolve()"))
	require.NoError(t, w.Work(ctx, job(0, 0)))
	require.Equal(t, []string{"PU1"}, w.Gateway.(*byPayment).refunds)
	require.EqualValues(t, 1, sidecartest.Int(t, db, "SELECT count(*) FROM ordertimeout.conflicts WHERE payment_id = 'PU1' AND resolution = 'refunded'"))
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
	g := &byPayment{byID: true, answers: map[string]gateway.Order{"pi_a": {OrderID: "R2", Status: gateway.StatusFailed}}}
	w := &worker.ResolveConflictWorker{Deps: &worker.Deps{Pool: db, Logger: sidecartest.Logger(), Gateway: g,
		Outcome: func(_, o string) { outcomes[o]++ }}}
	job := resolveJob(id, `{}`)
	require.NoError(t, w.Work(ctx, job))
	require.Equal(t, map[string]int{"not_held": 1}, outcomes)
	require.Empty(t, g.refunds)
	require.EqualValues(t, 1, sidecartest.Int(t, db, `SELECT count(*) FROM ordertimeout.conflicts
		WHERE payment_id = 'pi_a' AND resolution = 'manual' AND note LIKE 'sidecar: not reinstated nor refunded: %'`),
		"handed to a person, not claimed for a refund")
}

// The refund policy asks the gateway before it claims a refund. A review
// found a late payment a person had refunded at the gateway claimed for a
// refund the gateway then refused for ever (the conflict stuck refunding),
// and a payment held in another currency claimed for a refund of the
// amount recorded here, which the driver refuses as not the payment's. The
// first is handed to a person (resolution manual, not_held); the second is
// left open for a person (handed over, other_amount). A payment the
// gateway holds is refunded, and so is one it does not tell about (the
// JSON contract names the order's first payment for a double payment).
func TestRefundPolicyAsksTheGatewayFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewPool(t)
	sidecartest.Setup(t, db)
	sidecartest.Exec(t, db, "SELECT ordertimeout.configure(late_payment => 'refund')")
	for _, o := range []string{"F1", "F2", "F3", "F4", "F5"} {
		sidecartest.CreateOrder(t, db, o, time.Hour, `{"amount": 1000, "currency": "JPY"}`)
	}
	sidecartest.Exec(t, db, "SELECT ordertimeout.cancel_order(o) FROM unnest(ARRAY['F1', 'F2', 'F3', 'F4']) AS o")
	sidecartest.Exec(t, db, "SELECT ordertimeout.confirm_payment(o, 'p_' || o, 1000, 'JPY') FROM unnest(ARRAY['F1', 'F2', 'F3', 'F4', 'F5']) AS o")
	sidecartest.Exec(t, db, "SELECT ordertimeout.confirm_payment('F5', 'p_F5b', 1000, 'JPY')")
	g := &byPayment{answers: map[string]gateway.Order{
		// F1: refunded in full there by a person.
		"p_F1": {OrderID: "F1", PaymentID: "p_F1", Status: gateway.StatusFailed},
		// F2: held in dollars, 10.00 of them: not 1000 of anything.
		"p_F2": {OrderID: "F2", PaymentID: "p_F2", Status: gateway.StatusPaid, Amount: "10.00", Currency: "USD"},
		// F3: held in dollars, 1000 of them: the refund names the whole payment.
		"p_F3": {OrderID: "F3", PaymentID: "p_F3", Status: gateway.StatusPaid, Amount: "1000.00", Currency: "USD"},
		// F4: held as confirmed.
		"p_F4": {OrderID: "F4", PaymentID: "p_F4", Status: gateway.StatusPaid, Amount: "1000", Currency: "JPY"},
		// F5's second payment: the JSON contract answers with the first.
		"p_F5b": {OrderID: "F5", PaymentID: "p_F5", Status: gateway.StatusPaid, Amount: "1000", Currency: "JPY"},
	}}
	outcomes := map[string]int{}
	w := &worker.ResolveConflictWorker{Deps: &worker.Deps{Pool: db, Logger: sidecartest.Logger(), Gateway: g,
		Outcome: func(_, o string) { outcomes[o]++ }}}
	for _, p := range []string{"p_F1", "p_F2", "p_F3", "p_F4", "p_F5b"} {
		id := sidecartest.Int(t, db, "SELECT conflict_id FROM ordertimeout.conflicts WHERE payment_id = $1", p)
		job := resolveJob(id, `{}`)
		require.NoError(t, w.Work(ctx, job), p)
	}
	require.Equal(t, []string{"p_F3", "p_F4", "p_F5b"}, g.refunds, "refunded: held, or not told about")
	require.Equal(t, map[string]int{"not_held": 1, "other_amount": 1, "refunded": 3}, outcomes)
	rows, err := db.Query(ctx, `SELECT payment_id, state, coalesce(resolution, ''), coalesce(note, handed_over_why, '')
		FROM ordertimeout.conflicts ORDER BY payment_id`)
	require.NoError(t, err)
	type row struct{ payment, state, resolution, why string }
	var got []row
	for rows.Next() {
		var r row
		require.NoError(t, rows.Scan(&r.payment, &r.state, &r.resolution, &r.why))
		got = append(got, r)
	}
	require.NoError(t, rows.Err())
	require.Len(t, got, 5)
	require.Equal(t, row{"p_F1", "resolved", "manual", got[0].why}, got[0])
	require.Contains(t, got[0].why, "failed (refunded in full there?)")
	require.Equal(t, row{"p_F2", "open", "", got[1].why}, got[1], "handed over, not claimed")
	require.Contains(t, got[1].why, `payment "p_F2" is 10.00 USD at the gateway, 1000 JPY here: a refund of 1000 would not be this payment`)
	for _, r := range got[2:] {
		require.Equal(t, "refunded", r.resolution, r.payment)
	}
	require.EqualValues(t, 0, sidecartest.Int(t, db, "SELECT count(*) FROM ordertimeout.conflicts_to_resolve()"),
		"nothing left for the sidecar")
}

// A review found a refund claimed on an answer about another amount: the
// conflict was read without one, a confirmation gave it 10 while the gateway
// was asked, and the gateway answered 12.00; the refund of 10 was claimed,
// sent and recorded, and 2.00 of the buyer's money stayed at the gateway.
// The claim is now made with a read of the conflict in one transaction:
// changed since the gateway was asked, nothing is claimed and the job asks
// again, and then hands the contradiction to a person.
func TestRefundIsNotClaimedOnAnAnswerAboutAnotherAmount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewPool(t)
	sidecartest.Setup(t, db)
	sidecartest.Exec(t, db, "SELECT ordertimeout.configure(late_payment => 'refund')")
	sidecartest.CreateOrder(t, db, "T1", time.Hour, `{"amount": 12, "currency": "EUR"}`)
	sidecartest.Exec(t, db, "SELECT ordertimeout.cancel_order('T1')")
	sidecartest.Exec(t, db, "SELECT ordertimeout.confirm_payment('T1', 'pT1', NULL, NULL)")
	id := sidecartest.Int(t, db, "SELECT conflict_id FROM ordertimeout.conflicts WHERE payment_id = 'pT1'")
	g := &byPayment{answers: map[string]gateway.Order{
		"pT1": {OrderID: "T1", PaymentID: "pT1", Status: gateway.StatusPaid, Amount: "12.00", Currency: "EUR"}}}
	g.before = func() {
		g.before = nil
		sidecartest.Exec(t, db, "SELECT ordertimeout.confirm_payment('T1', 'pT1', 10, 'EUR')")
	}
	outcomes := map[string]int{}
	w := &worker.ResolveConflictWorker{Deps: &worker.Deps{Pool: db, Logger: sidecartest.Logger(), Gateway: g,
		Outcome: func(_, o string) { outcomes[o]++ }}}
	job := resolveJob(id, `{}`)
	require.ErrorContains(t, w.Work(ctx, job), "got another amount or currency while the gateway was asked")
	require.Empty(t, g.refunds, "nothing sent")
	require.EqualValues(t, 1, sidecartest.Int(t, db, "SELECT count(*) FROM ordertimeout.conflicts WHERE payment_id = 'pT1' AND state = 'open' AND amount = 10"),
		"nothing claimed")
	require.NoError(t, w.Work(ctx, job))
	require.Empty(t, g.refunds)
	require.Equal(t, 1, outcomes["other_amount"])
	require.EqualValues(t, 1, sidecartest.Int(t, db, `SELECT count(*) FROM ordertimeout.conflicts
		WHERE payment_id = 'pT1' AND state = 'open' AND handed_over_why LIKE '%holds 12.00 of payment "pT1", more than the 10 confirmed here%'`))
}

// A driver that reads payments by id (Stripe) answering that it knows no
// such payment, or that it is pending, is about this very payment: a refund
// would be refused for ever with the conflict claimed (a review had it stuck
// refunding, with no refund id a person could record). Under the refund
// policy too, it is asked again, then handed to a person; never claimed.
func TestRefundIsNotClaimedOnADoubtAboutThisPayment(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewPool(t)
	sidecartest.Setup(t, db)
	sidecartest.Exec(t, db, "SELECT ordertimeout.configure(late_payment => 'refund')")
	sidecartest.CreateOrder(t, db, "S1", time.Hour, `{"amount": 12, "currency": "EUR"}`)
	sidecartest.Exec(t, db, "SELECT ordertimeout.cancel_order('S1')")
	sidecartest.Exec(t, db, "SELECT ordertimeout.confirm_payment('S1', 'pi_s1', 12, 'EUR')")
	id := sidecartest.Int(t, db, "SELECT conflict_id FROM ordertimeout.conflicts WHERE payment_id = 'pi_s1'")
	for _, tc := range []struct {
		name string
		g    *byPayment
	}{
		{"unknown to a driver that reads by id", &byPayment{byID: true,
			answers: map[string]gateway.Order{"pi_s1": {OrderID: "S1", Status: gateway.StatusNone}}}},
		{"pending, the payment named", &byPayment{
			answers: map[string]gateway.Order{"pi_s1": {OrderID: "S1", PaymentID: "pi_s1", Status: gateway.StatusPending}}}},
	} {
		outcomes := map[string]int{}
		w := &worker.ResolveConflictWorker{Deps: &worker.Deps{Pool: db, Logger: sidecartest.Logger(), Gateway: tc.g,
			Outcome: func(_, o string) { outcomes[o]++ }}}
		job := func(asked int) *river.Job[worker.ResolveConflictArgs] {
			return resolveJob(id, fmt.Sprintf(`{"ordertimeout_held_asks": %d}`, asked))
		}
		var snooze *river.JobSnoozeError
		require.ErrorAs(t, w.Work(ctx, job(0)), &snooze, "%s: asked again", tc.name)
		require.Empty(t, tc.g.refunds, tc.name)
		require.EqualValues(t, 1, sidecartest.Int(t, db, "SELECT count(*) FROM ordertimeout.conflicts WHERE payment_id = 'pi_s1' AND state = 'open'"), tc.name)
		require.NoError(t, w.Work(ctx, job(worker.HeldAsks-1)), tc.name)
		require.Empty(t, tc.g.refunds, tc.name)
		require.Equal(t, 1, outcomes["unconfirmed"], tc.name)
		require.EqualValues(t, 1, sidecartest.Int(t, db, `SELECT count(*) FROM ordertimeout.conflicts
			WHERE payment_id = 'pi_s1' AND state = 'open' AND handed_over_why IS NOT NULL`), tc.name)
		// The next case starts from an open conflict that is the
		// sidecar's again.
		sidecartest.Exec(t, db, "UPDATE ordertimeout.conflicts SET handed_over_at = NULL, handed_over_why = NULL WHERE payment_id = 'pi_s1'")
	}
}

// The same race before a reinstatement (a second review): the gateway said
// it holds 10.00 of a late payment recorded without its amount, and a
// confirmation gave it 12 (the order's amount) meanwhile; the order was
// reinstated, PAID, with 10 of 12 held. The reinstatement is now made in
// one transaction with a read of the conflict: nothing is reinstated, and
// asked again, the gateway's 10.00 of 12 is a refund in part, handed over.
func TestReinstateIsNotMadeOnAnAnswerAboutAnotherAmount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewPool(t)
	sidecartest.Setup(t, db)
	sidecartest.CreateOrder(t, db, "RR", time.Hour, `{"amount": 12, "currency": "EUR"}`)
	sidecartest.Exec(t, db, "SELECT ordertimeout.cancel_order('RR')")
	sidecartest.Exec(t, db, "SELECT ordertimeout.confirm_payment('RR', 'pi_rr', NULL, NULL)")
	id := sidecartest.Int(t, db, "SELECT conflict_id FROM ordertimeout.conflicts WHERE payment_id = 'pi_rr'")
	g := &byPayment{byID: true, answers: map[string]gateway.Order{
		"pi_rr": {OrderID: "RR", PaymentID: "pi_rr", Status: gateway.StatusPaid, Amount: "10.00", Currency: "EUR"}}}
	g.before = func() {
		g.before = nil
		sidecartest.Exec(t, db, "SELECT ordertimeout.confirm_payment('RR', 'pi_rr', 12, 'EUR')")
	}
	outcomes := map[string]int{}
	w := &worker.ResolveConflictWorker{Deps: &worker.Deps{Pool: db, Logger: sidecartest.Logger(), Gateway: g,
		Outcome: func(_, o string) { outcomes[o]++ }}}
	job := resolveJob(id, `{}`)
	require.ErrorContains(t, w.Work(ctx, job), "got another amount or currency while the gateway was asked")
	require.Equal(t, "CANCELLED", sidecartest.Status(t, db, "RR"), "not reinstated")
	require.NoError(t, w.Work(ctx, job))
	require.Equal(t, "CANCELLED", sidecartest.Status(t, db, "RR"))
	require.Equal(t, 1, outcomes["partly_held"])
	require.Empty(t, g.refunds)
}

// A payment under dispute (gateway.ErrDisputed) is neither reinstated nor
// refunded: the job asks again later, counted as disputed, not as an outage
// (a third review saw it logged as "gateway unavailable" for the weeks a
// dispute can last).
func TestResolveWaitsOutADispute(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewPool(t)
	sidecartest.Setup(t, db)
	sidecartest.CreateOrder(t, db, "DS", time.Hour, `{"amount": 12, "currency": "EUR"}`)
	sidecartest.Exec(t, db, "SELECT ordertimeout.cancel_order('DS')")
	sidecartest.Exec(t, db, "SELECT ordertimeout.confirm_payment('DS', 'pi_ds', 12, 'EUR')")
	id := sidecartest.Int(t, db, "SELECT conflict_id FROM ordertimeout.conflicts WHERE payment_id = 'pi_ds'")
	for _, policy := range []string{"reinstate", "refund"} {
		sidecartest.Exec(t, db, "SELECT ordertimeout.configure(late_payment => $1)", policy)
		g := &byPayment{byID: true, err: fmt.Errorf("dispute dp_1 is open: %w: %w", gateway.ErrDisputed, gateway.ErrUnavailable)}
		outcomes := map[string]int{}
		w := &worker.ResolveConflictWorker{Deps: &worker.Deps{Pool: db, Logger: sidecartest.Logger(), Gateway: g,
			Outcome: func(_, o string) { outcomes[o]++ }}}
		job := resolveJob(id, `{}`)
		var snooze *river.JobSnoozeError
		require.ErrorAs(t, w.Work(ctx, job), &snooze, policy)
		require.Equal(t, map[string]int{"disputed": 1}, outcomes, policy)
		require.Empty(t, g.refunds, policy)
		require.Equal(t, "CANCELLED", sidecartest.Status(t, db, "DS"), policy)
		require.EqualValues(t, 1, sidecartest.Int(t, db, "SELECT count(*) FROM ordertimeout.conflicts WHERE payment_id = 'pi_ds' AND state = 'open' AND handed_over_at IS NULL"), policy)
	}
}

// resolveJob is a resolve job of conflict id, at its first attempt, with
// metadata (River's snoozes, the held-ask count).
func resolveJob(id int64, metadata string) *river.Job[worker.ResolveConflictArgs] {
	return &river.Job[worker.ResolveConflictArgs]{
		JobRow: &rivertype.JobRow{ID: 1, Kind: "ordertimeout_resolve_conflict", Attempt: 1, MaxAttempts: 25,
			EncodedArgs: []byte(fmt.Sprintf(`{"conflict_id": %d}`, id)), Metadata: []byte(metadata)},
		Args: worker.ResolveConflictArgs{ConflictID: id}}
}
