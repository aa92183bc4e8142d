package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/server"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/text"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/worker"
	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
)

// Bounds of every list the console shows.
const (
	maxOpenConflicts     = 200
	maxResolvedConflicts = 50
	maxEvents            = 1000
	maxRows              = 200
)

// queryTimeout bounds the database work of one page.
const queryTimeout = 5 * time.Second

// states is the order of the states on the overview.
var states = []string{"PENDING", "PAYING", "PAID", "CANCELLED", "CLOSED", "REFUNDED"}

type stateCount struct {
	Status string
	Orders int64
}

type sweepStats struct {
	DueTimers, OverdueOrders, AwaitingCheck, Paying int64
	CaughtBySweep, OpenConflicts, MalformedTimers   int64
	OldestOverdue                                   *float64 // seconds past cancel_at
}

type overviewData struct {
	Counts             []stateCount
	Total              int64
	Stats              sweepStats
	OldestConflictAge  *float64
	Paused             bool
	PausedAt           *time.Time
	PausedBy           *string
	PausedFor          *float64
	Lag                chart
	LagCancels         int64
	LagP50, LagP99     *float64 // over the whole hour, ms
	Now                time.Time
	PermissionProblems []string
}

func (h *Handler) overview(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	db := h.cfg.Pool
	var d overviewData

	counts := map[string]int64{}
	rows, err := db.Query(ctx, `SELECT status, orders FROM ordertimeout.order_counts`)
	if err != nil {
		h.dbFail(w, r, "count orders", err)
		return
	}
	for rows.Next() {
		var c stateCount
		if err := rows.Scan(&c.Status, &c.Orders); err != nil {
			rows.Close()
			h.dbFail(w, r, "count orders", err)
			return
		}
		counts[c.Status] = c.Orders
	}
	if err := rows.Err(); err != nil {
		h.dbFail(w, r, "count orders", err)
		return
	}
	for _, s := range states {
		d.Counts = append(d.Counts, stateCount{s, counts[s]})
		d.Total += counts[s]
	}

	st := &d.Stats
	err = db.QueryRow(ctx, `
		SELECT due_timers, overdue_orders, awaiting_check, paying, caught_by_sweep,
		       open_conflicts, malformed_timers,
		       CASE WHEN oldest_pending_cancel_at <= now()
		            THEN extract(epoch FROM now() - oldest_pending_cancel_at)::float8 END,
		       now()
		FROM ordertimeout.sweep_stats`).Scan(&st.DueTimers, &st.OverdueOrders, &st.AwaitingCheck, &st.Paying,
		&st.CaughtBySweep, &st.OpenConflicts, &st.MalformedTimers, &st.OldestOverdue, &d.Now)
	if err != nil {
		h.dbFail(w, r, "read the sweep's statistics", err)
		return
	}
	err = db.QueryRow(ctx, `
		SELECT extract(epoch FROM now() - c.detected_at)::float8
		FROM ordertimeout.open_conflicts(1) AS c`).Scan(&d.OldestConflictAge)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		h.dbFail(w, r, "read the open conflicts", err)
		return
	}
	err = db.QueryRow(ctx, `
		SELECT s.paused, s.paused_at, s.paused_by,
		       extract(epoch FROM now() - s.paused_at)::float8
		FROM ordertimeout.settings AS s`).Scan(&d.Paused, &d.PausedAt, &d.PausedBy, &d.PausedFor)
	if err != nil {
		h.dbFail(w, r, "read the settings", err)
		return
	}

	// Cancel lag per minute over the last hour, by database timestamps.
	var buckets []lagBucket
	rows, err = db.Query(ctx, `
		SELECT extract(epoch FROM date_trunc('minute', l.at))::float8,
		       count(*),
		       1000 * percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM l.lateness)),
		       1000 * percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM l.lateness))
		FROM ordertimeout.cancel_lag AS l
		WHERE l.at > now() - interval '1 hour'
		  AND l.lateness IS NOT NULL
		GROUP BY 1
		ORDER BY 1`)
	if err != nil {
		h.dbFail(w, r, "read the cancel lag", err)
		return
	}
	for rows.Next() {
		var b lagBucket
		if err := rows.Scan(&b.Minute, &b.Cancels, &b.P50, &b.P99); err != nil {
			rows.Close()
			h.dbFail(w, r, "read the cancel lag", err)
			return
		}
		buckets = append(buckets, b)
	}
	if err := rows.Err(); err != nil {
		h.dbFail(w, r, "read the cancel lag", err)
		return
	}
	err = db.QueryRow(ctx, `
		SELECT count(*),
		       1000 * percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM l.lateness)),
		       1000 * percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM l.lateness))
		FROM ordertimeout.cancel_lag AS l
		WHERE l.at > now() - interval '1 hour'
		  AND l.lateness IS NOT NULL`).Scan(&d.LagCancels, &d.LagP50, &d.LagP99)
	if err != nil {
		h.dbFail(w, r, "read the cancel lag", err)
		return
	}
	d.Lag = lagChart(buckets, float64(d.Now.UnixMilli())/1000)
	h.render(w, r, http.StatusOK, "overview", page{Title: "Overview", Data: d})
}

type openConflict struct {
	ID                              int64
	OrderID, PaymentID, Kind, State string
	Amount, Currency                *string
	Age                             float64
	DetectedAt                      *time.Time
	OrderStatus                     *string
	OrderAmount, OrderCurrency      *string
	// AmountDiffers says the payment is not the order's amount and
	// currency, so reinstate is refused (OT132). The query computes it
	// with resolve_conflict's own rule, comparing numeric values: 100 is
	// 100.00, although their text differs.
	AmountDiffers bool
	// HandedOverWhy is set when the sidecar left the conflict to a
	// person (hand_over_conflict), and says why.
	HandedOverWhy *string
	// Policy is the late-payment policy the sidecar follows for it: that of
	// the method its payment was started with, else the settings'.
	Policy string
}

