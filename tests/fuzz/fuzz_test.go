package fuzz

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// Bits of the nulls argument of the fuzz targets: which arguments are sent as
// SQL NULL.
const (
	nullFirst  = 1 << iota // order_id
	nullSecond             // items, or payment_id
	nullThird              // timeout
	nullFourth             // options
)

// existingOrder is created by newDB: the seeds that name it reach the paths
// of an order that exists. It holds coupon heldCoupon.
const (
	existingOrder = "existing-1"
	heldCoupon    = "HELD"
)

// existingItems and existingOptions are existingOrder's content.
const (
	existingItems   = `[{"sku": "A", "qty": 1}]`
	existingOptions = `{"coupon": "HELD", "points_account": "P1", "points": 10}`
)

// newDB returns a pool on a database of its own (one per fuzz target and
// process) with some stock (A plenty, B 5, C none, a unicode SKU), points
// account P1 with 100 points, and existingOrder.
func newDB(f *testing.F) *pgxpool.Pool {
	pool := pgtest.NewPool(f)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := pool.Exec(ctx, `
SELECT ordertimeout.put_stock('A', 1000000);
SELECT ordertimeout.put_stock('B', 5);
SELECT ordertimeout.put_stock('C', 0);
SELECT ordertimeout.put_stock('ünïcødé-😀', 10);
SELECT ordertimeout.put_points('P1', 100);`)
	require.NoError(f, err)
	_, err = pool.Exec(ctx, `SELECT ordertimeout.create_order($1, $2::jsonb, interval '1 day', $3::jsonb)`,
		existingOrder, existingItems, existingOptions)
	require.NoError(f, err)
	return pool
}

// clean turns s into a string PostgreSQL accepts as text: valid UTF-8, no NUL.
func clean(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// jsonArg returns b if PostgreSQL accepts it as jsonb, else b as a JSON
// string (which it always accepts).
func jsonArg(ctx context.Context, t *testing.T, tx pgx.Tx, b []byte) string {
	if utf8.Valid(b) && json.Valid(b) {
		sp, err := tx.Begin(ctx)
		require.NoError(t, err)
		_, err = sp.Exec(ctx, `SELECT $1::text::jsonb`, string(b))
		require.NoError(t, sp.Rollback(ctx))
		if err == nil {
			return string(b)
		}
	}
	s, err := json.Marshal(clean(string(b)))
	require.NoError(t, err)
	return string(s)
}

// interval turns a fuzzed number of milliseconds into an interval of days
// and microseconds, clamped to what the interval type holds.
func interval(ms int64) pgtype.Interval {
	const msPerDay = 24 * 60 * 60 * 1000
	days := ms / msPerDay
	return pgtype.Interval{
		Days:         int32(max(min(days, math.MaxInt32), math.MinInt32)),
		Microseconds: (ms % msPerDay) * 1000,
		Valid:        true,
	}
}

// snapshot is what a call may write: row counts and sums over the tables.
type snapshot struct {
	Orders, Items, Jobs, Events, CouponHolds, PointsHolds, Payments, Conflicts int64
	StockTotal, Reserved, PointsHeld                                           int64
}

func takeSnapshot(ctx context.Context, t *testing.T, q pgx.Tx) snapshot {
	var s snapshot
	require.NoError(t, q.QueryRow(ctx, `
SELECT (SELECT count(*) FROM ordertimeout.orders),
       (SELECT count(*) FROM ordertimeout.order_items),
       (SELECT count(*) FROM public.river_job),
       (SELECT count(*) FROM ordertimeout.events),
       (SELECT count(*) FROM ordertimeout.coupon_holds),
       (SELECT count(*) FROM ordertimeout.points_holds),
       (SELECT count(*) FROM ordertimeout.payments),
       (SELECT count(*) FROM ordertimeout.conflicts),
       (SELECT coalesce(sum(available + reserved + sold), 0)::bigint FROM ordertimeout.stock),
       (SELECT coalesce(sum(reserved), 0)::bigint FROM ordertimeout.stock),
       (SELECT coalesce(sum(held), 0)::bigint FROM ordertimeout.points_accounts)`).
		Scan(&s.Orders, &s.Items, &s.Jobs, &s.Events, &s.CouponHolds, &s.PointsHolds, &s.Payments, &s.Conflicts,
			&s.StockTotal, &s.Reserved, &s.PointsHeld))
	return s
}

// apiError returns the SQLSTATE of err, failing the test unless it is one of
// the API's (class OT).
func apiError(t *testing.T, call string, err error) string {
	t.Helper()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		t.Fatalf("%s: %v (not an SQL error)", call, err)
	}
	if !strings.HasPrefix(pgErr.Code, sqlstate.ClassOT) {
		t.Fatalf("%s: SQLSTATE %s is not one of the API's (class OT): %s (%s; %s)",
			call, pgErr.Code, pgErr.Message, pgErr.Where, pgErr.Detail)
	}
	return pgErr.Code
}

