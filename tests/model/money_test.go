package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
)

// The money dimension of the model: amounts and currencies that match the
// order's or not, amounts and currencies that must be refused, and refunds
// claimed, made at the gateway and recorded, with failures in between.

// badAmounts are amounts confirm_payment and create_order must refuse with
// OT126, writing nothing: not finite, negative, 10^15 and more, or with more
// than 6 decimal places.
var badAmounts = []string{"NaN", "Infinity", "-Infinity", "-0.01", "-1e-20", "1000000000000000", "1e15", "1e400", "0.0000001", "1e-400"}

// badCurrencies are currencies confirm_payment must refuse with OT128.
var badCurrencies = []string{"eur", "EURO", "EU", "E1R", "€UR", " USD", "USD\n"}

// nullable is v, or SQL NULL when v is "".
func nullable(v string) *string {
	if v == "" {
		return nil
	}
	return &v
}

// otherCurrency is a valid currency that is not cur.
func otherCurrency(cur string) string {
	if cur == "USD" {
		return "EUR"
	}
	return "USD"
}

// money chooses the amount (c.Arg) and currency (c.Currency) a confirmation
// of an order of spec sp gives: mostly the order's, in all the ways that are
// the same (the amount written with another scale, the currency named or
// left to the order's, no amount at all: unverified), and, when mayBeWrong,
// sometimes another amount or currency (c.Wrong).
func (s *session) money(c *call, sp spec, mayBeWrong bool) {
	if sp.Amount == "" {
		switch s.rand.IntN(10) {
		case 0, 1:
			c.Arg = "5.00"
		case 2:
			c.Currency = "EUR"
		}
		return
	}
	switch r := s.rand.IntN(20); {
	case r < 8:
		c.Arg = sp.Amount
	case r < 10:
		c.Arg = sp.Amount + "0" // the same number, with another scale
	case r < 13:
		c.Arg, c.Currency = sp.Amount, sp.Currency
	case r < 15:
		// No amount: an app caller that does not know it (recorded as unverified).
	case !mayBeWrong:
		c.Arg = sp.Amount
	case r < 17:
		c.Arg, c.Wrong = sp.Amount+"1", true
	case r < 18:
		c.Arg, c.Wrong = "999999999999999.99", true // the largest amount there is
	default:
		c.Arg, c.Currency, c.Wrong = sp.Amount, otherCurrency(sp.Currency), true
	}
}

// poisonConfirm confirms a payment of o with an amount or a currency that
// must be refused: mostly a payment id of its own, which must then leave no
// trace at all, sometimes one of the order's payments.
func (s *session) poisonConfirm(ctx context.Context, o *order) error {
	s.m.mu.Lock()
	known := len(o.payments)
	var payment string
	if known > 0 && s.rand.IntN(4) == 0 {
		payment = o.payments[s.rand.IntN(known)]
	}
	s.m.mu.Unlock()
	if payment == "" {
		payment = fmt.Sprintf("poison-%06d", s.m.payments.Add(1))
	}
	c := &call{Op: "confirm", Order: o.spec.ID, Payment: payment, Poison: true}
	want := sqlstate.InvalidAmount
	if s.rand.IntN(3) == 0 {
		c.Arg, c.Currency, want = o.spec.Amount, badCurrencies[s.rand.IntN(len(badCurrencies))], sqlstate.InvalidCurrency
	} else {
		c.Arg = badAmounts[s.rand.IntN(len(badAmounts))]
		if s.rand.IntN(2) == 0 {
			c.Currency = o.spec.Currency
		}
	}
	currency := nullable(c.Currency)
	if want == sqlstate.InvalidCurrency {
		currency = &c.Currency
	}
	err := s.do(c, func() error {
		return s.conn.QueryRow(ctx, `SELECT ordertimeout.confirm_payment($1, $2, $3::numeric, $4)`,
			o.spec.ID, c.Payment, nullable(c.Arg), currency).Scan(&c.Result)
	})
	if err != nil {
		return err
	}
	if c.Code != want {
		c.Unexpected = fmt.Sprintf("amount %q, currency %q must raise %s", c.Arg, c.Currency, want)
	}
	return nil
}