type resolvedConflict struct {
	ID                                   int64
	OrderID, PaymentID, Kind, Resolution string
	Amount, Currency                     *string
	ResolvedAt                           *time.Time
	ResolvedBy, RefundStartedBy          *string
	RefundID                             *string
	Note                                 *string // the resolver's note
}

type conflictsData struct {
	Open           []openConflict
	OpenTruncated  bool
	Resolved       []resolvedConflict
	ResolvedHidden string // why the history is not shown
}

func (h *Handler) conflicts(w http.ResponseWriter, r *http.Request) {
	h.renderConflicts(w, r, http.StatusOK, page{Title: "Conflicts"})
}

// resolvedFlash is the message of the redirect after a resolution, from
// the URL: anyone can write one, so it is shown only when the conflict's row
// agrees: resolved with the outcome named (reinstated, manual, refunded), or
// claimed for a refund (refunding, or refunded since). A conflict that does
// not exist, or a query that fails, shows nothing.
func resolvedFlash(ctx context.Context, db *pgxpool.Pool, r *http.Request) string {
	q := r.URL.Query()
	id, err := strconv.ParseInt(q.Get("resolved"), 10, 64)
	if err != nil || id <= 0 {
		return ""
	}
	outcome := q.Get("outcome")
	if outcome != "reinstated" && outcome != "manual" && outcome != "refunded" && outcome != "refunding" {
		return ""
	}
	var state string
	var resolution *string
	if err := db.QueryRow(ctx, `SELECT state, resolution FROM ordertimeout.conflicts WHERE conflict_id = $1`, id).
		Scan(&state, &resolution); err != nil {
		return ""
	}
	resolved := ""
	if resolution != nil {
		resolved = *resolution
	}
	switch {
	case outcome == "refunding" && (state == "refunding" || resolved == "refunded"):
		return fmt.Sprintf("Conflict %d is claimed for a refund: the sidecar refunds it at the gateway and records it.", id)
	case outcome != "refunding" && state == "resolved" && resolved == outcome:
		return fmt.Sprintf("Conflict %d resolved: %s.", id, outcome)
	}
	return ""
}

func (h *Handler) renderConflicts(w http.ResponseWriter, r *http.Request, status int, p page) {
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	db := h.cfg.Pool
	var d conflictsData
	rows, err := db.Query(ctx, `
		SELECT c.conflict_id, c.order_id, c.payment_id, c.kind, c.state, c.amount::text, c.currency,
		       extract(epoch FROM now() - c.detected_at)::float8, c.detected_at,
		       o.status, o.amount::text, o.currency,
		       coalesce(o.amount IS NOT NULL AND c.amount IS DISTINCT FROM o.amount
		             OR o.currency IS NOT NULL AND c.currency IS DISTINCT FROM o.currency, false),
		       c.handed_over_why, c.late_payment
		FROM ordertimeout.open_conflicts($1) AS c
		LEFT JOIN LATERAL ordertimeout.order_info(c.order_id) AS o ON true
		ORDER BY c.detected_at, c.conflict_id`, maxOpenConflicts+1)
	if err != nil {
		h.dbFail(w, r, "read the open conflicts", err)
		return
	}
	for rows.Next() {
		var c openConflict
		if err := rows.Scan(&c.ID, &c.OrderID, &c.PaymentID, &c.Kind, &c.State, &c.Amount, &c.Currency,
			&c.Age, &c.DetectedAt, &c.OrderStatus, &c.OrderAmount, &c.OrderCurrency, &c.AmountDiffers, &c.HandedOverWhy, &c.Policy); err != nil {
			rows.Close()
			h.dbFail(w, r, "read the open conflicts", err)
			return
		}
		d.Open = append(d.Open, c)
	}
	if err := rows.Err(); err != nil {
		h.dbFail(w, r, "read the open conflicts", err)
		return
	}
	if p.Error == "" && p.Info == "" {
		p.Info = resolvedFlash(ctx, db, r)
	}
	if len(d.Open) > maxOpenConflicts {
		d.Open, d.OpenTruncated = d.Open[:maxOpenConflicts], true
	}

	rows, err = db.Query(ctx, `
		SELECT c.conflict_id, c.order_id, c.payment_id, c.kind, c.resolution, c.amount::text, c.currency,
		       c.resolved_at, c.resolved_by, c.refund_started_by, c.refund_id, c.note
		FROM ordertimeout.conflicts AS c
		WHERE c.state = 'resolved'
		ORDER BY c.resolved_at DESC, c.conflict_id DESC
		LIMIT $1`, maxResolvedConflicts)
	if err == nil {
		for rows.Next() {
			var c resolvedConflict
			if err = rows.Scan(&c.ID, &c.OrderID, &c.PaymentID, &c.Kind, &c.Resolution, &c.Amount, &c.Currency,
				&c.ResolvedAt, &c.ResolvedBy, &c.RefundStartedBy, &c.RefundID, &c.Note); err != nil {
				break
			}
			d.Resolved = append(d.Resolved, c)
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	if err != nil {
		if !isPermissionDenied(err) {
			h.dbFail(w, r, "read the resolved conflicts", err)
			return
		}
		d.Resolved = nil
		d.ResolvedHidden = "The console's database role cannot read table ordertimeout.conflicts: grant it ordertimeout_admin (or start the sidecar with --console-database-url naming such a role) to see who resolved what."
	}
	p.Data = d
	h.render(w, r, status, "conflicts", p)
}

// resolutionHints explain the refusals of resolve_conflict to an operator.
var resolutionHints = map[string]string{
	sqlstate.UnknownConflict:       "This conflict does not exist (any more).",
	sqlstate.InvalidResolution:     "That is not a resolution the console offers.",
	sqlstate.CannotReinstate:       "Reinstate takes back a cancelled order paid late with exactly its amount and currency: refund this payment or hand it to a person (manual).",
	sqlstate.ConflictResolved:      "Someone resolved this conflict otherwise already: see the history below.",
	sqlstate.ConflictRefunding:     "A refund of this payment has started: it is the only way this conflict can end, and the sidecar finishes it.",
	sqlstate.RepeatWithAnotherNote: "Someone resolved this conflict the same way already, or claimed its refund: it keeps the note of that decision (see Resolved below, or the order's page while the refund runs), and yours was not kept.",
	sqlstate.InvalidActor:          "Your user name cannot be recorded as the actor.",
}

// checkAction lets through a request that changes something only from an
// operator, from this server's own pages (Origin), with the form's CSRF
// token; otherwise it answers 403 and returns nil. A body that is not a
// URL-encoded form, the only kind the console's pages send, is refused
// (415) before the token is looked for: r.ParseForm leaves a multipart
// body unread, and its token would be reported missing. It parses the
// form.
func (h *Handler) checkAction(w http.ResponseWriter, r *http.Request) *user {
	u := userOf(r)
	if !u.Operator() {
		h.logger.Warn("console: viewer's action refused", "user", u.Name, "path", r.URL.Path)
		h.fail(w, r, http.StatusForbidden, "Viewers may not act: sign in as an operator to resolve conflicts or pause.")
		return nil
	}
	if why := server.CrossOrigin(r, h.trusted); why != "" {
		h.logger.Warn("console: cross-origin action refused", "user", u.Name, "reason", why)
		h.fail(w, r, http.StatusForbidden, why)
		return nil
	}
	if got, ok := formContentType(r); !ok {
		h.logger.Warn("console: action with a body of another type refused", "user", u.Name, "path", r.URL.Path, "content_type", got)
		h.fail(w, r, http.StatusUnsupportedMediaType, "Refused: the console takes a form sent as "+formType+
			" (as its own pages send it), and this one is "+got+": nothing was done.")
		return nil
	}
	// A note of 500 characters, URL-encoded, is up to 6,000 bytes.
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, http.StatusBadRequest, "The form could not be read.")
		return nil
	}
	if why := checkCSRF(u, r.PostForm.Get("csrf"), time.Now()); why != "" {
		h.logger.Warn("console: action without a valid CSRF token refused", "user", u.Name, "reason", why)
		h.fail(w, r, http.StatusForbidden, "Refused: "+why+".")
		return nil
	}
	return u
}

