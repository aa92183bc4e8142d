package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Outcomes of reconcile_payments (see the README's table).
const (
	OutcomeOK               = "ok"
	OutcomeConfirmed        = "confirmed"
	OutcomeLatePayment      = "late_payment"
	OutcomeDoublePayment    = "double_payment"
	OutcomeAmountMismatch   = "amount_mismatch"
	OutcomeKnownConflict    = "known_conflict"
	OutcomeAmountDiffers    = "amount_differs"
	OutcomeRefundUnknown    = "refund_unknown"
	OutcomeUnknownOrder     = "unknown_order"
	OutcomeOtherOrder       = "other_order"
	OutcomeMissingAtGateway = "missing_at_gateway"
)

// IsNewConflict reports whether outcome is a conflict this reconciliation
// recorded (cause reconcile): money the database had not seen, on an order
// that cannot take it. The conflict flow resolves it by policy.
func IsNewConflict(outcome string) bool {
	switch outcome {
	case OutcomeLatePayment, OutcomeDoublePayment, OutcomeAmountMismatch:
		return true
	}
	return false
}

// IsLostCallback reports whether outcome is money found only through the
// gateway's records: a payment now confirmed or a new conflict.
func IsLostCallback(outcome string) bool {
	return outcome == OutcomeConfirmed || IsNewConflict(outcome)
}

// IsMismatch reports whether outcome says the amounts or currencies differ.
func IsMismatch(outcome string) bool {
	return outcome == OutcomeAmountDiffers || outcome == OutcomeAmountMismatch
}

// NeedsPerson reports whether outcome is reported for a person to look at:
// nothing in the database resolves it.
func NeedsPerson(outcome string) bool {
	switch outcome {
	case OutcomeAmountDiffers, OutcomeRefundUnknown, OutcomeUnknownOrder, OutcomeOtherOrder, OutcomeMissingAtGateway:
		return true
	}
	return false
}

// Row is one row of reconcile_payments' answer.
type Row struct {
	// Line is the transaction's file line (0 for missing_at_gateway rows).
	Line      int
	PaymentID string
	OrderID   string
	Outcome   string
	Detail    string
}

// Apply calls ordertimeout.reconcile_payments in tx with the transactions of
// the period [from, to). With reportMissing, payments confirmed here in the
// period that the transactions do not list are reported; with a source
// (empty: none), its watermark advances to to. Nothing is committed: the
// caller commits tx (or rolls it back for a dry run). An error of the
// database (OT171 names the file line) means nothing was applied.
func Apply(ctx context.Context, tx pgx.Tx, ts []Transaction, from, to time.Time, reportMissing bool, source string) ([]Row, error) {
	if len(ts) > MaxRows {
		return nil, fmt.Errorf("reconcile: %d transactions, at most %d per call", len(ts), MaxRows)
	}
	if ts == nil {
		ts = []Transaction{}
	}
	body, err := json.Marshal(ts)
	if err != nil {
		return nil, fmt.Errorf("reconcile: encode transactions: %w", err)
	}
	var src any
	if source != "" {
		src = source
	}
	rows, err := tx.Query(ctx, `
SELECT coalesce(line, 0), payment_id, order_id, outcome, coalesce(detail, '')
FROM ordertimeout.reconcile_payments($1::jsonb, $2, $3, $4, $5::text)`, string(body), from, to, reportMissing, src)
	if err != nil {
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Row, error) {
		var row Row
		err := r.Scan(&row.Line, &row.PaymentID, &row.OrderID, &row.Outcome, &row.Detail)
		return row, err
	})
	if err != nil {
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	return out, nil
}

// Report is the result of a reconciliation, for people.
type Report struct {
	Rows []Row
	// Skipped counts file rows left out (see File.Skipped).
	Skipped int
	// RefundIDs are the refund ids of refund rows, by file line.
	RefundIDs map[int]string
}

// Counts returns how many rows had each outcome.
func (r *Report) Counts() map[string]int {
	c := map[string]int{}
	for _, row := range r.Rows {
		c[row.Outcome]++
	}
	return c
}

// Attention returns the rows a person should read: the conflicts this run
// recorded and every row NeedsPerson.
func (r *Report) Attention() []Row {
	var out []Row
	for _, row := range r.Rows {
		if IsNewConflict(row.Outcome) || NeedsPerson(row.Outcome) {
			out = append(out, row)
		}
	}
	return out
}

// NeedsPerson reports whether any row needs a person (Attention is not
// empty).
func (r *Report) NeedsPerson() bool { return len(r.Attention()) > 0 }

// Write prints the counts per outcome, then the rows that need a person.
// Ids and details are printed quoted (Go syntax) when they hold anything but
// plain printable text, so a file cannot forge report lines.
func (r *Report) Write(w io.Writer) error {
	var b strings.Builder
	counts := r.Counts()
	names := make([]string, 0, len(counts))
	for k := range counts {
		names = append(names, k)
	}
	sort.Strings(names)
	fmt.Fprintf(&b, "%d transactions reconciled\n", len(r.Rows)-counts[OutcomeMissingAtGateway])
	for _, k := range names {
		fmt.Fprintf(&b, "  %-20s %d\n", k, counts[k])
	}
	if r.Skipped > 0 {
		fmt.Fprintf(&b, "  %-20s %d\n", "skipped (revoked)", r.Skipped)
	}
	att := r.Attention()
	if len(att) == 0 {
		b.WriteString("nothing needs a person\n")
	} else {
		fmt.Fprintf(&b, "%d rows need a person:\n", len(att))
		for _, row := range att {
			line := "-"
			if row.Line > 0 {
				line = fmt.Sprint(row.Line)
			}
			fmt.Fprintf(&b, "  line %-6s %-18s order %s payment %s", line, row.Outcome, safe(row.OrderID), safe(row.PaymentID))
			if id := r.RefundIDs[row.Line]; id != "" && row.Line > 0 {
				fmt.Fprintf(&b, " refund %s", safe(id))
			}
			if row.Detail != "" {
				fmt.Fprintf(&b, ": %s", safe(row.Detail))
			}
			b.WriteByte('\n')
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// safe returns s as is when it is plain printable text without quotes,
// otherwise quoted in Go syntax.
func safe(s string) string {
	for _, c := range s {
		if c < 0x20 || c == 0x7f || c == '"' || (c >= 0x80 && c < 0xa0) || c == '\u2028' || c == '\u2029' || (c >= '\u200b' && c <= '\u200f') || (c >= '\u202a' && c <= '\u202e') || (c >= '\u2066' && c <= '\u2069') {
			return fmt.Sprintf("%q", s)
		}
	}
	return s
}
