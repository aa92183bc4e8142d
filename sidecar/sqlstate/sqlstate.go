// Package sqlstate names the SQLSTATE codes that ordertimeout's database
// raises, so that Go programs compare errors with a name instead of a
// literal:
//
//	if sqlstate.Is(err, sqlstate.InsufficientStock) { ... }
//
// Every function of the SQL API validates its input before it writes and
// raises an error of class OT (ClassOT) that names the bad field; a failed
// call writes nothing. The README's table "Errors" lists the same codes: a
// test keeps the two in step, and checks that every OT code the PL/pgSQL
// raises is in the table. The package also names the few PostgreSQL codes
// the sidecar and its tests act on (serialization failures, deadlocks,
// missing privileges).
//
// The package is outside internal/ so that applications written in Go can
// import it.
package sqlstate

import (
	"errors"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// ClassOT is the SQLSTATE class of every error the SQL API raises on bad
// input or a refused call: the first two characters of the codes below.
const ClassOT = "OT"

// Codes of create_order and its input.
const (
	// NullArgument (OT100): a required argument is NULL; the message names
	// it.
	NullArgument = "OT100"
	// InvalidOrderID (OT101): order_id is empty, longer than 64
	// characters, "." or "..", or has control, format or line-separator
	// characters.
	InvalidOrderID = "OT101"
	// ItemsNotArray (OT102): items is not a JSON array.
	ItemsNotArray = "OT102"
	// ItemsCount (OT103): items has no entries or more than 100.
	ItemsCount = "OT103"
	// InvalidItem (OT104): an item is not an object, has an unknown key, or
	// its sku is missing, not a string, not 1-64 characters, or has
	// control, format or line-separator characters.
	InvalidItem = "OT104"
	// ItemQtyNotInteger (OT105): an item's qty is missing or not an
	// integer.
	ItemQtyNotInteger = "OT105"
	// ItemQtyOutOfRange (OT106): an item's qty is not between 1 and
	// 1,000,000.
	ItemQtyOutOfRange = "OT106"
	// DuplicateSKU (OT107): the same sku appears twice in one order.
	DuplicateSKU = "OT107"
	// UnknownSKU (OT108): an item names a sku the database does not know.
	UnknownSKU = "OT108"
	// InsufficientStock (OT109): not enough stock of a sku is free.
	InsufficientStock = "OT109"
	// CouponHeld (OT110): options.coupon is held by another live order.
	CouponHeld = "OT110"
	// UnknownPointsAccount (OT111): options.points_account is unknown.
	UnknownPointsAccount = "OT111"
	// InsufficientPoints (OT112): options.points exceed the account's free
	// points.
	InsufficientPoints = "OT112"
	// InvalidTimeout (OT113): timeout is at most 0, more than 30 days, or
	// has a month part or a negative part ('1 day -23:30').
	InvalidTimeout = "OT113"
	// InvalidOptions (OT114): options is malformed: not an object, an
	// unknown key, or a bad value.
	InvalidOptions = "OT114"
	// OrderIDConflict (OT115): order_id already exists with other content
	// (the same content again returns the existing order).
	OrderIDConflict = "OT115"
	// OrderIDOfPurgedCouponOrder (OT116): order_id belonged to an order that
	// purge_orders deleted after it spent a coupon; that coupon's hold is
	// kept under the id, so the id cannot be used again.
	OrderIDOfPurgedCouponOrder = "OT116"
)

// Codes of the payment and order lifecycle.
const (
	// UnknownOrder (OT120): no order has this order_id (or it was
	// purged).
	UnknownOrder = "OT120"
	// InvalidPaymentID (OT121): payment_id is empty, longer than 128
	// characters, "." or "..", or has control, format or line-separator
	// characters.
	InvalidPaymentID = "OT121"
	// OrderExpired (OT122): the order has expired, so no payment may
	// start.
	OrderExpired = "OT122"
	// WrongStatus (OT123): the order's status does not allow the call, for
	// example paying a cancelled order or extending one that is not
	// PENDING.
	WrongStatus = "OT123"
	// PaymentOfOtherOrder (OT124): payment_id belongs to another order.
	PaymentOfOtherOrder = "OT124"
	// InvalidPayingWindow (OT125): paying_window is at most 0, more than 30
	// days, or has a month part or a negative part.
	InvalidPayingWindow = "OT125"
	// InvalidAmount (OT126): an amount (amount, options.amount) is not a
	// finite number from 0 to below 10^15 with at most 6 decimal places:
	// negative, NaN, an infinity, too large, too fine, or not a JSON number.
	InvalidAmount = "OT126"
	// UnknownPayment (OT127): no payment has this payment_id.
	UnknownPayment = "OT127"
	// InvalidCurrency (OT128): currency is not three upper-case letters
	// (ISO 4217).
	InvalidCurrency = "OT128"
	// OtherMoneyForPayment (OT157): confirm_payment of a payment confirmed
	// before (or a conflict) says another amount or currency than the
	// payment's, or, for a payment confirmed without an amount, than its
	// order's: not a repeat, nothing written.
	OtherMoneyForPayment = "OT157"
)

// Codes of conflicts (late and double payments) and refunds.
const (
	// UnknownConflict (OT130): no conflict has this conflict_id.
	UnknownConflict = "OT130"
	// InvalidResolution (OT131): resolution is not reinstate, refund or
	// manual.
	InvalidResolution = "OT131"
	// CannotReinstate (OT132): the conflict cannot be reinstated: another
	// amount or currency, stock, coupon or points gone, or it is not a late
	// payment.
	CannotReinstate = "OT132"
	// ConflictResolved (OT133): the conflict is already resolved another
	// way.
	ConflictResolved = "OT133"
	// ConflictRefunding (OT134): the conflict is being refunded; only the
	// refund can end it.
	ConflictRefunding = "OT134"
	// RefundNotClaimed (OT135): finish_refund on a conflict that was not
	// claimed for a refund (open, or resolved otherwise).
	RefundNotClaimed = "OT135"
	// InvalidRefundID (OT136): refund_id is empty, longer than 128
	// characters, "." or "..", or has control, format or line-separator
	// characters.
	InvalidRefundID = "OT136"
	// Paused (OT137): timeout cancels are paused (configure(paused =>
	// true)), so cancel_checked refuses until they are resumed; sweep_due
	// and cancel_checked also raise it when a pause began while they ran,
	// and keep nothing.
	Paused = "OT137"
	// RepeatWithAnotherNote (OT138): resolve_conflict repeats the
	// resolution the conflict already has (resolved, or claimed for a
	// refund) with another note than the one it keeps; the conflict keeps
	// its note and nothing is written. A repeat without a note, or with the
	// same one, is answered.
	RepeatWithAnotherNote = "OT138"
	// AnotherRefund (OT139): finish_refund on a conflict recorded as
	// refunded by another refund_id: the payment may have been refunded
	// twice. Nothing is written; the conflict keeps the refund it recorded.
	AnotherRefund = "OT139"
	// PaymentOfPurgedOrder (OT176): confirm_payment of a payment of an
	// order that purge_orders deleted, for a new order under the same order
	// id: not that order's money. Nothing is written; a person checks the
	// payment at the gateway.
	PaymentOfPurgedOrder = "OT176"
	// RefundOfAnother (OT177): finish_refund with a refund_id recorded for
	// another conflict: one refund cannot give back two payments. Nothing is
	// written; the conflict stays refunding for a person.
	RefundOfAnother = "OT177"
	// EarlierOrdersPayment (OT178): confirm_payment with paid_at of a
	// payment not seen for the order, taken before the order could have had
	// it (more than 5 minutes before its creation, or before an earlier order
	// under its id was purged): an earlier order's money. Nothing is written;
	// a person checks the payment at the gateway.
	EarlierOrdersPayment = "OT178"
	// InvalidPaidAt (OT179): confirm_payment's paid_at is not a finite time
	// from the year 2000 on.
	InvalidPaidAt = "OT179"
)

// Codes of administration: sweeps, stock, points, settings, retention.
const (
	// InvalidMax (OT140): max is not between 1 and 100,000.
	InvalidMax = "OT140"
	// InvalidInterval (OT141): an interval argument (by, older_than,
	// max_sleep, retry_held_in, running_for) is out of range or has a
	// negative part, or by has a month part.
	InvalidInterval = "OT141"
	// InvalidSKU (OT142): sku is empty, longer than 64 characters, or has
	// control, format or line-separator characters.
	InvalidSKU = "OT142"
	// InvalidQuantity (OT143): qty or balance is not between 0 and 10^15.
	InvalidQuantity = "OT143"
	// InvalidReason (OT144): reason is not 1-200 characters, or has
	// control, format or line-separator characters.
	InvalidReason = "OT144"
	// InvalidSetting (OT145): a configure setting is out of range or has a
	// month part or a negative part; the message names it.
	InvalidSetting = "OT145"
	// InvalidAccountID (OT146): account_id is empty, longer than 64
	// characters, or has control, format or line-separator characters.
	InvalidAccountID = "OT146"
	// BalanceBelowHeld (OT147): a points balance is below the points that
	// live orders hold.
	BalanceBelowHeld = "OT147"
	// InvalidActor (OT148): the session's ordertimeout.actor is longer than
	// 200 characters or has control, format or line-separator characters.
	InvalidActor = "OT148"
	// InvalidNote (OT149): resolve_conflict's note is not 1-500
	// characters, or has control, format or line-separator characters.
	InvalidNote = "OT149"
	// InvalidMaxSleep (OT150): run_sweeper's max_sleep is not between 1 ms
	// and 1 minute, or has a negative part.
	InvalidMaxSleep = "OT150"
	// InvalidDuration (OT151): run_sweeper's duration is not more than 0
	// and at most 1 hour, or has a negative part.
	InvalidDuration = "OT151"
	// InvalidClosedOlderThan (OT152): purge_orders' closed_older_than is
	// not between 0 and 100 years, or has a negative part.
	InvalidClosedOlderThan = "OT152"
	// InvalidPaidOlderThan (OT153): purge_orders' paid_older_than is not
	// between 0 and 100 years, or has a negative part.
	InvalidPaidOlderThan = "OT153"
	// NotReadCommitted (OT154): sweep_due (cancel_due) or cancel_checked
	// runs under REPEATABLE READ or SERIALIZABLE, whose snapshot would not
	// show a pause that began while it ran.
	NotReadCommitted = "OT154"
	// PauseNotFenced (OT155) is a WARNING, not an error: configure(paused
	// => true) has paused timeout cancels, but cancels made before the
	// pause were still uncommitted when it stopped waiting for them (2 s):
	// they are kept if their transactions commit. See PauseUnconfirmed.
	PauseNotFenced = "OT155"
	// HeldDueByAhead (OT156): plan_next_sweep's held_due_by is later than the
	// database's clock.
	HeldDueByAhead = "OT156"
)

// Codes of payment methods.
const (
	// UnknownPaymentMethod (OT160): method (or options.method) names no
	// payment method.
	UnknownPaymentMethod = "OT160"
	// InvalidMethodName (OT161): put_payment_method's method is not 1-32
	// lower-case letters, digits or "_" starting with a letter.
	InvalidMethodName = "OT161"
	// InvalidMethodPayingWindow (OT162): a payment method's paying_window
	// is at most 0, more than 30 days, or has a month part or a negative
	// part.
	InvalidMethodPayingWindow = "OT162"
	// InvalidLatePayment (OT163): a payment method's late_payment is not
	// reinstate, refund, manual or NULL.
	InvalidLatePayment = "OT163"
)

// Codes of reconciliation against the gateway's records.
const (
	// InvalidTransactions (OT170): transactions is not a JSON array, or
	// has more than 100,000 rows.
	InvalidTransactions = "OT170"
	// InvalidTransaction (OT171): a transaction is malformed (the message
	// names its line and field), or a payment appears twice with the same
	// status.
	InvalidTransaction = "OT171"
	// InvalidPeriod (OT172): the period does not start before it ends, or
	// spans more than 400 days.
	InvalidPeriod = "OT172"
	// InvalidSource (OT173): source is not 1-64 characters of a-z 0-9 _ :
	// . - starting with a letter.
	InvalidSource = "OT173"
	// PeriodAfterWatermark (OT174): with a source, the period starts after
	// the source's watermark: the time between them was never reconciled.
	PeriodAfterWatermark = "OT174"
	// PeriodInFuture (OT175): with a source, the period ends in the
	// future, where the watermark cannot go.
	PeriodInFuture = "OT175"
)

// PostgreSQL's own codes that ordertimeout's programs act on.
const (
	// SerializationFailure (40001, serialization_failure): a repeatable
	// read or serializable transaction lost a race with a concurrent one,
	// e.g. close_cancelled from a snapshot older than a late payment. Run
	// the transaction again.
	SerializationFailure = "40001"
	// DeadlockDetected (40P01, deadlock_detected): two transactions waited
	// on each other's locks and this one was chosen to fail, e.g. two
	// transactions that each create several orders. Run it again.
	DeadlockDetected = "40P01"
	// InsufficientPrivilege (42501, insufficient_privilege): the role may
	// not call the function or touch the table (see the README's roles).
	InsufficientPrivilege = "42501"
	// ObjectNotInPrerequisiteState (55000,
	// object_not_in_prerequisite_state): e.g. a write to a view that cannot
	// be written, refused before any privilege is checked.
	ObjectNotInPrerequisiteState = "55000"
)

// Classes of PostgreSQL's codes after which a call may be sent again on a
// new connection.
const (
	// ClassConnectionException (class 08): the connection failed, was cut
	// or could not be made.
	ClassConnectionException = "08"
	// ClassOperatorIntervention (class 57): the server is shutting down,
	// crashed, or cannot accept connections yet (57P01-57P03), or a query
	// was cancelled (57014).
	ClassOperatorIntervention = "57"
)

// Code returns the SQLSTATE of err when it is (or wraps) an error from
// PostgreSQL, and "" otherwise.
func Code(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// Is reports whether err is (or wraps) an error from PostgreSQL with one of
// codes.
func Is(err error, codes ...string) bool {
	c := Code(err)
	return c != "" && slices.Contains(codes, c)
}

// Class returns the class (the first two characters) of err's SQLSTATE, or
// "" when err is not an error from PostgreSQL.
func Class(err error) string {
	c := Code(err)
	if len(c) < 2 {
		return ""
	}
	return c[:2]
}

// PauseUnconfirmed reports whether n is the WARNING that configure(paused =>
// true) raises when timeout cancels made before the pause were still
// uncommitted when it stopped waiting for them (at most 2 s): the pause
// holds, but those cancels commit if their transactions do. Other warnings
// (a bad setting in the database's configuration, a collation version
// mismatch at connect) are not. Since migration 000049 the warning has its
// own SQLSTATE, PauseNotFenced; before it, the code was the default 01000
// and only the start of the text ("paused, but ") told it apart, which is
// still recognised for a database not migrated yet. The warnings are
// _wait_for_cancels_under_way's, in plpgsql/orders.sql.
func PauseUnconfirmed(n *pgconn.Notice) bool {
	if n == nil || n.SeverityUnlocalized != "WARNING" {
		return false
	}
	return n.Code == PauseNotFenced ||
		n.Code == "01000" && strings.HasPrefix(n.Message, "paused, but ")
}