// formType is the only type of body the console's actions take: that of
// an HTML form without an enctype.
const formType = "application/x-www-form-urlencoded"

// formContentType reports whether r's body is a form the console reads
// (formType, with any parameters), or r has no body and no Content-Type
// (an empty form, which then lacks its CSRF token). Otherwise it says what
// the body is instead, for a message.
func formContentType(r *http.Request) (string, bool) {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		if r.ContentLength == 0 {
			return "", true
		}
		return "a body without a Content-Type", false
	}
	mediaType, _, err := mime.ParseMediaType(ct)
	switch {
	case err != nil:
		return "a body whose Content-Type cannot be read", false
	case mediaType == formType:
		return mediaType, true
	case len(mediaType) > 100:
		return "another type", false
	}
	return mediaType, false // tokens only: ParseMediaType checked them
}

// maxNote is the longest note resolve_conflict keeps, in characters.
const maxNote = 500

func (h *Handler) resolve(w http.ResponseWriter, r *http.Request) {
	u := h.checkAction(w, r)
	if u == nil {
		return
	}
	rawID := r.PathValue("id")
	id, err := strconv.ParseInt(rawID, 10, 64)
	if err != nil || id <= 0 || len(rawID) > 19 {
		h.fail(w, r, http.StatusBadRequest, "A conflict id is a positive whole number.")
		return
	}
	resolution := r.PostForm.Get("resolution")
	switch resolution {
	case "reinstate", "refund", "manual":
	default:
		h.fail(w, r, http.StatusBadRequest, `The resolution must be "reinstate", "refund" or "manual".`)
		return
	}

	// The note is the operator's reason; the database refuses one it cannot
	// keep as plain text (OT149), and one brought to a conflict resolved the
	// same way already with another note (OT138), shown like any refusal.
	// The console checks the note with the database's rule
	// (ordertimeout._is_plain_text, text.Plain) first, and refuses it in
	// the database's words: before any gateway call, so that a bad note
	// costs none and is not answered "try again" while the gateway is away.
	var note *string
	if n := strings.TrimSpace(r.PostForm.Get("note")); n != "" {
		if !utf8.ValidString(n) || strings.ContainsRune(n, 0) {
			// PostgreSQL would refuse either as a database error (22021).
			h.fail(w, r, http.StatusBadRequest, "The note must be UTF-8 text without NUL characters: nothing was resolved.")
			return
		}
		if !text.Plain(n, maxNote) {
			h.resolutionRefused(w, r, u, id, resolution, sqlstate.InvalidNote,
				fmt.Sprintf("note must be 1 to %d characters without control, format or line-separator characters (got %d characters)",
					maxNote, utf8.RuneCountInString(n)))
			return
		}
		note = &n
	}

	// A reinstatement, or a refund claimed, is of the conflict's amount as
	// it is then: read before the gateway is asked, and again in the
	// resolution's transaction, so that an amount a confirmation gave it
	// meanwhile (which the gateway's answer was not compared with)
	// resolves nothing.
	var seen *money
	if (resolution == "refund" || resolution == "reinstate") && h.cfg.Gateway != nil {
		m, err := h.conflictMoney(r.Context(), h.cfg.Pool, id)
		if err != nil {
			h.dbFail(w, r, "read the conflict", err)
			return
		}
		seen = &m
	}
	if resolution == "reinstate" && !h.gatewayHolds(w, r, u, id) {
		return
	}
	if resolution == "refund" && !h.gatewayRefundable(w, r, u, id) {
		return
	}
	outcome, err := h.resolveConflict(r.Context(), "console:"+u.Name, id, resolution, note, seen)
	if errors.Is(err, errConflictChanged) {
		h.logger.Info("console: not resolved: the conflict changed while the gateway was asked", "user", u.Name, "conflict_id", id, "resolution", resolution)
		h.renderConflicts(w, r, http.StatusConflict, page{Title: "Conflicts",
			Error: resolution + " not made: the conflict got another amount or currency (a confirmation) while the gateway was asked. Nothing was resolved: look at it again, then decide."})
		return
	}
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, sqlstate.ClassOT) {
			h.resolutionRefused(w, r, u, id, resolution, pgErr.Code, pgErr.Message)
			return
		}
		h.dbFail(w, r, "resolve the conflict", err)
		return
	}
	h.logger.Info("console: conflict resolved", "user", u.Name, "conflict_id", id, "resolution", resolution, "outcome", outcome)
	http.Redirect(w, r, fmt.Sprintf("%sconflicts?resolved=%d&outcome=%s", Prefix, id, outcome), http.StatusSeeOther)
}

