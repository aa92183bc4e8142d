package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
)

// Queue is the River queue of every job kind in this package. The sidecar's
// River client serves it; the timer queue (timer.Name, ordertimeout_expire)
// it must never serve.
const Queue = "ordertimeout"

// WebhookQueue is the River queue of webhook deliveries (events and
// reminders), served by workers of their own: a receiver that hangs holds
// up only webhooks, never the gateway jobs of Queue.
const WebhookQueue = "ordertimeout_webhook"

// Snooze pauses: the first snooze waits about minSnooze, each further one
// twice as long, up to maxSnooze.
const (
	minSnooze = time.Second
	maxSnooze = 5 * time.Minute
)

// disputedSnooze is how long a job about a payment under dispute snoozes.
const disputedSnooze = time.Hour

// pausedSnooze is how long a job that waits for the end of a pause snoozes.
const pausedSnooze = 5 * time.Second

// cancelsPaused reports whether timeout cancels are paused
// (settings.paused).
func cancelsPaused(ctx context.Context, db *pgxpool.Pool) (bool, error) {
	var paused bool
	if err := db.QueryRow(ctx, "SELECT paused FROM ordertimeout.settings").Scan(&paused); err != nil {
		return false, fmt.Errorf("read whether cancels are paused: %w", err)
	}
	return paused, nil
}

// Deps are what the workers share. Pool and Gateway are required.
type Deps struct {
	// Pool runs the ordertimeout API calls.
	Pool *pgxpool.Pool

	// Gateway is the payment gateway's driver (gateway.Client for the JSON
	// contract, package stripe for Stripe), rate-limited or not.
	Gateway gateway.Gateway

	// WebhookURL receives the webhooks. If empty while settings.webhooks is
	// on, webhook jobs fail (and are retried) until it is set.
	WebhookURL string

	// WebhookSecret signs the webhooks (see package webhook).
	WebhookSecret string

	// WebhookClient sends the webhooks. If nil, a client with a 10 second
	// timeout is used. Register makes it follow no redirect: a 3xx is a
	// failed delivery, and the signed body goes nowhere but WebhookURL.
	WebhookClient *http.Client

	// Logger logs what the workers decide. If nil, slog.Default() is used.
	Logger *slog.Logger

	// Now, if set, is the database's time (package dbclock), used for the
	// times the workers stamp on webhooks. If nil, the host's clock.
	Now func() time.Time

	// Outcome, if set, is called with a job's kind and what it ended in
	// ("paid", "cancelled", "refunded", "snoozed", ...), for metrics.
	Outcome func(kind, outcome string)

	// Reconciled, if set, is called with the outcome of every transaction
	// ReconcileWorker reconciled (reconcile_payments' outcome), for metrics.
	Reconciled func(outcome string)

	// SlotsFrom, if set, is the moment (the database's clock) this process
	// started working jobs: a gateway token a job holds that came due before
	// it (reserved by an earlier process, its moment passed during the
	// restart) is not used, and the job reserves another, after the tokens
	// still to come (ReservedGatewayTokens). Sent late, all at once, such
	// tokens would go out on top of the rate. Set it before River starts.
	SlotsFrom time.Time

	// SlotGrace is how late a job may come back for the gateway token it
	// holds and still use it; a later job reserves another token, after
	// the others. Jobs come back late together when River's leader was
	// missing for a while (a restart: the snoozed jobs wait for the new
	// leader's first scheduler pass), and their tokens, sent at once, go
	// out on top of the rate: as many as the rate makes in SlotGrace. Set
	// it to what the rate limit lets through at once (gateway.Limited's
	// Refill), but not below how late a job normally comes (about River's
	// fetch poll interval), or every such job wastes its token. If zero, or
	// more than MaxSlotGrace, MaxSlotGrace.
	SlotGrace time.Duration

	// ReconcileOverlap and ReconcileLookback tune ReconcileWorker; if zero,
	// DefaultReconcileOverlap and DefaultReconcileLookback.
	ReconcileOverlap  time.Duration
	ReconcileLookback time.Duration
}