// poisonCreate creates an order (of an id the model never uses otherwise)
// whose options hold an amount or a currency that must be refused: it must
// not exist afterwards, nor hold any stock.
func (s *session) poisonCreate(ctx context.Context) error {
	id := fmt.Sprintf("bad-%06d", s.m.payments.Add(1))
	options := map[string]any{"currency": "EUR"}
	want := sqlstate.InvalidAmount
	switch r := s.rand.IntN(7); r {
	case 0, 1, 2:
		options["amount"] = json.Number([]string{"1000000000000000", "-0.01", "1e400"}[r])
	case 3, 4:
		options["amount"] = []string{"NaN", "Infinity"}[r-3] // a JSON string: no JSON number is NaN
	default:
		options["amount"], options["currency"], want = json.Number("10.00"), "eur", sqlstate.InvalidOptions
	}
	c := &call{Op: "create", Order: id, Poison: true, Arg: mustJSON(options)}
	err := s.do(c, func() error {
		return s.conn.QueryRow(ctx,
			`SELECT created, status FROM ordertimeout.create_order($1, '[{"sku":"sku-a","qty":1}]'::jsonb, interval '1 hour', $2::jsonb)`,
			id, c.Arg).Scan(&c.Created, &c.Result)
	})
	if err != nil {
		return err
	}
	if c.Code != want {
		c.Unexpected = fmt.Sprintf("options %s must raise %s", c.Arg, want)
	}
	return nil
}

// conflictRef names one conflict.
type conflictRef struct {
	ID      int64
	Order   string
	Payment string
}

// refundWorker plays the sidecar's resolve worker under the refund policy on
// an unresolved conflict (open, or being refunded by a worker that failed).
func (s *session) refundWorker(ctx context.Context) error {
	rows, err := s.conn.Query(ctx, `
SELECT c.conflict_id, c.order_id, c.payment_id
FROM ordertimeout.conflicts AS c
WHERE c.resolution IS NULL
ORDER BY c.conflict_id
LIMIT 100`)
	if err != nil {
		return fmt.Errorf("list unresolved conflicts: %w", err)
	}
	open, err := pgx.CollectRows(rows, pgx.RowToStructByPos[conflictRef])
	if err != nil {
		return fmt.Errorf("list unresolved conflicts: %w", err)
	}
	if len(open) == 0 {
		return s.sweep(ctx, 16)
	}
	return s.refund(ctx, open[s.rand.IntN(len(open))], true)
}

// refund refunds a conflict as the resolve worker does: claim it
// (resolve_conflict 'refund'), refund at the gateway by the payment's key,
// record it (finish_refund). With faults, the worker may fail after the
// gateway call: its recording rolled back, its session killed inside the
// transaction, or nothing recorded at all (the process died); a later worker
// (or the drain) must continue the same refund.
func (s *session) refund(ctx context.Context, cf conflictRef, faults bool) error {
	claim := &call{Op: "claim", Order: cf.Order, Payment: cf.Payment, Conflict: cf.ID, Arg: "refund"}
	err := s.do(claim, func() error {
		return s.conn.QueryRow(ctx, `SELECT ordertimeout.resolve_conflict($1, 'refund')`, cf.ID).Scan(&claim.Result)
	})
	if err != nil {
		return err
	}
	allow(claim, sqlstate.ConflictResolved)
	if claim.Code != "" || claim.Result == "refunded" {
		return nil // resolved already: nothing to refund
	}
	if claim.Result != "refunding" {
		claim.Unexpected = fmt.Sprintf("resolve_conflict(refund) answers %v", answersOf["refund"])
		return nil
	}

	refundID := s.m.refund(cf.Payment)
	fin := &call{Op: "finish", Order: cf.Order, Payment: cf.Payment, Conflict: cf.ID, Arg: refundID}
	if faults {
		switch r := s.rand.IntN(10); {
		case r < 2:
			fin.Fault = "rollback"
		case r < 4:
			fin.Fault = "die"
		case r < 5:
			return nil // the worker died between the gateway call and the recording
		}
	}
	err = s.do(fin, func() error {
		tx, err := s.conn.Begin(ctx)
		if err != nil {
			return fmt.Errorf("begin finish: %w", err)
		}
		defer func() { _ = tx.Rollback(context.Background()) }()
		if err := tx.QueryRow(ctx, `SELECT ordertimeout.finish_refund($1, $2)`, cf.ID, refundID).Scan(&fin.Result); err != nil {
			return err
		}
		switch fin.Fault {
		case "rollback":
			return tx.Rollback(ctx)
		case "die":
			return s.die(ctx, tx)
		}
		return tx.Commit(ctx)
	})
	if err != nil {
		return err
	}
	allow(fin)
	if fin.Code == "" && fin.Result != "refunded" {
		fin.Unexpected = "finish_refund of a claimed conflict answers refunded"
	}
	return nil
}

