package worker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/text"
	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
)

// ResolveConflictArgs resolves one conflict. The sidecar inserts it (package
// listener) for every conflict that needs it, after each wake-up on channel
// ordertimeout_conflict and each (re)connect; InsertOpts makes it unique by
// its arguments among live jobs, so there is one job per conflict at a time.
type ResolveConflictArgs struct {
	ConflictID int64 `json:"conflict_id"`
}

// Kind is "ordertimeout_resolve_conflict".
func (ResolveConflictArgs) Kind() string { return "ordertimeout_resolve_conflict" }

// InsertOpts puts the job in Queue, unique by its arguments while a job for
// the same conflict is pending, scheduled, available, running or retryable. A
// completed job does not count: a conflict left open by the manual policy and
// later claimed for a refund by a person gets a new job.
func (ResolveConflictArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, UniqueOpts: river.UniqueOpts{
		ByArgs: true,
		ByState: []rivertype.JobState{
			rivertype.JobStateAvailable,
			rivertype.JobStatePending,
			rivertype.JobStateRetryable,
			rivertype.JobStateRunning,
			rivertype.JobStateScheduled,
		},
	}}
}

// ResolveConflictWorker resolves a conflict by its late-payment policy: that
// of the method its payment was started with (payments.method, else the
// order's; payment_methods.late_payment), else settings.late_payment:
//
//   - reinstate: resolve_conflict(id, 'reinstate') takes the stock back and
//     marks the order paid; when that is impossible (SQLSTATE OT132: a payment
//     of another amount or currency, stock, coupon or points gone, or not a
//     late payment) the payment is refunded;
//   - refund: the payment is refunded;
//   - manual: nothing but a log line; the conflict stays open for a person
//     (see the open conflicts metric).
//
// Under reinstate and refund the gateway is asked first whether it still
// holds the payment (askHeld): one it no longer holds is resolved manual for
// a person, and one whose record here contradicts the gateway's, or (under
// reinstate, for a late payment) one it does not tell about after HeldAsks
// answers, is handed to a person (hand_over_conflict): open, and left alone
// from then on unless a person claims its refund.
//
// A refund is claimed in the database first: resolve_conflict(id, 'refund')
// moves the conflict to state refunding, after which nothing but the refund
// can end it (a reinstate by anyone is refused with OT134). Then the gateway
// refunds, with the payment id as idempotency key, and finish_refund records
// it. A job that fails anywhere after the claim (gateway down, connection
// lost, kill -9 between the refund and the commit) runs again, finds the
// conflict refunding and continues the same refund: the gateway refunds a key
// at most once, finish_refund records once. A conflict claimed by someone
// else (a person, another sidecar) is refunded the same way.
type ResolveConflictWorker struct {
	river.WorkerDefaults[ResolveConflictArgs]
	*Deps
}

// conflict is the row of ordertimeout.conflict_info.
type conflict struct {
	OrderID   string
	PaymentID string
	Kind      string
	Amount    *string
	Currency  *string
	State     string
	Policy    string
	// HandedOverWhy is set when the sidecar handed the conflict to a
	// person (hand_over_conflict).
	HandedOverWhy *string
}