// resolutionRefused shows resolve_conflict's refusal code, with its
// message and the hint for it: 404 for a conflict that does not exist, 409
// otherwise.
func (h *Handler) resolutionRefused(w http.ResponseWriter, r *http.Request, u *user, id int64, resolution, code, message string) {
	status := http.StatusConflict
	if code == sqlstate.UnknownConflict {
		status = http.StatusNotFound
	}
	msg := fmt.Sprintf("%s refused (%s): %s.", resolution, code, message)
	if hint := resolutionHints[code]; hint != "" {
		msg += " " + hint
	}
	h.logger.Info("console: resolution refused", "user", u.Name, "conflict_id", id, "resolution", resolution, "code", code)
	h.renderConflicts(w, r, status, page{Title: "Conflicts", Error: msg})
}

// gatewayTimeout bounds the gateway's answer to a reinstatement's check (its
// client retries an unavailable gateway within it).
const gatewayTimeout = 20 * time.Second

// gatewayHolds asks the gateway, before conflict id is reinstated, whether it
// still holds the late payment's money (worker.CheckHeld), and reports
// whether the reinstatement may go on. When it may not, it has answered: 409
// when the gateway no longer holds the money (a person refunded it there),
// holds it in another currency, holds another amount than recorded here
// (worker.ErrOtherAmount), or does not tell (pending, another payment
// of the order named), 502 when its answer cannot be used, 503 when it could
// not be asked.
func (h *Handler) gatewayHolds(w http.ResponseWriter, r *http.Request, u *user, id int64) bool {
	if h.cfg.Gateway == nil {
		return true
	}
	ctx, cancel := context.WithTimeout(r.Context(), gatewayTimeout)
	defer cancel()
	err := worker.CheckHeld(ctx, h.cfg.Gateway, h.cfg.Pool, id)
	switch {
	case err == nil:
		return true
	case errors.Is(err, worker.ErrPartlyHeld):
		h.logger.Warn("console: reinstatement refused: the gateway holds only part of the payment", "user", u.Name, "conflict_id", id, "reason", err)
		h.renderConflicts(w, r, http.StatusConflict, page{Title: "Conflicts", Error: "reinstate refused: " + err.Error() +
			". Nothing was resolved. Find out at the gateway where the rest went (a refund made there?), settle what it still holds there by hand, then resolve the conflict as manual with a note."})
		return false
	case errors.Is(err, worker.ErrNotHeld):
		h.logger.Warn("console: reinstatement refused: the gateway no longer holds the payment", "user", u.Name, "conflict_id", id, "reason", err)
		h.renderConflicts(w, r, http.StatusConflict, page{Title: "Conflicts", Error: "reinstate refused: " + err.Error() +
			". Nothing was resolved. Find out at the gateway where the money went (a refund made there?), then resolve the conflict as manual with a note."})
		return false
	case errors.Is(err, worker.ErrOtherAmount):
		h.logger.Warn("console: reinstatement refused: the gateway's record of the payment contradicts this one", "user", u.Name, "conflict_id", id, "reason", err)
		h.renderConflicts(w, r, http.StatusConflict, page{Title: "Conflicts", Error: "reinstate refused: " + err.Error() +
			". Nothing was resolved. Settle the payment at the gateway (refund it there by hand), then resolve the conflict as manual with a note."})
		return false
	case errors.Is(err, worker.ErrOtherCurrency):
		h.logger.Info("console: reinstatement refused: the gateway holds the payment in another currency", "user", u.Name, "conflict_id", id, "reason", err)
		h.renderConflicts(w, r, http.StatusConflict, page{Title: "Conflicts", Error: "reinstate refused: " + err.Error() +
			". Nothing was resolved. It is not the order's money: refund it."})
		return false
	case errors.Is(err, worker.ErrCannotTell) && errors.Is(err, gateway.ErrBadAnswer):
		h.logger.Error("console: the gateway's answer about the late payment is unusable: not reinstated", "user", u.Name, "conflict_id", id, "error", err)
		h.renderConflicts(w, r, http.StatusBadGateway, page{Title: "Conflicts",
			Error: "The payment gateway's answer about the payment could not be used (the sidecar's log has it): nothing was resolved. Check the payment at the gateway: refund it if the gateway still holds it, or resolve it as manual with a note if it does not."})
		return false
	case errors.Is(err, worker.ErrCannotTell):
		h.logger.Info("console: reinstatement refused: the gateway does not tell whether it holds the payment", "user", u.Name, "conflict_id", id, "reason", err)
		h.renderConflicts(w, r, http.StatusConflict, page{Title: "Conflicts", Error: "reinstate refused: " + err.Error() +
			". Nothing was resolved. Try again later, or check the payment at the gateway: refund it if the gateway still holds it, or resolve it as manual with a note if it does not."})
		return false
	case errors.Is(err, gateway.ErrDisputed):
		h.logger.Info("console: reinstatement refused: the payment is under dispute", "user", u.Name, "conflict_id", id, "reason", err)
		h.renderConflicts(w, r, http.StatusConflict, page{Title: "Conflicts", Error: "reinstate refused: " + err.Error() +
			". Nothing was resolved. Decide once the dispute has closed: what the gateway still holds of the payment is known then."})
		return false
	case errors.Is(err, gateway.ErrUnavailable) || errors.Is(err, gateway.ErrThrottled) || ctx.Err() != nil:
		h.logger.Warn("console: the gateway could not be asked before a reinstatement", "user", u.Name, "conflict_id", id, "error", err)
		h.renderConflicts(w, r, http.StatusServiceUnavailable, page{Title: "Conflicts",
			Error: "The payment gateway could not be asked whether it still holds the payment: nothing was resolved. Try again in a moment."})
		return false
	default:
		h.dbFail(w, r, "read the conflict", err)
		return false
	}
}

