package worker

import (
	"context"
	"errors"
	"fmt"
	"math/big"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
)

// ErrNotHeld marks a late payment the gateway does not confirm it holds: it
// answered that the order's payment failed (a payment refunded in full there,
// as the contract words it), named this very payment with another amount
// (refunded in part), or answered for the order with another payment. Such a payment is never reinstated: the
// order would be PAID for money the shop does not have. Nor is it refunded
// by the sidecar (a second refund of money given back already); a person
// decides, and the conflict stays open for them.
var ErrNotHeld = errors.New("the gateway does not confirm that it holds the late payment's money")

// ErrOtherCurrency marks a late payment the gateway holds in another currency
// than the one recorded here (the order's, when the confirmation named none):
// not the order's money, so never reinstated; it is refunded, as a payment
// resolve_conflict refuses to reinstate (OT132) is.
var ErrOtherCurrency = errors.New("the gateway holds the late payment in another currency")

// CheckHeld asks gw, before conflict id is reinstated, whether it still
// holds the late payment's money: nil when it does, or when it answers
// "none" (unknown, never "not paid"); an error wrapping ErrNotHeld when it
// does not, or when it answers for the order with another payment (it does
// not say whether it holds this one), or ErrOtherCurrency; a gateway error
// otherwise (unavailable, throttled, "pending", which is asked again later;
// an unusable answer or a request it refused) or a database error, after
// which nothing may be reinstated yet. A conflict that is not an open late payment is not asked
// about (resolve_conflict refuses to reinstate it anyway).
//
// It narrows, without closing, the window in which a person's refund at the
// gateway (a buyer who asked support for their money back after the cancel)
// could meet a reinstatement: the gateway is not part of the database's
// transaction.
func CheckHeld(ctx context.Context, gw gateway.Gateway, db *pgxpool.Pool, id int64) error {
	var c conflict
	found, err := queryOne(ctx, db,
		`SELECT order_id, payment_id, kind, amount::text, currency, state
		   FROM ordertimeout.conflict_info($1)`,
		[]any{id}, &c.OrderID, &c.PaymentID, &c.Kind, &c.Amount, &c.Currency, &c.State)
	if err != nil {
		return fmt.Errorf("read conflict %d: %w", id, err)
	}
	if !found || c.Kind != "late_payment" || c.State != "open" {
		return nil
	}
	_, err = checkHeld(ctx, gw, db, c)
	return err
}

// checkHeld is CheckHeld for a conflict read already; it also returns the
// gateway's answer, which a late payment recorded without its amount learns
// the amount from.
func checkHeld(ctx context.Context, gw gateway.Gateway, db *pgxpool.Pool, c conflict) (gateway.Order, error) {
	// This payment alone: a driver that reads payments by their ids
	// (Stripe) answers for it, not for another payment of the order (a
	// second late payment, which a review had answer paid for a first one
	// refunded in full). The JSON contract answers for the order.
	ref := gateway.Ref{OrderID: c.OrderID, PaymentIDs: []string{c.PaymentID}}
	g, err := gw.Order(ctx, ref)
	if err != nil {
		return gateway.Order{}, fmt.Errorf("ask the gateway whether it holds payment %q before reinstating: %w", c.PaymentID, err)
	}
	switch {
	case g.Status == gateway.StatusFailed:
		return g, fmt.Errorf("%w: the gateway answers that order %q's payment failed (refunded in full there?), yet payment %q was confirmed late",
			ErrNotHeld, c.OrderID, c.PaymentID)
	case g.Status == gateway.StatusPending:
		// Not settled there yet, or a refund under way: ask again later.
		return g, fmt.Errorf("the gateway answers that order %q's payment is pending, yet payment %q was confirmed late: asking again later: %w",
			c.OrderID, c.PaymentID, gateway.ErrUnavailable)
	case g.Status == gateway.StatusPaid && g.PaymentID != c.PaymentID:
		// Which of the two holds money, the gateway does not say.
		return g, fmt.Errorf("%w: the gateway answers for order %q with payment %q, not %q: it does not say whether it holds this one",
			ErrNotHeld, c.OrderID, g.PaymentID, c.PaymentID)
	case g.Status != gateway.StatusPaid:
		// none: unknown, never "not paid" (a gateway that no longer keeps
		// the record, or a payment it was never asked to hold).
		return g, nil
	case c.Currency != nil && g.Currency != "" && string(g.Currency) != *c.Currency:
		return g, fmt.Errorf("%w: payment %q is in %s at the gateway, in %s here",
			ErrOtherCurrency, c.PaymentID, g.Currency, *c.Currency)
	case c.Amount != nil && g.Amount != "" && !sameAmount(string(g.Amount), *c.Amount):
		return g, fmt.Errorf("%w: the gateway holds %s of payment %q, confirmed here as %s (refunded in part there?)",
			ErrNotHeld, g.Amount, c.PaymentID, *c.Amount)
	}
	return g, nil
}

// sameAmount compares two decimal amounts by value (10.5 is 10.50). An
// amount that does not parse is not the same as anything.
func sameAmount(a, b string) bool {
	x, okA := new(big.Rat).SetString(a)
	y, okB := new(big.Rat).SetString(b)
	return okA && okB && x.Cmp(y) == 0
}