// idValidity says whether the API must take id: "valid" for 1 to max
// characters none of which is of Unicode's categories Cc, Cf, Zl or Zp, and
// not "." or ".."; "invalid" otherwise (the rule of ordertimeout._is_identifier).
func idValidity(id string, max int) string {
	if id == "." || id == ".." || !plainText(id, max) {
		return "invalid"
	}
	return "valid"
}

// plainText is the rule of ordertimeout._is_plain_text.
func plainText(s string, max int) bool {
	n := utf8.RuneCountInString(s)
	if n == 0 || n > max {
		return false
	}
	for _, r := range s {
		if unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp) {
			return false
		}
	}
	return true
}

// FuzzCreateOrder calls create_order with fuzzed arguments: it succeeds or
// fails with an OT error; a failure writes nothing; a success writes the
// order, its items, its timer row and its event, reserves its stock, and a
// repeat of it returns the same order and writes nothing.
func FuzzCreateOrder(f *testing.F) {
	pool := newDB(f)
	f.Fuzz(func(t *testing.T, orderID string, items []byte, timeoutMS int64, options []byte, nulls uint8) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(context.Background()) }()

		orderID = clean(orderID)
		args := []any{orderID, jsonArg(ctx, t, tx, items), interval(timeoutMS), jsonArg(ctx, t, tx, options)}
		for i := range args {
			if nulls&(1<<i) != 0 {
				args[i] = nil
			}
		}
		call := fmt.Sprintf("create_order(%.80q, %.200s, %v ms, %.200s, nulls %04b)", orderID, args[1], timeoutMS, args[3], nulls&0xf)

		before := takeSnapshot(ctx, t, tx)
		sp, err := tx.Begin(ctx)
		require.NoError(t, err)
		const query = `SELECT created, status, jsonb_array_length(items) FROM ordertimeout.create_order($1, $2::text::jsonb, $3, $4::text::jsonb)`
		var created bool
		var status string
		var stored int64
		err = sp.QueryRow(ctx, query, args...).Scan(&created, &status, &stored)
		if err != nil {
			code := apiError(t, call, err)
			require.NoError(t, sp.Rollback(ctx))
			require.Equal(t, before, takeSnapshot(ctx, t, tx), "%s failed with %s but wrote", call, code)
			switch {
			case nulls&nullFirst != 0:
				require.Equal(t, sqlstate.NullArgument, code, call)
			case idValidity(orderID, 64) == "invalid":
				require.Equal(t, sqlstate.InvalidOrderID, code, call)
			case nulls&nullSecond != 0 && idValidity(orderID, 64) == "valid":
				require.Equal(t, sqlstate.NullArgument, code, call)
			}
			return
		}
		require.NoError(t, sp.Commit(ctx))
		require.Zero(t, nulls&(nullFirst|nullSecond), "%s: succeeded with a NULL order_id or items", call)
		require.NotEqual(t, "invalid", idValidity(orderID, 64), "%s: took an invalid order_id", call)
		after := takeSnapshot(ctx, t, tx)
		if orderID == existingOrder {
			require.False(t, created, call)
			require.Equal(t, before, after, "%s: repeat of an existing order wrote", call)
			return
		}
		require.True(t, created, call)
		require.Equal(t, "PENDING", status, call)
		require.Equal(t, before.Orders+1, after.Orders, call)
		require.Equal(t, before.Items+stored, after.Items, call)
		require.Equal(t, before.Jobs+1, after.Jobs, "%s: one timer row", call)
		require.Equal(t, before.Events+1, after.Events, call)
		require.Equal(t, before.StockTotal, after.StockTotal, "%s: stock is conserved", call)
		require.Greater(t, after.Reserved, before.Reserved, "%s: stock reserved", call)
		require.GreaterOrEqual(t, after.PointsHeld, before.PointsHeld, call)

		// The id is stored as given, and the same call again is a no-op.
		var storedID string
		require.NoError(t, tx.QueryRow(ctx, `SELECT order_id FROM ordertimeout.order_info($1)`, orderID).Scan(&storedID), call)
		require.Equal(t, orderID, storedID, call)
		require.NoError(t, tx.QueryRow(ctx, query, args...).Scan(&created, &status, &stored), "%s again", call)
		require.False(t, created, "%s again", call)
		require.Equal(t, after, takeSnapshot(ctx, t, tx), "%s again wrote", call)
	})
}