// gatewayRefundable asks the gateway, before a payment's refund is claimed,
// whether it still holds the money (worker.CheckRefundable), and reports
// whether the refund may go on: refused (409) only when the gateway says it
// no longer holds it (a refund would stay refunding for ever, and a person
// could no longer end the conflict otherwise), when its record of the
// payment contradicts the amount the refund would name, or while a dispute
// may take it back; 502 when its answer could not be used or it refused the
// request, 503 when it could not be asked. An answer that does not tell does
// not stop a person's refund, nor does another currency of the same amount.
func (h *Handler) gatewayRefundable(w http.ResponseWriter, r *http.Request, u *user, id int64) bool {
	if h.cfg.Gateway == nil {
		return true
	}
	ctx, cancel := context.WithTimeout(r.Context(), gatewayTimeout)
	defer cancel()
	err := worker.CheckRefundable(ctx, h.cfg.Gateway, h.cfg.Pool, id)
	if err == nil {
		return true
	}
	if errors.Is(err, gateway.ErrDisputed) {
		h.logger.Info("console: refund refused: the payment is under dispute", "user", u.Name, "conflict_id", id, "reason", err)
		h.renderConflicts(w, r, http.StatusConflict, page{Title: "Conflicts", Error: "refund refused: " + err.Error() +
			". Nothing was resolved: a refund claimed now could not be made until the dispute closes, nor of that amount if the dispute is lost. Decide once it has closed."})
		return false
	}
	if errors.Is(err, worker.ErrOtherAmount) {
		h.logger.Warn("console: refund refused: the gateway's record of the payment contradicts this one", "user", u.Name, "conflict_id", id, "reason", err)
		h.renderConflicts(w, r, http.StatusConflict, page{Title: "Conflicts", Error: "refund refused: " + err.Error() +
			". Nothing was resolved: the refund would name the amount recorded here. Refund the payment at the gateway by hand, then resolve the conflict as manual with a note."})
		return false
	}
	if errors.Is(err, worker.ErrPartlyHeld) {
		h.logger.Warn("console: refund refused: the gateway holds only part of the payment", "user", u.Name, "conflict_id", id, "reason", err)
		h.renderConflicts(w, r, http.StatusConflict, page{Title: "Conflicts", Error: "refund refused: " + err.Error() +
			". Nothing was resolved: a refund of the amount recorded here would give back more than the gateway holds. Refund what it still holds there by hand, then resolve the conflict as manual with a note."})
		return false
	}
	if errors.Is(err, worker.ErrNotHeld) {
		h.logger.Warn("console: refund refused: the gateway no longer holds the payment", "user", u.Name, "conflict_id", id, "reason", err)
		h.renderConflicts(w, r, http.StatusConflict, page{Title: "Conflicts", Error: "refund refused: " + err.Error() +
			". Nothing was resolved: a refund would give the money back twice. Find out at the gateway where the money went (a refund made there?), then resolve the conflict as manual with a note."})
		return false
	}
	if errors.Is(err, worker.ErrCannotTell) && errors.Is(err, gateway.ErrBadAnswer) {
		h.logger.Error("console: the gateway's answer about the payment is unusable: refund not claimed", "user", u.Name, "conflict_id", id, "error", err)
		h.renderConflicts(w, r, http.StatusBadGateway, page{Title: "Conflicts",
			Error: "The payment gateway's answer about the payment could not be used, or it refused the request (the sidecar's log has it): nothing was resolved. Check the payment at the gateway; once it answers, try again."})
		return false
	}
	if errors.Is(err, gateway.ErrUnavailable) || errors.Is(err, gateway.ErrThrottled) || ctx.Err() != nil {
		// A refund claimed now could be one the gateway's answer would have
		// refused (a payment given back, or under dispute): once claimed,
		// nothing but the refund can end the conflict.
		h.logger.Warn("console: the gateway could not be asked before a refund", "user", u.Name, "conflict_id", id, "error", err)
		h.renderConflicts(w, r, http.StatusServiceUnavailable, page{Title: "Conflicts",
			Error: "The payment gateway could not be asked whether it still holds the payment: nothing was resolved. Try again in a moment."})
		return false
	}
	h.dbFail(w, r, "read the conflict", err)
	return false
}