// Work resolves one conflict.
func (w *ResolveConflictWorker) Work(ctx context.Context, job *river.Job[ResolveConflictArgs]) error {
	// A token of the gateway rate limit reserved in the last run, if any.
	ctx = w.gatewayTicket(ctx, job.JobRow)
	id := job.Args.ConflictID
	log := w.Logger.With("kind", job.Kind, "job_id", job.ID, "conflict_id", id)

	// A conflict resolved already, or unknown (its order purged since), has
	// nothing left to do.
	var c conflict
	found, err := readConflict(ctx, w.Pool, id, &c)
	if err != nil {
		return retry(ctx, w.Deps, job, true, fmt.Errorf("read conflict %d: %w", id, err))
	}
	if !found || c.State == "resolved" {
		w.outcome(job.Kind, "already_resolved")
		return nil
	}
	log = log.With("order_id", c.OrderID, "payment_id", c.PaymentID, "conflict", c.Kind)

	if c.State != "refunding" {
		policy := c.Policy
		switch policy {
		case "manual":
			log.Warn("conflict left open for manual resolution (late_payment policy manual)")
			w.outcome(job.Kind, "manual_pending")
			return nil
		case "reinstate", "refund":
		default:
			return retry(ctx, w.Deps, job, true, fmt.Errorf("unknown late payment policy %q", policy))
		}
		if c.HandedOverWhy != nil {
			// Handed to a person by an earlier run (a job queued before,
			// or woken by a notification): theirs until they resolve it or
			// claim its refund.
			log.Info("conflict handed to a person before: left to them", "why", *c.HandedOverWhy)
			w.outcome(job.Kind, "manual_pending")
			return nil
		}
		// The gateway is asked first whether it still holds the payment: a
		// person may have refunded it there since (CheckHeld). Only a late
		// payment under the reinstate policy, of an order still cancelled,
		// is reinstated (resolve_conflict refuses anything else, OT132);
		// everything else is refunded, and a refund is not even claimed
		// when the gateway says it no longer holds the money, or its record
		// of the payment contradicts the amount the refund would name.
		o, err := readOrderOf(ctx, w.Pool, c)
		var g gateway.Order
		if err == nil {
			g, err = askHeld(ctx, w.Gateway, c, o)
		}
		toRefund := policy != "reinstate" || c.Kind != "late_payment" || !o.cancelled
		// An answer that does not tell stops whatever the reinstate policy
		// does with a late payment (reinstated, or refunded when the order
		// was paid since: with the JSON contract, which answers for the
		// order, a payment still held and one a person refunded there
		// answer alike once another payment is named). It stops a refund
		// too when it is about this very payment (a driver that reads
		// payments by id, or the JSON contract naming it): pending, or
		// unknown to a driver that reads by id, the gateway would refuse
		// the refund for ever, the conflict claimed. Otherwise (the refund
		// policy, a double payment or a mismatch, answered for the order:
		// the JSON contract names the order's first payment for a double
		// payment) it does not: the refund goes on, and the gateway
		// refuses a refund of money it does not hold.
		doubtStops := (policy == "reinstate" && c.Kind == "late_payment") ||
			gateway.AnswersByPayment(w.Gateway) || g.PaymentID == c.PaymentID
		switch {
		case errors.Is(err, ErrNotHeld):
			// Neither reinstated nor refunded, also when the order was
			// paid since by another payment: a refund from here could
			// give the money back twice. The money left outside
			// ordertimeout (a person's refund at the gateway): the
			// conflict is handed to a person, resolution manual, with the
			// gateway's answer as its note.
			outcome, rerr := w.resolve(ctx, id, "manual", "sidecar: not reinstated nor refunded: "+err.Error())
			switch {
			case sqlstate.Is(rerr, sqlstate.ConflictResolved):
				w.outcome(job.Kind, "already_resolved")
				return nil
			case sqlstate.Is(rerr, sqlstate.ConflictRefunding):
				log.Info("conflict is being refunded already (claimed by a person): continuing that refund", "reason", err)
				toRefund = true
			case rerr != nil:
				return retry(ctx, w.Deps, job, true, rerr)
			default:
				log.Error("payment not reinstated nor refunded: the gateway no longer holds its money; handed to a person (resolution manual, the gateway's answer in its note)",
					"reason", err, "outcome", outcome)
				w.outcome(job.Kind, notHeld)
				return nil
			}
		case errors.Is(err, ErrPartlyHeld):
			// Part of it was given back there (a person's refund in part):
			// the rest is still held, so the conflict is not closed; a
			// refund of the amount recorded here would be refused, or give
			// back more than is held. A person settles the rest.
			return w.handOver(ctx, job, log, id, partlyHeld, "sidecar: not reinstated nor refunded: "+err.Error())
		case errors.Is(err, ErrOtherAmount):
			// A refund names the amount recorded here, which is not this
			// payment's at the gateway: it would give back part of it, or
			// be refused for ever with the conflict claimed. A person
			// settles it there.
			return w.handOver(ctx, job, log, id, otherAmount, "sidecar: not reinstated nor refunded: "+err.Error())
		case errors.Is(err, ErrOtherCurrency):
			log.Info("cannot reinstate, refunding instead", "reason", err)
			toRefund = true
		case errors.Is(err, ErrCannotTell) && !doubtStops:
			// A refund on a doubt, as before the gateway was asked: the
			// gateway refuses a refund of money it no longer holds (the
			// conflict then stays refunding, for a person), and a double
			// payment under the JSON contract always answers with the
			// order's first payment.
			if errors.Is(err, gateway.ErrBadAnswer) {
				w.outcome(job.Kind, "bad_answer")
			}
			log.Info("the gateway does not tell whether it still holds the payment: refunding it", "reason", err)
		case errors.Is(err, ErrCannotTell) && heldAsks(job.JobRow)+1 >= HeldAsks:
			// Neither reinstated nor refunded on a doubt: a refund of
			// money a person gave back at the gateway would stay
			// refunding for ever (the gateway refuses it), and with the
			// JSON contract a held payment and one refunded there answer
			// alike once another payment of the order is named. Handed to
			// a person, so that the next rescan does not ask again.
			if errors.Is(err, gateway.ErrBadAnswer) {
				w.outcome(job.Kind, "bad_answer")
			}
			return w.handOver(ctx, job, log, id, unconfirmed,
				"sidecar: not reinstated nor refunded: asked "+strconv.Itoa(HeldAsks)+" times: "+err.Error())
		case errors.Is(err, ErrCannotTell):
			// Counted on the job (its own count: snoozes for other
			// reasons, a throttle or an outage, do not use it up).
			if cerr := w.countHeldAsk(ctx, job.JobRow); cerr != nil {
				return retry(ctx, w.Deps, job, true, cerr)
			}
			return retry(ctx, w.Deps, job, true, err)
		case err != nil:
			// Unavailable or throttled, or the database: asked again
			// later.
			return retry(ctx, w.Deps, job, true, err)
		}
		if !toRefund {
			// In one transaction with a read of the conflict, as the
			// refund's claim: a confirmation that gave it another amount
			// while the gateway was asked (10.00 held, 12 confirmed since)
			// reinstates nothing, and the job asks again.
			outcome, _, changed, err := w.resolveChecked(ctx, id, "reinstate", c)
			if changed {
				return retry(ctx, w.Deps, job, true, fmt.Errorf("conflict %d got another amount or currency while the gateway was asked: asking again", id))
			}
			if sqlstate.Is(err, sqlstate.CannotReinstate) && c.Amount == nil {
				// A late payment recorded without its amount cannot be
				// reinstated: the gateway's answer above may give it
				// before the payment is refunded instead. Learned, the
				// conflict is read and tried once more.
				learned, lerr := w.learnAmount(ctx, job.Kind, log, c, g)
				if lerr != nil {
					return retry(ctx, w.Deps, job, true, lerr)
				}
				if learned {
					if found, rerr := readConflict(ctx, w.Pool, id, &c); rerr != nil || !found {
						return retry(ctx, w.Deps, job, true, cmp.Or(rerr, fmt.Errorf("conflict %d is gone: read again", id)))
					}
					// Learned from g itself: the amount the gateway
					// answered, the one compared with.
					outcome, _, changed, err = w.resolveChecked(ctx, id, "reinstate", c)
					if changed {
						return retry(ctx, w.Deps, job, true, fmt.Errorf("conflict %d got another amount or currency while the gateway was asked: asking again", id))
					}
				}
			}
			switch {
			case sqlstate.Is(err, sqlstate.CannotReinstate):
				log.Info("cannot reinstate, refunding instead", "reason", err)
			case sqlstate.Is(err, sqlstate.ConflictResolved):
				log.Info("conflict already resolved otherwise", "reason", err)
				w.outcome(job.Kind, "already_resolved")
				return nil
			case sqlstate.Is(err, sqlstate.ConflictRefunding):
				log.Info("conflict is being refunded already: continuing that refund")
			case err != nil:
				return retry(ctx, w.Deps, job, true, err)
			default:
				log.Info("late payment reinstated the order", "outcome", outcome)
				w.outcome(job.Kind, outcome)
				return nil
			}
		}

		// Claim the refund before the gateway is asked to make it, in one
		// transaction with a read of the conflict: a confirmation that
		// gave it another amount (or its first) while the gateway was
		// asked is asked about again, never refunded on the old answer.
		// The conflict as claimed is the one refunded: a refunding
		// conflict's amount no longer changes, and a retry sends the same
		// request under the same key.
		outcome, claimed, changed, err := w.resolveChecked(ctx, id, "refund", c)
		switch {
		case changed:
			return retry(ctx, w.Deps, job, true, fmt.Errorf("conflict %d got another amount or currency while the gateway was asked: asking again", id))
		case sqlstate.Is(err, sqlstate.ConflictResolved):
			log.Info("conflict already resolved otherwise", "reason", err)
			w.outcome(job.Kind, "already_resolved")
			return nil
		case err != nil:
			return retry(ctx, w.Deps, job, true, err)
		case outcome == "refunded":
			w.outcome(job.Kind, "already_resolved")
			return nil
		}
		c = claimed
	}
	return w.refund(ctx, job, log, id, c)
}

