package worker

import (
	"context"
	"errors"
	"fmt"
	"math/big"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
)

// ErrNotHeld marks a late payment the gateway says it no longer holds: it
// answered that the order's payment failed (a payment refunded in full there,
// as the contract words it), or named this very payment with another amount
// or currency (refunded in part). Such a payment is never reinstated: the
// order would be PAID for money the shop does not have. Nor is it refunded
// by the sidecar (a second refund of money given back already); a person
// decides, and the conflict stays open for them.
var ErrNotHeld = errors.New("the gateway no longer holds the late payment's money")

// ErrOtherCurrency marks a late payment the gateway holds in another currency
// than the one recorded here (the order's, when the confirmation named none):
// not the order's money, so never reinstated; it is refunded, as a payment
// resolve_conflict refuses to reinstate (OT132) is.
var ErrOtherCurrency = errors.New("the gateway holds the late payment in another currency")

// CheckHeld asks gw, before conflict id is reinstated, whether it still
// holds the late payment's money: nil when it does, or when nothing it
// answers speaks against it ("none" and "pending" are unknown, a paid answer
// that names another payment says nothing of this one); an error wrapping
// ErrNotHeld when it does not, or ErrOtherCurrency; a gateway error (unavailable, throttled, an
// unusable answer) or a database error otherwise, after which nothing may be
// reinstated yet. A conflict that is not an open late payment is not asked
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
	ref, err := gatewayRef(ctx, db, c.OrderID)
	if err != nil {
		return gateway.Order{}, err
	}
	g, err := gw.Order(ctx, ref)
	if err != nil {
		return gateway.Order{}, fmt.Errorf("ask the gateway whether it holds payment %q before reinstating: %w", c.PaymentID, err)
	}
	switch {
	case g.Status == gateway.StatusFailed:
		return g, fmt.Errorf("%w: the gateway answers that order %q's payment failed (refunded in full there?), yet payment %q was confirmed late",
			ErrNotHeld, c.OrderID, c.PaymentID)
	case g.Status != gateway.StatusPaid || g.PaymentID != c.PaymentID:
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