// resolveConflict calls ordertimeout.resolve_conflict with actor recorded
// for this transaction only.
// With seen, it is committed only when the conflict's amount and currency
// are still seen's (errConflictChanged otherwise, nothing resolved).
func (h *Handler) resolveConflict(ctx context.Context, actor string, id int64, resolution string, note *string, seen *money) (string, error) {
	var outcome string
	err := h.act(ctx, actor, func(ctx context.Context, tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT ordertimeout.resolve_conflict($1, $2, $3)`, id, resolution, note).Scan(&outcome); err != nil {
			return err
		}
		if seen == nil {
			return nil
		}
		now, err := h.conflictMoney(ctx, tx, id)
		if err != nil {
			return err
		}
		if now != *seen {
			return errConflictChanged
		}
		return nil
	})
	if errors.Is(err, errConflictChanged) {
		return "", err
	}
	if err != nil {
		return "", fmt.Errorf("resolve conflict %d: %w", id, err)
	}
	return outcome, nil
}

// money is a conflict's amount and currency as text ("" for none).
type money struct{ amount, currency string }

// errConflictChanged says a conflict's amount or currency changed between
// the gateway's check and the claim of its refund.
var errConflictChanged = errors.New("the conflict changed while the gateway was asked")

// conflictMoney reads conflict id's amount and currency.
func (h *Handler) conflictMoney(ctx context.Context, db interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}, id int64) (money, error) {
	var m money
	err := db.QueryRow(ctx, `SELECT coalesce(amount::text, ''), coalesce(currency, '') FROM ordertimeout.conflict_info($1)`, id).
		Scan(&m.amount, &m.currency)
	if errors.Is(err, pgx.ErrNoRows) {
		return m, nil // unknown: resolve_conflict says so (OT130)
	}
	return m, err
}

// act runs f in a transaction whose ordertimeout.actor is actor, within
// queryTimeout.
func (h *Handler) act(ctx context.Context, actor string, f func(ctx context.Context, tx pgx.Tx) error) error {
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	return asActor(ctx, h.cfg.Pool, actor, f)
}

// asActor runs f in a transaction of db whose ordertimeout.actor is actor.
func asActor(ctx context.Context, db interface {
	Begin(context.Context) (pgx.Tx, error)
}, actor string, f func(ctx context.Context, tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('ordertimeout.actor', $1, true)`, actor); err != nil {
			return fmt.Errorf("set actor: %w", err)
		}
		return f(ctx, tx)
	})
}

// actWarned is act on a connection of its own, and also returns the pause's
// warnings the server sent (sqlstate.PauseUnconfirmed): a pause warns when
// timeout cancels made before it have not committed within its wait. Other
// warnings are logged.
// Only for actions as rare as a pause: it connects each time. When it cannot
// connect (no connection left in an incident), it acts on the pool, and
// unread says that the warnings, which the server's log keeps, could not be
// read.
func (h *Handler) actWarned(ctx context.Context, actor string, f func(ctx context.Context, tx pgx.Tx) error) (warnings []string, unread bool, err error) {
	cc := h.cfg.Pool.Config().ConnConfig.Copy()
	// Called by the connection's reader, within the calls below.
	cc.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if sqlstate.PauseUnconfirmed(n) {
			warnings = append(warnings, n.Message)
		} else if n.SeverityUnlocalized == "WARNING" {
			h.logger.Warn("console: the database warned during an action", "warning", n.Message)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, queryTimeout)
	conn, err := pgx.ConnectConfig(cctx, cc)
	cancel()
	if err != nil {
		h.logger.Warn("console: no connection of its own for the action: acting on the pool, without the database's warnings", "error", err)
		return nil, true, h.act(ctx, actor, f)
	}
	ctx, cancel = context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	defer conn.Close(context.WithoutCancel(ctx)) //nolint:errcheck // nothing is left to do with it
	err = asActor(ctx, conn, actor, f)
	return warnings, false, err
}

// pause switches the pause with configure(paused => ...), which only
// ordertimeout_admin may call. A pause that could not wait for every timeout
// cancel made before it shows configure's warning instead of redirecting.
func (h *Handler) pause(w http.ResponseWriter, r *http.Request) {
	u := h.checkAction(w, r)
	if u == nil {
		return
	}
	var paused bool
	switch r.PostForm.Get("paused") {
	case "true":
		paused = true
	case "false":
	default:
		h.fail(w, r, http.StatusBadRequest, `The form must say paused "true" or "false".`)
		return
	}
	// A Resume ends the pause its page showed, not one that began since
	// (a second incident): the form says when the pause it shows began.
	var shownSince time.Time
	if !paused {
		var err error
		if shownSince, err = time.Parse(time.RFC3339Nano, r.PostForm.Get("paused_at")); err != nil {
			h.fail(w, r, http.StatusBadRequest, "The form does not say which pause it resumes: reload the settings page.")
			return
		}
	}
	var other pauseShown
	warnings, unread, err := h.actWarned(r.Context(), "console:"+u.Name, func(ctx context.Context, tx pgx.Tx) error {
		// configure locks the settings row; on a resume it keeps paused_at.
		err := tx.QueryRow(ctx, `SELECT paused_at, paused_by FROM ordertimeout.configure(paused => $1)`, paused).
			Scan(&other.At, &other.By)
		if err != nil {
			return err
		}
		if !paused && (other.At == nil || !other.At.Equal(shownSince)) {
			return errOtherPause
		}
		return nil
	})
	if err != nil {
		var pgErr *pgconn.PgError
		switch {
		case errors.Is(err, errOtherPause):
			msg := "Not resumed: the pause this page showed has ended"
			if other.At != nil {
				msg += fmt.Sprintf(", and another began at %s", formatTime(other.At))
				if other.By != nil {
					msg += " by " + *other.By
				}
			}
			msg += ". Read why before you resume it."
			h.logger.Warn("console: stale resume refused", "user", u.Name, "shown_paused_at", shownSince)
			h.renderSettings(w, r, http.StatusConflict, page{Title: "Settings", Error: msg})
		case isPermissionDenied(err):
			h.renderSettings(w, r, http.StatusForbidden, page{Title: "Settings", Error: "The console's database role may not change settings: pausing needs ordertimeout_admin (start the sidecar with --console-database-url naming such a role), or run `ordertimeout pause` / `resume`."})
		case errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, sqlstate.ClassOT):
			h.renderSettings(w, r, http.StatusConflict, page{Title: "Settings", Error: fmt.Sprintf("Refused (%s): %s.", pgErr.Code, pgErr.Message)})
		default:
			h.dbFail(w, r, "change the pause", err)
		}
		return
	}
	h.logger.Warn("console: pause switched", "user", u.Name, "paused", paused)
	switch {
	case len(warnings) > 0:
		h.logger.Warn("console: pause warned", "user", u.Name, "warning", strings.Join(warnings, "; "))
		h.renderSettings(w, r, http.StatusOK, page{Title: "Settings",
			Error: "Paused, with a warning from the database: " + strings.Join(warnings, "; ") + "."})
		return
	case paused && unread:
		h.renderSettings(w, r, http.StatusOK, page{Title: "Settings",
			Error: "Paused, but the console could not open a connection of its own to read the database's warnings: " +
				"run `ordertimeout pause` to learn whether timeout cancels made before the pause are still uncommitted."})
		return
	}
	http.Redirect(w, r, fmt.Sprintf("%ssettings?paused=%t", Prefix, paused), http.StatusSeeOther)
}