// die kills the session's backend inside tx, before its commit, as a crash
// of the sidecar's host or a cut connection would, and connects again.
func (s *session) die(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, `SELECT pg_terminate_backend(pg_backend_pid())`); err == nil {
		return errors.New("the session's backend survived pg_terminate_backend")
	}
	s.conn.Close(context.Background())
	conn, err := connect(ctx, s.url, s.id)
	if err != nil {
		return fmt.Errorf("connect again after dying: %w", err)
	}
	s.conn = conn
	return nil
}

// refund makes the gateway's refund of payment, idempotent by its key (the
// payment id): the same key refunds once and answers the same refund id.
func (m *model) refund(payment string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if id, ok := m.refunds[payment]; ok {
		return id
	}
	id := "refund-" + payment
	m.refunds[payment] = id
	return id
}

// finishOutOfTurn calls finish_refund, as a confused or hostile caller might,
// on a conflict nobody is refunding, holding the conflict's row so that no
// one claims it meanwhile: it must raise OT135, or, on a conflict refunded
// already, answer refunded and change nothing when given the refund id the
// conflict recorded, and raise OT139 (the payment may have been refunded
// twice) when given another.
func (s *session) finishOutOfTurn(ctx context.Context) error {
	tx, err := s.conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin finish out of turn: %w", err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	var cf conflictRef
	var resolution, recorded *string
	err = tx.QueryRow(ctx, `
SELECT c.conflict_id, c.order_id, c.payment_id, c.resolution, c.refund_id
FROM ordertimeout.conflicts AS c
WHERE c.state <> 'refunding'
ORDER BY random()
LIMIT 1
FOR UPDATE`).Scan(&cf.ID, &cf.Order, &cf.Payment, &resolution, &recorded)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pick a conflict: %w", err)
	}
	c := &call{Op: "finish-out-of-turn", Order: cf.Order, Payment: cf.Payment, Conflict: cf.ID}
	err = s.do(c, func() error {
		c.Arg = fmt.Sprintf("refund-bogus-%d", c.Seq)
		if recorded != nil && s.rand.IntN(2) == 0 {
			c.Arg = *recorded // the same refund again
		}
		if err := tx.QueryRow(ctx, `SELECT ordertimeout.finish_refund($1, $2)`, cf.ID, c.Arg).Scan(&c.Result); err != nil {
			return err
		}
		return tx.Commit(ctx)
	})
	if err != nil {
		return err
	}
	switch {
	case deref(resolution) == "refunded" && c.Arg == deref(recorded) && (c.Code != "" || c.Result != "refunded"):
		c.Unexpected = "finish_refund of a refunded conflict with its refund id answers refunded"
	case deref(resolution) == "refunded" && c.Arg != deref(recorded) && c.Code != sqlstate.AnotherRefund:
		c.Unexpected = fmt.Sprintf("finish_refund of a refunded conflict with another refund id must raise %s", sqlstate.AnotherRefund)
	case deref(resolution) != "refunded" && c.Code != sqlstate.RefundNotClaimed:
		c.Unexpected = fmt.Sprintf("finish_refund of a conflict not being refunded (resolution %q) must raise %s", deref(resolution), sqlstate.RefundNotClaimed)
	}
	return nil
}

// drainRefunds finishes every refund that a failed worker left claimed, as
// the resolve worker's retries do.
func (s *session) drainRefunds(ctx context.Context) error {
	for range 100 {
		rows, err := s.conn.Query(ctx, `
SELECT c.conflict_id, c.order_id, c.payment_id
FROM ordertimeout.conflicts AS c
WHERE c.state = 'refunding'
ORDER BY c.conflict_id`)
		if err != nil {
			return fmt.Errorf("list refunds in flight: %w", err)
		}
		claimed, err := pgx.CollectRows(rows, pgx.RowToStructByPos[conflictRef])
		if err != nil {
			return fmt.Errorf("list refunds in flight: %w", err)
		}
		if len(claimed) == 0 {
			return nil
		}
		for _, cf := range claimed {
			if err := s.refund(ctx, cf, false); err != nil {
				return err
			}
		}
	}
	return errors.New("refunds still in flight after 100 rounds of finishing them")
}
