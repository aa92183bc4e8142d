package worker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

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
}

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
		answers map[string]gateway.Order
		err     error
		want    error // nil: held
	}{
		{name: "held", answers: map[string]gateway.Order{"pi_d1": paid("pi_d1", "12.5", "EUR")}},
		{name: "refunded in full, the other payment paid", answers: map[string]gateway.Order{
			"pi_d1": {OrderID: "H1", Status: gateway.StatusFailed}, "": paid("pi_d2", "12.50", "EUR")}, want: worker.ErrNotHeld},
		{name: "refunded in part", answers: map[string]gateway.Order{"pi_d1": paid("pi_d1", "2.50", "EUR")}, want: worker.ErrNotHeld},
		{name: "another currency", answers: map[string]gateway.Order{"pi_d1": paid("pi_d1", "12.50", "USD")}, want: worker.ErrOtherCurrency},
		{name: "the order's answer names another payment", answers: map[string]gateway.Order{"": paid("pi_d2", "12.50", "EUR")}, want: worker.ErrNotHeld},
		{name: "pending", answers: map[string]gateway.Order{"pi_d1": {OrderID: "H1", Status: gateway.StatusPending}}, want: gateway.ErrUnavailable},
		{name: "none: unknown", answers: map[string]gateway.Order{"pi_d1": {OrderID: "H1", Status: gateway.StatusNone}}},
		{name: "an unusable answer", err: fmt.Errorf("401 api_key_expired: %w", gateway.ErrBadRequest), want: gateway.ErrBadRequest},
		{name: "unavailable", err: gateway.ErrUnavailable, want: gateway.ErrUnavailable},
	} {
		g := &byPayment{answers: tc.answers, err: tc.err}
		err := worker.CheckHeld(ctx, g, db, id)
		if tc.want == nil {
			require.NoError(t, err, tc.name)
		} else {
			require.True(t, errors.Is(err, tc.want), "%s: %v", tc.name, err)
		}
		require.Equal(t, [][]string{{"pi_d1"}}, g.asked, "%s: asked about the conflict's payment alone", tc.name)
	}
}