// errOtherPause rolls back a Resume sent from a page that showed another
// pause than the one that holds.
var errOtherPause = errors.New("console: the pause shown is not the one that holds")

type pauseShown struct {
	At *time.Time
	By *string
}

type orderItem struct {
	SKU string `json:"sku"`
	Qty int64  `json:"qty"`
}

type orderInfo struct {
	OrderID, Status                                    string
	CreatedAt, ExpireAt, CancelAt, PayingUntil, PaidAt *time.Time
	CancelledAt, ClosedAt                              *time.Time
	CancelCause                                        *string
	DeadlineVersion                                    int64
	Amount, Currency                                   *string
	Items                                              []orderItem
	CouponID, PointsAccount                            *string
	Points                                             *int64
	PaymentAttempted                                   bool
	OpenConflicts                                      int64
	Now                                                time.Time
}

type payment struct {
	PaymentID, Status                string
	Amount, Currency                 *string
	StartedAt, ConfirmedAt, FailedAt *time.Time
	// Method is the payment method that decides for the attempt (its
	// close, the policy of its conflict): order_payments' method.
	Method *string
}

type hold struct {
	Kind, ID, Qty              string
	HeldAt, UsedAt, ReleasedAt *time.Time
}

type release struct {
	Kind, ResourceID, Cause string
	Qty                     int64
	ReleasedAt, ReclaimedAt *time.Time
}

type orderConflict struct {
	ID                                    int64
	PaymentID, Kind, State                string
	Amount, Currency, Resolution          *string
	DetectedAt, ResolvedAt                *time.Time
	ResolvedBy, RefundStartedBy, RefundID *string
	Note                                  *string
}

type event struct {
	ID               int64
	From             *string
	To, Cause, Actor string
	Lateness         *float64
	At               *time.Time
	Detail           *string
}

type orderData struct {
	Query           string
	Order           *orderInfo
	Payments        []payment
	Holds           []hold
	Releases        []release
	Conflicts       []orderConflict
	TablesHidden    string
	Events          []event
	EventsTruncated bool
}

func (h *Handler) order(w http.ResponseWriter, r *http.Request) {
	raw := r.URL.Query().Get("id")
	var d orderData
	p := page{Title: "Order", Data: &d}
	if raw == "" {
		h.render(w, r, http.StatusOK, "order", p)
		return
	}
	if !isOrderID(raw) {
		p.Error = "An order id is 1 to 64 characters, not \".\" or \"..\", without control, format or line-separator characters."
		if len(raw) <= 256 {
			d.Query = raw
		}
		h.render(w, r, http.StatusBadRequest, "order", p)
		return
	}
	d.Query = raw
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	db := h.cfg.Pool

	o := &orderInfo{}
	var items *string
	err := db.QueryRow(ctx, `
		SELECT o.order_id, o.status, o.created_at, o.expire_at, o.cancel_at, o.paying_until, o.paid_at,
		       o.cancelled_at, o.closed_at, o.cancel_cause, o.deadline_version, o.amount::text, o.currency,
		       o.items::text, o.coupon_id, o.points_account, o.points, o.payment_attempted, o.open_conflicts,
		       now()
		FROM ordertimeout.order_info($1) AS o`, raw).Scan(&o.OrderID, &o.Status, &o.CreatedAt, &o.ExpireAt,
		&o.CancelAt, &o.PayingUntil, &o.PaidAt, &o.CancelledAt, &o.ClosedAt, &o.CancelCause, &o.DeadlineVersion,
		&o.Amount, &o.Currency, &items, &o.CouponID, &o.PointsAccount, &o.Points, &o.PaymentAttempted,
		&o.OpenConflicts, &o.Now)
	if err != nil {
		if sqlstate.Is(err, sqlstate.UnknownOrder, sqlstate.InvalidOrderID) {
			p.Error = fmt.Sprintf("No order %q.", raw)
			h.render(w, r, http.StatusNotFound, "order", p)
			return
		}
		h.dbFail(w, r, "read the order", err)
		return
	}
	if items != nil {
		if err := json.Unmarshal([]byte(*items), &o.Items); err != nil {
			h.dbFail(w, r, "read the order's items", err)
			return
		}
	}
	d.Order = o

	rows, err := db.Query(ctx, `
		SELECT payment_id, status, amount::text, currency, started_at, confirmed_at, failed_at, method
		FROM ordertimeout.order_payments($1)
		LIMIT $2`, raw, maxRows)
	if err != nil {
		h.dbFail(w, r, "read the order's payments", err)
		return
	}
	d.Payments, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (payment, error) {
		var p payment
		err := row.Scan(&p.PaymentID, &p.Status, &p.Amount, &p.Currency, &p.StartedAt, &p.ConfirmedAt, &p.FailedAt, &p.Method)
		return p, err
	})
	if err != nil {
		h.dbFail(w, r, "read the order's payments", err)
		return
	}

	if err := h.readOrderTables(ctx, raw, &d); err != nil {
		if !isPermissionDenied(err) {
			h.dbFail(w, r, "read the order's holds and releases", err)
			return
		}
		d.Holds, d.Releases, d.Conflicts = nil, nil, nil
		d.TablesHidden = "The console's database role cannot read the tables of holds, releases and conflicts: grant it ordertimeout_admin (or start the sidecar with --console-database-url naming such a role) to see them."
	}

	rows, err = db.Query(ctx, `
		SELECT event_id, from_status, to_status, cause, actor, extract(epoch FROM lateness)::float8, at, detail::text
		FROM ordertimeout.order_events($1)
		LIMIT $2`, raw, maxEvents+1)
	if err != nil {
		h.dbFail(w, r, "read the order's events", err)
		return
	}
	d.Events, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (event, error) {
		var e event
		err := row.Scan(&e.ID, &e.From, &e.To, &e.Cause, &e.Actor, &e.Lateness, &e.At, &e.Detail)
		return e, err
	})
	if err != nil {
		h.dbFail(w, r, "read the order's events", err)
		return
	}
	if len(d.Events) > maxEvents {
		d.Events, d.EventsTruncated = d.Events[:maxEvents], true
	}
	h.render(w, r, http.StatusOK, "order", p)
}

