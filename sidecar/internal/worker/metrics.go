package worker

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/metrics"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/reconcile"
)

// Metrics counts what this sidecar's workers did. Its methods fit
// Deps.Outcome and Deps.Reconciled.
type Metrics struct {
	jobs, conflictsResolved, badAnswers *prometheus.CounterVec
	reconciled, reported                *prometheus.CounterVec
	lostCallbacks, mismatches           prometheus.Counter
}

// NewMetrics registers the workers' metrics on reg: ordertimeout_jobs_total,
// ordertimeout_conflicts_resolved_total, ordertimeout_gateway_bad_answers_total
// and ordertimeout_reconcile_*.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	counterVec := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	m := &Metrics{
		jobs: counterVec("ordertimeout_jobs_total",
			"River jobs this sidecar worked, by kind and outcome (e.g. payment_check paid, precancel_check cancelled, resolve_conflict reinstated or refunded, snoozed, error).",
			"kind", "outcome"),
		conflictsResolved: counterVec("ordertimeout_conflicts_resolved_total",
			"Late or double payments this sidecar resolved, by outcome (reinstated, refunded, manual_pending, already_resolved, another_refund: the gateway answered another refund id for a conflict already refunded; not_held: the gateway no longer holds the payment, resolved manual for a person; unconfirmed: it did not tell whether it holds the payment, partly_held: it holds part of it, other_amount: its record of the payment contradicts the amount recorded here; these three handed to a person, open; disputed, a payment under dispute at the gateway, is asked again later and not counted here).",
			"outcome"),
		badAnswers: counterVec("ordertimeout_gateway_bad_answers_total",
			"Gateway answers a job of this sidecar could not use (malformed, ambiguous, outside the contract, paid without the order's amount, or a payment id of another order or a value confirm_payment refuses), and requests not sent because they break the contract, by job kind: nothing changed, the job asks again later. Alert on any increase.",
			"kind"),
		reconciled: counterVec("ordertimeout_reconcile_transactions_total",
			"Gateway transactions this sidecar's continuous reconciliation judged, by outcome (ok, confirmed, late_payment, double_payment, amount_mismatch, known_conflict, amount_differs, refund_unknown, unknown_order, other_order).",
			"outcome"),
		reported: counterVec("ordertimeout_reconcile_reported_total",
			"Gateway transactions reported for a person, by outcome (amount_differs, refund_unknown, unknown_order, other_order): nothing in the database resolves them.",
			"outcome"),
		lostCallbacks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ordertimeout_reconcile_lost_callbacks_total",
			Help: "Payments this sidecar's reconciliation found at the gateway whose callback never came: confirmed on a live order, or a new conflict with cause reconcile. A direct measure of lost callbacks; alert on any increase.",
		}),
		mismatches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ordertimeout_reconcile_mismatches_total",
			Help: "Gateway transactions whose amount or currency differs from this database's (amount_differs, amount_mismatch).",
		}),
	}
	if err := metrics.Register(reg, m.jobs, m.conflictsResolved, m.badAnswers,
		m.reconciled, m.reported, m.lostCallbacks, m.mismatches); err != nil {
		return nil, err
	}
	return m, nil
}

// Outcome counts a job of kind that ended in outcome; a resolved conflict
// and a bad answer from the gateway are counted apart too.
func (m *Metrics) Outcome(kind, outcome string) {
	m.jobs.WithLabelValues(kind, outcome).Inc()
	if outcome == "bad_answer" || outcome == "bad_request" || outcome == lookupBadAnswer {
		m.badAnswers.WithLabelValues(kind).Inc()
	}
	if kind == (ResolveConflictArgs{}).Kind() {
		switch outcome {
		case "error", "snoozed", "interrupted", "throttled", "paused", "bad_answer", "bad_request", lookupBadAnswer, "disputed", "charged_back":
		default:
			m.conflictsResolved.WithLabelValues(outcome).Inc()
		}
	}
}

// Reconciled counts a gateway transaction reconciliation judged.
func (m *Metrics) Reconciled(outcome string) {
	m.reconciled.WithLabelValues(outcome).Inc()
	if reconcile.IsLostCallback(outcome) {
		m.lostCallbacks.Inc()
	}
	if reconcile.IsMismatch(outcome) {
		m.mismatches.Inc()
	}
	if reconcile.NeedsPerson(outcome) {
		m.reported.WithLabelValues(outcome).Inc()
	}
}