// FuzzIDs sends fuzzed order and payment ids through the functions that take
// them: each call succeeds or fails with an OT error chosen by the ids'
// validity, writes nothing when it fails, and an id the API takes is stored
// verbatim.
func FuzzIDs(f *testing.F) {
	pool := newDB(f)
	f.Fuzz(func(t *testing.T, orderID, paymentID string, nulls uint8) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(context.Background()) }()

		orderID, paymentID = clean(orderID), clean(paymentID)
		var order, payment any = orderID, paymentID
		if nulls&nullFirst != 0 {
			order = nil
		}
		if nulls&nullSecond != 0 {
			payment = nil
		}
		orderOK := idValidity(orderID, 64)
		if order == nil {
			orderOK = "null"
		}
		// The error the second argument must raise, by what it is: "" when
		// none, "any" when it depends on the locale.
		paymentWant := map[string]string{"valid": "", "invalid": sqlstate.InvalidPaymentID}[idValidity(paymentID, 128)]
		reasonWant := ""
		if !plainText(paymentID, 200) {
			reasonWant = sqlstate.InvalidReason
		}
		if payment == nil {
			paymentWant, reasonWant = sqlstate.NullArgument, sqlstate.NullArgument
		}

		// run calls query in a savepoint and checks its outcome: the error
		// invalid arguments must raise (the order id is checked first, then
		// the second argument, then whether the order exists), else success
		// or an OT error; a failure writes nothing. It reports whether the
		// call succeeded.
		run := func(name, query string, args []any, secondWant string) bool {
			call := fmt.Sprintf("%s(%.80q, %.80q, nulls %02b)", name, orderID, paymentID, nulls&3)
			want := ""
			switch {
			case orderOK == "null":
				want = sqlstate.NullArgument
			case orderOK == "invalid":
				want = sqlstate.InvalidOrderID
			case secondWant == "any":
				want = "any"
			case secondWant != "":
				want = secondWant
			case orderID != existingOrder:
				want = sqlstate.UnknownOrder
			}

			before := takeSnapshot(ctx, t, tx)
			sp, err := tx.Begin(ctx)
			require.NoError(t, err)
			rows, err := sp.Query(ctx, query, args...)
			if err == nil {
				for rows.Next() {
				}
				rows.Close()
				err = rows.Err()
			}
			if err == nil {
				require.NoError(t, sp.Commit(ctx))
				require.Contains(t, []string{"", "any"}, want, "%s: succeeded, want %s", call, want)
				return true
			}
			code := apiError(t, call, err)
			require.NoError(t, sp.Rollback(ctx))
			require.Equal(t, before, takeSnapshot(ctx, t, tx), "%s failed with %s but wrote", call, code)
			if want != "" && want != "any" {
				require.Equal(t, want, code, call)
			}
			return false
		}

		run("order_info", `SELECT * FROM ordertimeout.order_info($1)`, []any{order}, "")
		run("order_events", `SELECT * FROM ordertimeout.order_events($1)`, []any{order}, "")
		run("order_payments", `SELECT * FROM ordertimeout.order_payments($1)`, []any{order}, "")
		if run("begin_payment", `SELECT * FROM ordertimeout.begin_payment($1, $2)`, []any{order, payment}, paymentWant) {
			var stored string
			require.NoError(t, tx.QueryRow(ctx, `SELECT payment_id FROM ordertimeout.order_payments($1) WHERE payment_id = $2`,
				orderID, paymentID).Scan(&stored))
			require.Equal(t, paymentID, stored, "payment_id stored verbatim")
		}
		run("fail_payment", `SELECT ordertimeout.fail_payment($1, $2)`, []any{order, payment}, paymentWant)
		run("confirm_payment", `SELECT ordertimeout.confirm_payment($1, $2)`, []any{order, payment}, paymentWant)
		run("extend_deadline", `SELECT * FROM ordertimeout.extend_deadline($1, interval '1 minute')`, []any{order}, "")
		run("cancel_order", `SELECT ordertimeout.cancel_order($1, $2)`, []any{order, payment}, reasonWant)

		// An id the API takes is stored as given and found again.
		if orderOK == "valid" {
			sp, err := tx.Begin(ctx)
			require.NoError(t, err)
			var stored string
			err = sp.QueryRow(ctx, `SELECT order_id FROM ordertimeout.create_order($1, '[{"sku": "A", "qty": 1}]')`, orderID).Scan(&stored)
			if err != nil {
				code := apiError(t, "create_order", err)
				require.Equal(t, existingOrder, orderID, "create_order(%q): %s", orderID, code)
				require.NoError(t, sp.Rollback(ctx))
				return
			}
			require.Equal(t, orderID, stored)
			require.NoError(t, sp.QueryRow(ctx, `SELECT order_id FROM ordertimeout.order_info($1)`, orderID).Scan(&stored))
			require.Equal(t, orderID, stored)
			require.NoError(t, sp.Commit(ctx))
		}
	})
}