// readOrderTables reads what no API function returns: the holds, releases
// and conflicts of one order, from the tables (ordertimeout_admin).
func (h *Handler) readOrderTables(ctx context.Context, orderID string, d *orderData) error {
	db := h.cfg.Pool
	rows, err := db.Query(ctx, `
		SELECT 'coupon', coupon_id, '1', held_at, used_at, released_at
		FROM ordertimeout.coupon_holds WHERE order_id = $1
		UNION ALL
		SELECT 'points', account_id, points::text, held_at, used_at, released_at
		FROM ordertimeout.points_holds WHERE order_id = $1`, orderID)
	if err != nil {
		return err
	}
	d.Holds, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (hold, error) {
		var x hold
		err := row.Scan(&x.Kind, &x.ID, &x.Qty, &x.HeldAt, &x.UsedAt, &x.ReleasedAt)
		return x, err
	})
	if err != nil {
		return err
	}
	rows, err = db.Query(ctx, `
		SELECT kind, resource_id, qty, cause, released_at, reclaimed_at
		FROM ordertimeout.releases WHERE order_id = $1
		ORDER BY released_at, kind, resource_id
		LIMIT $2`, orderID, maxRows)
	if err != nil {
		return err
	}
	d.Releases, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (release, error) {
		var x release
		err := row.Scan(&x.Kind, &x.ResourceID, &x.Qty, &x.Cause, &x.ReleasedAt, &x.ReclaimedAt)
		return x, err
	})
	if err != nil {
		return err
	}
	rows, err = db.Query(ctx, `
		SELECT conflict_id, payment_id, kind, state, amount::text, currency, resolution,
		       detected_at, resolved_at, resolved_by, refund_started_by, refund_id, note
		FROM ordertimeout.conflicts WHERE order_id = $1
		ORDER BY detected_at, conflict_id
		LIMIT $2`, orderID, maxRows)
	if err != nil {
		return err
	}
	d.Conflicts, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (orderConflict, error) {
		var x orderConflict
		err := row.Scan(&x.ID, &x.PaymentID, &x.Kind, &x.State, &x.Amount, &x.Currency, &x.Resolution,
			&x.DetectedAt, &x.ResolvedAt, &x.ResolvedBy, &x.RefundStartedBy, &x.RefundID, &x.Note)
		return x, err
	})
	return err
}

type setting struct {
	Name  string
	Value *string
}

type settingsData struct {
	List   []setting
	Paused bool
	// PausedAt is when the pause shown began (settings.paused_at as JSON
	// text): a Resume sends it back, and ends only that pause.
	PausedAt string
}

func (h *Handler) settings(w http.ResponseWriter, r *http.Request) {
	h.renderSettings(w, r, http.StatusOK, page{Title: "Settings"})
}

func (h *Handler) renderSettings(w http.ResponseWriter, r *http.Request, status int, p page) {
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	// Every column, whatever the schema version has: in table order.
	rows, err := h.cfg.Pool.Query(ctx, `
		SELECT e.key, e.value
		FROM ordertimeout.settings AS s,
		     json_each_text(row_to_json(s)) WITH ORDINALITY AS e (key, value, n)
		WHERE e.key <> 'singleton'
		ORDER BY e.n`)
	if err != nil {
		h.dbFail(w, r, "read the settings", err)
		return
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (setting, error) {
		var s setting
		err := row.Scan(&s.Name, &s.Value)
		return s, err
	})
	if err != nil {
		h.dbFail(w, r, "read the settings", err)
		return
	}
	d := settingsData{List: list}
	for _, s := range list {
		if s.Name == "paused" && s.Value != nil && *s.Value == "true" {
			d.Paused = true
		}
		if s.Name == "paused_at" && s.Value != nil {
			d.PausedAt = *s.Value
		}
	}
	// The redirect after a switch says what it did; the URL is anyone's to
	// write, so the message is shown only when the settings agree.
	if p.Error == "" && p.Info == "" {
		switch r.URL.Query().Get("paused") {
		case "true":
			if d.Paused {
				p.Info = "Paused: no timeout cancels anything until you resume."
			}
		case "false":
			if !d.Paused {
				p.Info = "Resumed: the sweepers are woken and the backlog drains."
			}
		}
	}
	p.Data = d
	h.render(w, r, status, "settings", p)
}

func isPermissionDenied(err error) bool {
	return sqlstate.Is(err, sqlstate.InsufficientPrivilege)
}