// Register adds a worker for every job kind of this package to workers.
func Register(workers *river.Workers, d *Deps) error {
	if d.Pool == nil || d.Gateway == nil {
		return errors.New("register workers: Pool and Gateway are required")
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	client := &http.Client{Timeout: 10 * time.Second}
	if d.WebhookClient != nil {
		c := *d.WebhookClient
		client = &c
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	d.WebhookClient = client
	for _, add := range []func() error{
		func() error { return river.AddWorkerSafely(workers, &PaymentCheckWorker{Deps: d}) },
		func() error { return river.AddWorkerSafely(workers, &PrecancelCheckWorker{Deps: d}) },
		func() error { return river.AddWorkerSafely(workers, &GatewayCloseWorker{Deps: d}) },
		func() error { return river.AddWorkerSafely(workers, &ResolveConflictWorker{Deps: d}) },
		func() error { return river.AddWorkerSafely(workers, &WebhookWorker{Deps: d}) },
		func() error { return river.AddWorkerSafely(workers, &ReconcileWorker{Deps: d}) },
	} {
		if err := add(); err != nil {
			return fmt.Errorf("register workers: %w", err)
		}
	}
	return nil
}

func (d *Deps) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

func (d *Deps) outcome(kind, outcome string) {
	if d.Outcome != nil {
		d.Outcome(kind, outcome)
	}
}

// errUnknownOrder is returned for an order the database does not know.
var errUnknownOrder = errors.New("order is unknown")

// orderState is the part of ordertimeout.order_info the workers decide on.
type orderState struct {
	Status    string
	Version   int
	CreatedAt time.Time
	ExpireAt  time.Time
	// Expired: expire_at has passed by the database's clock (the buyer can
	// no longer begin a payment).
	Expired bool
	// Amount is the order's amount as text, nil if it has none.
	Amount *string
	// GatewayExpiry is how long until the expiry the shop gave the gateway
	// (gateway_expire_at) by the database's clock, 0 when it has passed;
	// nil when the order has none.
	GatewayExpiry *time.Duration
}

func loadOrder(ctx context.Context, db *pgxpool.Pool, orderID string) (orderState, error) {
	var st orderState
	var gwLeft *float64
	err := db.QueryRow(ctx,
		`SELECT status, deadline_version, created_at, expire_at, clock_timestamp() >= expire_at, amount::text,
		        CASE WHEN gateway_expire_at IS NOT NULL -- greatest() ignores a NULL
		             THEN extract(epoch FROM greatest(gateway_expire_at - clock_timestamp(), interval '0'))::float8
		        END
		   FROM ordertimeout.order_info($1)`,
		orderID).Scan(&st.Status, &st.Version, &st.CreatedAt, &st.ExpireAt, &st.Expired, &st.Amount, &gwLeft)
	if gwLeft != nil {
		d := time.Duration(*gwLeft * float64(time.Second))
		st.GatewayExpiry = &d
	}
	if sqlstate.Is(err, sqlstate.UnknownOrder) {
		return orderState{}, fmt.Errorf("read order %q: %w", orderID, errUnknownOrder)
	}
	if err != nil {
		return orderState{}, fmt.Errorf("read order %q: %w", orderID, err)
	}
	return st, nil
}

// gatewayRef names the order at the gateway: its id, the payment ids
// recorded for it, oldest first (a gateway keyed by its own payment
// objects, Stripe, needs them), and createdAt, when it was created (the
// caller's loadOrder read it; zero when it did not), which only a driver
// that looks the order up by its id without payment ids uses.
func gatewayRef(ctx context.Context, db *pgxpool.Pool, orderID string, createdAt time.Time) (gateway.Ref, error) {
	ref := gateway.Ref{OrderID: orderID, CreatedAt: createdAt}
	rows, err := db.Query(ctx, "SELECT payment_id FROM ordertimeout.order_payments($1)", orderID)
	if err != nil {
		return ref, fmt.Errorf("read payments of order %q: %w", orderID, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if sqlstate.Is(err, sqlstate.UnknownOrder) {
		return ref, fmt.Errorf("read payments of order %q: %w", orderID, errUnknownOrder)
	}
	if err != nil {
		return ref, fmt.Errorf("read payments of order %q: %w", orderID, err)
	}
	ref.PaymentIDs = ids
	return ref, nil
}

// NoneAsks is how many times a check asks the gateway about an order that
// has no gateway expiry (gateway_expire_at) before it takes an answer of
// "none" for "not paid".
const NoneAsks = 3

// noneIsFinal decides what a check does with the answer "none" (the gateway
// knows no payment for the order: Alipay's TRADE_NOT_EXIST before the QR
// code is scanned). It is unknown, never unpaid, while the gateway may still
// take a payment. The check acts on it as "not paid" only:
//
//   - once the expiry the shop gave the gateway (gateway_expire_at) has
//     passed by the database's clock: the gateway takes no payment after
//     it; before it, the check snoozes until it passes;
//   - for an order without one, once the job has run at least NoneAsks
//     times, with the doubling pause between. The job's snoozes count the
//     runs, so a run that met a down gateway or the rate limit counts too:
//     after an outage, a single "none" may be enough.
//
// Acting on it is safe either way: a cancel is followed by a gateway close,
// and money that arrives later anyway becomes a late-payment conflict.
func noneIsFinal(job *rivertype.JobRow, st orderState) (final bool, pause time.Duration) {
	if st.GatewayExpiry != nil {
		if *st.GatewayExpiry <= 0 {
			return true, 0
		}
		return false, min(*st.GatewayExpiry+minSnooze, maxSnooze)
	}
	if snoozes(job)+1 >= NoneAsks {
		return true, 0
	}
	return false, snoozeFor(job)
}

// confirmPaid confirms a payment the gateway says is paid (a query or a
// close answered "paid"; g is the answer, a close's as an Order), by two
// rules. The sidecar never confirms an order that has an amount without the
// gateway's amount: such an answer is a bad answer (gateway.ErrBadAnswer),
// nothing is confirmed, and the job asks again later. A payment of an
// earlier order under the same id (earlierOrders; and, told the answer's
// paid_at, the database by the purge of an earlier order under the id, OT178)
// is not this order's: the answer is notOurs, and nothing is confirmed. st is the order as read
// before asking, ref what the gateway was asked about.
func confirmPaid(ctx context.Context, db *pgxpool.Pool, ref gateway.Ref, st orderState, g gateway.Order) (string, error) {
	// Not this order's money, whatever the answer says of its amount.
	if earlierOrders(st, ref, g) {
		return notOurs, nil
	}
	if st.Amount != nil && g.Amount == "" {
		return "", fmt.Errorf("gateway says order %q is paid by %q but gives no amount, and the order's amount is %s: not confirmed: %w",
			ref.OrderID, g.PaymentID, *st.Amount, gateway.ErrBadAnswer)
	}
	return confirmPayment(ctx, db, ref.OrderID, g.PaymentID, g.Amount, g.Currency, g.PaidAt)
}

// notOurs is confirmPayment's answer for a payment of a purged order, and
// confirmPaid's for a payment taken before the order was created.
const notOurs = "not_ours"

// earlierOrders reports whether the gateway's paid answer g is about a
// payment taken before the order was created, by more than
// gateway.ClockSkew, and
// not one recorded for the order (ref.PaymentIDs: begun by begin_payment,
// or confirmed): an earlier order's under the same order id, one purged
// here whose payment's callback never came (a gateway keyed by the
// merchant's order id answers about it for as long as it keeps it). Such a
// payment must not pay the new order. A gateway that does not say when it
// took the payment (no paid_at) is taken at its word, and so is one whose
// paid_at is before gateway.NoTimeBefore: an adapter's zero time (Go's year 1,
// Unix's 1970) that means it does not know.
func earlierOrders(st orderState, ref gateway.Ref, g gateway.Order) bool {
	if g.PaidAt == nil || !gateway.Known(g.PaidAt.Time) || slices.Contains(ref.PaymentIDs, g.PaymentID) {
		return false
	}
	return g.PaidAt.Before(st.CreatedAt.Add(-gateway.ClockSkew))
}

// confirmPayment calls ordertimeout.confirm_payment with the gateway's
// amount and currency (either may be unknown: the database then takes the
// order's currency): "paid" or "conflict". A payment id, amount or currency
// the database refuses (SQLSTATE OT121, OT126, OT128), a payment id that
// belongs to another order (OT124), and an amount or currency other than a
// payment already confirmed here has (OT157) came from the gateway's answer,
// so it is a bad answer too: counted, logged as an error, and asked again later like
// any other, not handed to River's retries as a database error.
//
// A payment of a purged order (OT176) is not this order's money: the gateway
// reports the old order's payment under an order id that a new order has
// taken. The answer is notOurs, with no error: nothing is recorded, and the
// caller goes on as for an order the gateway holds no payment of (asking
// again would get the same answer, forever).
func confirmPayment(ctx context.Context, db *pgxpool.Pool, orderID, paymentID string, amount gateway.Amount, currency gateway.Currency, paidAt *gateway.Timestamp) (string, error) {
	var result string
	// The gateway's time of the payment, when it says one: the database
	// refuses a payment it has not seen for the order that was taken before
	// the order could have had it (OT178), also by the purge of an earlier
	// order under the id, which the worker cannot see.
	var at *time.Time
	if paidAt != nil && paidAt.Err == nil && gateway.Known(paidAt.Time) {
		at = &paidAt.Time
	}
	err := db.QueryRow(ctx, "SELECT ordertimeout.confirm_payment($1, $2, $3::numeric, $4::text, $5::timestamptz)",
		orderID, paymentID, amount.SQL(), currency.SQL(), at).Scan(&result)
	if sqlstate.Is(err, sqlstate.PaymentOfPurgedOrder, sqlstate.EarlierOrdersPayment) {
		return notOurs, nil
	}
	if sqlstate.Is(err, sqlstate.InvalidPaymentID, sqlstate.InvalidAmount, sqlstate.InvalidCurrency, sqlstate.PaymentOfOtherOrder, sqlstate.OtherMoneyForPayment, sqlstate.InvalidPaidAt) {
		return "", fmt.Errorf("confirm payment %q of order %q: the database refuses the gateway's answer: %w: %w", paymentID, orderID, err, gateway.ErrBadAnswer)
	}
	if err != nil {
		return "", fmt.Errorf("confirm payment %q of order %q: %w", paymentID, orderID, err)
	}
	return result, nil
}

// retry turns err into what Work returns. The job snoozes when the gateway is
// unavailable or gave a bad answer, when the sidecar is stopping (the job is
// handed back at once; not when the job's own timeout ended it), and on the
// last attempt of a job that must never be discarded; otherwise River
// records err and retries with its backoff.
//
// A bad answer (gateway.ErrBadAnswer) says nothing about the money: nothing
// was changed, and asking again later is all that can be done. The job
// snoozes with the doubling pause of snoozeFor, at most maxSnooze, so it is
// neither discarded nor retried in a tight loop; each time an error line
// names the order and what was wrong, and the outcome "bad_answer" is counted
// (metric ordertimeout_gateway_bad_answers_total): alert on it.
func retry[T river.JobArgs](ctx context.Context, d *Deps, job *river.Job[T], neverDiscard bool, err error) error {
	kind := job.Kind
	switch {
	case ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
		// The sidecar is stopping: hand the job back at once. A job that its
		// timeout (--job-timeout) ended is not stopping: it goes on below
		// like any other failure (a gateway call it ended is unavailable,
		// and snoozes with the doubling pause; anything else is an attempt
		// River counts), never again at once and forever.
		d.outcome(kind, "interrupted")
		return river.JobSnooze(0)
	case sqlstate.Is(err, sqlstate.Paused):
		// Timeout cancels are paused: ask again after the pause.
		d.outcome(kind, "paused")
		return river.JobSnooze(pausedSnooze)
	case errors.Is(err, gateway.ErrThrottled):
		var te *gateway.ThrottledError
		if errors.As(err, &te) && te.Reserved {
			// The rate limit reserved a token for the job (gatewayTicket):
			// record it on the job and come back for it.
			pause := reservedSnooze(te.RetryAfter)
			if kerr := d.keepSlot(ctx, job.JobRow, te.RetryAfter); kerr != nil {
				// The token is lost; the next run reserves another.
				d.Logger.Warn("gateway rate limit: could not record the reserved token", "kind", kind, "job_id", job.ID, "error", kerr)
			}
			d.Logger.Debug("gateway rate limit reached, token reserved", "kind", kind, "job_id", job.ID, "due_in", te.RetryAfter, "snooze", pause)
			d.outcome(kind, "throttled")
			return river.JobSnooze(pause)
		}
		// The rate limit holds the call back: come back when a token is
		// about free, with jitter so that a backlog spreads out.
		pause := time.Second
		if te != nil {
			pause = max(te.RetryAfter, 10*time.Millisecond)
		}
		pause += time.Duration(rand.Int64N(int64(pause)/10 + 1))
		d.Logger.Debug("gateway rate limit reached, asking later", "kind", kind, "job_id", job.ID, "snooze", pause)
		d.outcome(kind, "throttled")
		return river.JobSnooze(pause)
	case errors.Is(err, gateway.ErrChargedBack):
		// A refund claimed before a dispute was lost: nothing is sent (how
		// much the bank took back cannot be told), and the conflict stays
		// refunding for a person (finish_refund once settled at the
		// gateway). Asked again hourly, logged each time.
		pause := jitter(disputedSnooze)
		d.Logger.Error("payment taken back by a dispute lost: not refunded; a person settles it at the gateway and records it with finish_refund",
			"kind", kind, "job_id", job.ID, "args", string(job.EncodedArgs), "snooze", pause, "reason", err)
		d.outcome(kind, "charged_back")
		return river.JobSnooze(pause)
	case errors.Is(err, gateway.ErrDisputed):
		// Not an outage: a dispute (a chargeback) may still take the
		// payment back, and what the gateway holds of it is known once it
		// closes, which can take weeks: asked again every disputedSnooze
		// (the doubling pause's 5 minutes would be about 300 calls a day
		// per disputed payment, each taking a token of the rate limit).
		pause := jitter(disputedSnooze)
		d.Logger.Info("payment under dispute at the gateway: nothing reinstated or refunded until it closes; asking again later",
			"kind", kind, "job_id", job.ID, "args", string(job.EncodedArgs), "snooze", pause, "reason", err)
		d.outcome(kind, "disputed")
		return river.JobSnooze(pause)
	case errors.Is(err, gateway.ErrUnavailable):
		pause := snoozeFor(job.JobRow)
		d.Logger.Warn("gateway unavailable, asking again later", "kind", kind, "job_id", job.ID, "snooze", pause, "error", err)
		d.outcome(kind, "snoozed")
		return river.JobSnooze(pause)
	case errors.Is(err, gateway.ErrBadAnswer):
		pause := snoozeFor(job.JobRow)
		var about struct {
			OrderID    string `json:"order_id"`
			ConflictID int64  `json:"conflict_id"`
		}
		_ = json.Unmarshal(job.EncodedArgs, &about)
		attrs := []any{"kind", kind, "job_id", job.ID}
		if about.OrderID != "" {
			attrs = append(attrs, "order_id", about.OrderID)
		}
		if about.ConflictID != 0 {
			attrs = append(attrs, "conflict_id", about.ConflictID)
		}
		d.Logger.Error("gateway gave a bad answer: nothing changed, asking again later",
			append(attrs, "snooze", pause, "error", err)...)
		d.outcome(kind, "bad_answer")
		return river.JobSnooze(pause)
	case errors.Is(err, gateway.ErrBadRequest):
		// Nothing was sent; a person must look (the data in the database
		// breaks the gateway contract). Asking again later, like a bad
		// answer, keeps the job without a tight loop.
		pause := snoozeFor(job.JobRow)
		d.Logger.Error("request to the gateway not sent: it breaks the contract; asking again later",
			"kind", kind, "job_id", job.ID, "args", string(job.EncodedArgs), "snooze", pause, "error", err)
		d.outcome(kind, "bad_request")
		return river.JobSnooze(pause)
	case neverDiscard && job.Attempt >= job.MaxAttempts:
		pause := snoozeFor(job.JobRow)
		d.Logger.Error("last attempt failed, snoozing instead of discarding", "kind", kind, "job_id", job.ID, "snooze", pause, "error", err)
		d.outcome(kind, "snoozed")
		return river.JobSnooze(pause)
	default:
		d.outcome(kind, "error")
		return err
	}
}

// snoozeFor returns the pause before a snoozed job runs again: doubling with
// each snooze recorded on the job, with 10% jitter so that many jobs snoozed
// together do not come back together.
func snoozeFor(job *rivertype.JobRow) time.Duration {
	return jitter(min(minSnooze<<min(snoozes(job), 16), maxSnooze))
}

// jitter is d with up to 10% more, at random.
func jitter(d time.Duration) time.Duration {
	return d + time.Duration(rand.Int64N(int64(d)/10+1))
}

// snoozes is how many times River recorded the job snoozed.
func snoozes(job *rivertype.JobRow) int {
	var meta struct {
		Snoozes int `json:"snoozes"`
	}
	_ = json.Unmarshal(job.Metadata, &meta)
	return meta.Snoozes
}

// rowQuerier is a pool or a transaction.
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// queryOne runs a query expected to return at most one row; found is false
// when it returns none.
func queryOne(ctx context.Context, db rowQuerier, sql string, args []any, dest ...any) (found bool, err error) {
	err = db.QueryRow(ctx, sql, args...).Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}