// learnAmount reads in g, the gateway's answer about the order of
// late-payment conflict c (recorded without an amount), the payment's
// amount, and when the gateway says it paid exactly the
// order's amount (in its currency), confirms it again with that amount, which
// the open conflict learns (confirm_payment): the one case where learning
// lets the payment be reinstated. It says whether the amount was learned.
// Anything else leaves the conflict as it is, and the payment is refunded
// whole as it always was: the gateway names none, gives another amount or
// none (a refund never carries an amount only a lookup said), or
// contradicts the payment's currency here (OT157, counted as a bad answer).
// (Answers that do not tell never reach it: the gateway check before the
// reinstatement asks again.) Errors bring the job back: a confirmation to be
// called again (40001: another transaction holds the conflict), the
// database.
func (w *ResolveConflictWorker) learnAmount(ctx context.Context, kind string, log *slog.Logger, c conflict, g gateway.Order) (bool, error) {
	if g.Status != gateway.StatusPaid || g.PaymentID != c.PaymentID || g.Amount == "" {
		log.Info("the gateway does not give the late payment's amount: refunding it whole",
			"gateway_status", g.Status, "gateway_payment_id", g.PaymentID)
		return false, nil
	}
	var exact bool
	if err := w.Pool.QueryRow(ctx,
		`SELECT coalesce(amount = $2::numeric AND ($3::text IS NULL OR currency IS NULL OR currency = $3::text), false)
		   FROM ordertimeout.order_info($1)`,
		c.OrderID, g.Amount.SQL(), g.Currency.SQL()).Scan(&exact); err != nil {
		return false, fmt.Errorf("read order %q: %w", c.OrderID, err)
	}
	if !exact {
		log.Info("the gateway's amount is not the order's: refunding the payment whole",
			"amount", string(g.Amount), "currency", string(g.Currency))
		return false, nil
	}
	result, err := confirmPayment(ctx, w.Pool, c.OrderID, c.PaymentID, g.Amount, g.Currency, nil) // recorded here: no paid_at rule
	if errors.Is(err, gateway.ErrBadAnswer) {
		log.Error("the gateway's amount or currency contradicts the payment here: refunding it whole", "error", err)
		w.outcome(kind, lookupBadAnswer)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if result != "conflict" {
		return false, nil
	}
	log.Info("late payment's amount learned from the gateway", "amount", string(g.Amount), "currency", string(g.Currency))
	return true, nil
}

// lookupBadAnswer is the outcome counted when the gateway's lookup of a late
// payment's amount was unusable: a bad answer (the job goes on, refunding
// the payment whole).
const lookupBadAnswer = "lookup_bad_answer"

// notHeld is the outcome counted when a late payment is neither reinstated
// nor refunded because the gateway no longer holds its money (ErrNotHeld):
// the conflict is handed to a person (resolution manual).
const notHeld = "not_held"

// heldAskKey is the key of the job's metadata that counts the answers that
// did not tell whether the gateway holds the late payment (ErrCannotTell).
const heldAskKey = "ordertimeout_held_asks"

// heldAsks is the job's count of such answers.
func heldAsks(job *rivertype.JobRow) int {
	var meta map[string]json.RawMessage
	_ = json.Unmarshal(job.Metadata, &meta)
	var n int
	_ = json.Unmarshal(meta[heldAskKey], &n)
	return n
}

// countHeldAsk adds one to the job's count of answers that did not tell,
// in its metadata, which River keeps across the snooze (as keepSlot's).
func (w *ResolveConflictWorker) countHeldAsk(ctx context.Context, job *rivertype.JobRow) error {
	_, err := w.Pool.Exec(ctx,
		`UPDATE river_job SET metadata = metadata || jsonb_build_object($2::text, $3::integer)
		  WHERE id = $1 AND state = 'running'`, job.ID, heldAskKey, heldAsks(job)+1)
	if err != nil {
		return fmt.Errorf("count the gateway's answer on job %d: %w", job.ID, err)
	}
	return nil
}

// unconfirmed is the outcome counted when a late payment is not reinstated
// because the gateway did not tell, HeldAsks times, whether it holds it
// (ErrCannotTell): the conflict is handed to a person (handOver).
const unconfirmed = "unconfirmed"

// partlyHeld is the outcome counted when a payment is neither reinstated nor
// refunded because the gateway holds only part of it (ErrPartlyHeld): the
// conflict is handed to a person (handOver).
const partlyHeld = "partly_held"

// otherAmount is the outcome counted when a payment is neither reinstated
// nor refunded because the gateway's record of it contradicts the amount
// recorded here (ErrOtherAmount): a refund would name an amount that is not
// the payment's. The conflict is handed to a person (handOver).
const otherAmount = "other_amount"

// readConflict reads what a resolution needs of conflict id into c.
//
// The amount is kept as confirm_payment was given it, which admits zeros
// beyond six decimal places (10.500000000, or 1050 / 100.0 computed in
// SQL): those are dropped, so that the refund follows the contract's grammar (at
// most six fraction digits) instead of being refused by the gateway client
// on every run. An amount of at most six places is sent as written, as it
// always was: a retry of a refund sent before sends the same request under
// the same key. CheckHeld reads a conflict with it too.
func readConflict(ctx context.Context, db rowQuerier, id int64, c *conflict) (bool, error) {
	return queryOne(ctx, db,
		`SELECT order_id, payment_id, kind,
		        (CASE WHEN scale(amount) > 6 THEN trim_scale(amount) ELSE amount END)::text,
		        currency, state, late_payment, handed_over_why
		   FROM ordertimeout.conflict_info($1)`,
		[]any{id}, &c.OrderID, &c.PaymentID, &c.Kind, &c.Amount, &c.Currency, &c.State, &c.Policy, &c.HandedOverWhy)
}

// refund makes the refund of a conflict claimed for one, and records it.
func (w *ResolveConflictWorker) refund(ctx context.Context, job *river.Job[ResolveConflictArgs], log *slog.Logger,
	id int64, c conflict) error {
	var amount gateway.Amount
	if c.Amount != nil {
		amount = gateway.Amount(*c.Amount)
	}
	r, err := w.Gateway.Refund(ctx, gateway.RefundRequest{
		OrderID:        c.OrderID,
		PaymentID:      c.PaymentID,
		Amount:         amount,
		IdempotencyKey: c.PaymentID,
	})
	if err != nil {
		return retry(ctx, w.Deps, job, true, fmt.Errorf("refund payment %q of conflict %d: %w", c.PaymentID, id, err))
	}
	var outcome string
	err = w.Pool.QueryRow(ctx, "SELECT ordertimeout.finish_refund($1, $2)", id, r.RefundID).Scan(&outcome)
	if sqlstate.Is(err, sqlstate.RefundOfAnother) {
		// The gateway answered with the refund of another payment: this
		// payment may not be refunded. Nothing was recorded; the conflict
		// stays refunding, and the job asks again later, logged as an error
		// each time, until a person has looked at the gateway.
		return retry(ctx, w.Deps, job, true, fmt.Errorf("record refund %q of conflict %d: %w: %w", r.RefundID, id, err, gateway.ErrBadAnswer))
	}
	if sqlstate.Is(err, sqlstate.AnotherRefund) {
		// The conflict was recorded refunded by another refund id: the
		// gateway made a second refund of this payment, or answered our key
		// with another id. Asking again would get the same answer; a person
		// must look at the money (the conflict keeps its first refund).
		log.Error("the gateway answered another refund id for a conflict already refunded: the payment may have been refunded twice",
			"refund_id", r.RefundID, "error", err)
		w.outcome(job.Kind, "another_refund")
		return nil
	}
	if err != nil {
		// Retried from the start: the conflict is still refunding, and the
		// same key gets the same refund from the gateway.
		return retry(ctx, w.Deps, job, true, fmt.Errorf("record refund %q of conflict %d: %w", r.RefundID, id, err))
	}
	log.Info("payment refunded", "refund_id", r.RefundID, "outcome", outcome)
	w.outcome(job.Kind, outcome)
	return nil
}

// resolve calls resolve_conflict with resolution and, unless note is empty,
// a note, made plain text of at most the 500 characters resolve_conflict
// keeps (text.Note: a gateway's answer quoted in it is the gateway's text).
func (w *ResolveConflictWorker) resolve(ctx context.Context, id int64, resolution string, note ...string) (string, error) {
	var n any
	if len(note) > 0 && note[0] != "" {
		n = text.Note(note[0], 500)
	}
	var outcome string
	err := w.Pool.QueryRow(ctx, "SELECT ordertimeout.resolve_conflict($1, $2, $3)", id, resolution, n).Scan(&outcome)
	if err != nil {
		return "", fmt.Errorf("resolve conflict %d as %s: %w", id, resolution, err)
	}
	return outcome, nil
}

// resolveChecked resolves conflict id as resolution (reinstate, or refund:
// the claim), committed only when the conflict's amount and currency are
// still those of asked, the conflict as the gateway was asked about it; when
// they are not, nothing is resolved and changed is true. It returns the
// conflict as read in that transaction (what was resolved). resolve_conflict
// locks the conflict first, and a confirmation learns an amount only on a
// conflict it can lock (SKIP LOCKED, else 40001): the read after it is what
// is committed.
func (w *ResolveConflictWorker) resolveChecked(ctx context.Context, id int64, resolution string, asked conflict) (
	outcome string, now conflict, changed bool, err error) {
	tx, err := w.Pool.Begin(ctx)
	if err != nil {
		return "", now, false, fmt.Errorf("resolve conflict %d as %s: %w", id, resolution, err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after a commit, nothing to roll back
	if err := tx.QueryRow(ctx, "SELECT ordertimeout.resolve_conflict($1, $2)", id, resolution).Scan(&outcome); err != nil {
		return "", now, false, fmt.Errorf("resolve conflict %d as %s: %w", id, resolution, err)
	}
	found, err := readConflict(ctx, tx, id, &now)
	if err != nil || !found {
		return "", now, false, cmp.Or(err, fmt.Errorf("conflict %d is gone", id))
	}
	if !sameText(now.Amount, asked.Amount) || !sameText(now.Currency, asked.Currency) {
		return "", now, true, nil
	}
	if err := tx.Commit(ctx); err != nil {
		return "", now, false, fmt.Errorf("resolve conflict %d as %s: %w", id, resolution, err)
	}
	return outcome, now, false, nil
}

// sameText reports whether a and b are both nil or the same text.
func sameText(a, b *string) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// handOver hands open conflict id to a person with hand_over_conflict and
// why (made plain text of at most 500 characters, as resolve's note), and
// counts outcome: the conflict stays open, neither reinstated nor refunded,
// and the sidecar leaves it alone from then on (conflicts_to_resolve no
// longer lists it) unless a person claims its refund. A conflict resolved
// meanwhile has nothing left to do; one claimed for a refund meanwhile (by a
// person) is refunded, as every claimed refund is.
func (w *ResolveConflictWorker) handOver(ctx context.Context, job *river.Job[ResolveConflictArgs], log *slog.Logger,
	id int64, outcome, why string) error {
	why = text.Note(why, 500)
	var got string
	err := w.Pool.QueryRow(ctx, "SELECT ordertimeout.hand_over_conflict($1, $2)", id, why).Scan(&got)
	switch {
	case sqlstate.Is(err, sqlstate.ConflictResolved):
		w.outcome(job.Kind, "already_resolved")
		return nil
	case sqlstate.Is(err, sqlstate.ConflictRefunding):
		var c conflict
		found, rerr := readConflict(ctx, w.Pool, id, &c)
		if rerr != nil || !found {
			return retry(ctx, w.Deps, job, true, cmp.Or(rerr, fmt.Errorf("conflict %d is gone: read again", id)))
		}
		log.Info("conflict claimed for a refund meanwhile (by a person): refunding it")
		return w.refund(ctx, job, log, id, c)
	case err != nil:
		return retry(ctx, w.Deps, job, true, fmt.Errorf("hand conflict %d to a person: %w", id, err))
	}
	log.Error("payment not reinstated nor refunded: handed to a person (the conflict stays open; the sidecar no longer acts on it)",
		"why", why, "outcome", outcome)
	w.outcome(job.Kind, outcome)
	return nil
}
