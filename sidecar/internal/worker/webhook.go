package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/riverqueue/river"

	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
	"github.com/ordertimeout/ordertimeout/sidecar/webhook"
)

// WebhookArgs is one webhook delivery: either an event of the order's history
// (EventID, inserted with the event when settings.webhooks is on) or a
// reminder (Reminder "expiring_soon", inserted by create_order at expire_at -
// settings.remind_before, for the order's deadline Version).
type WebhookArgs struct {
	EventID  int64  `json:"event_id,omitempty"`
	OrderID  string `json:"order_id"`
	Reminder string `json:"reminder,omitempty"`
	Version  int    `json:"version,omitempty"`
}

// Kind is "ordertimeout_webhook".
func (WebhookArgs) Kind() string { return "ordertimeout_webhook" }

// InsertOpts puts the job in WebhookQueue.
func (WebhookArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{Queue: WebhookQueue} }

// Event is the JSON body of a webhook delivery. ID is stable across retries
// of one delivery: receivers deduplicate by it.
type Event struct {
	ID              string          `json:"id"`
	Type            string          `json:"type"`
	OrderID         string          `json:"order_id"`
	EventID         int64           `json:"event_id,omitempty"`
	FromStatus      *string         `json:"from_status,omitempty"`
	ToStatus        string          `json:"to_status,omitempty"`
	Cause           string          `json:"cause,omitempty"`
	Actor           string          `json:"actor,omitempty"`
	LatenessSeconds *float64        `json:"lateness_seconds,omitempty"`
	At              time.Time       `json:"at"`
	Version         int             `json:"version,omitempty"`
	ExpireAt        *time.Time      `json:"expire_at,omitempty"`
	Detail          json.RawMessage `json:"detail,omitempty"`
}

// Event types: one per kind of event, chosen by the event's cause before its
// statuses (see eventType and the README's table). A receiver sees each order
// cancelled exactly once (TypeCancelled), and a late payment on a cancelled
// order as TypeConflict, never as another cancel.
const (
	TypeCancelled        = "order.cancelled"
	TypePaid             = "order.paid"
	TypeReinstated       = "order.reinstated"
	TypeConflict         = "payment.conflict"
	TypeRefunding        = "conflict.refunding"
	TypeConflictResolved = "conflict.resolved"
	TypeHandedOver       = "conflict.handed_over"
	TypeExpiringSoon     = "order.expiring_soon"
	TypeChanged          = "order.changed"
)

// WebhookWorker POSTs one webhook, signed with the header of package
// webhook. Any answer but 2xx is an error, and River retries with its backoff
// (at least once delivery); so is a delivery that the job's timeout ended. A
// redirect is never followed: it is a failed delivery, and its Location never
// sees the body or the signature. A reminder is sent only if the order is
// still PENDING at the version it was made for, and before its expire_at.
type WebhookWorker struct {
	river.WorkerDefaults[WebhookArgs]
	*Deps
}

// Work delivers one webhook.
func (w *WebhookWorker) Work(ctx context.Context, job *river.Job[WebhookArgs]) error {
	a := job.Args
	var ev Event
	if a.Reminder != "" {
		st, err := loadOrder(ctx, w.Pool, a.OrderID)
		if errors.Is(err, errUnknownOrder) {
			w.outcome(job.Kind, "unknown_order")
			return river.JobCancel(err)
		}
		if err != nil {
			return retry(ctx, w.Deps, job, false, err)
		}
		if st.Status != "PENDING" || st.Version != a.Version {
			w.outcome(job.Kind, "moot")
			return nil
		}
		// Past expire_at (a delivery retried long, a sidecar that was
		// down) the buyer can no longer pay (begin_payment: OT122): a
		// "pay soon" would be a lie. By the database's clock (loadOrder).
		if st.Expired {
			w.outcome(job.Kind, "moot")
			return nil
		}
		expire := st.ExpireAt
		ev = Event{
			// The job's id too: an order id that a purge freed and a new
			// order took has reminders of the same version, which the
			// receiver must not take for repeats of the old one's.
			ID:       fmt.Sprintf("reminder_%s_%s_%d_%d", a.Reminder, a.OrderID, a.Version, job.ID),
			Type:     "order." + a.Reminder,
			OrderID:  a.OrderID,
			At:       w.now().UTC(),
			Version:  a.Version,
			ExpireAt: &expire,
		}
	} else {
		var lateness *float64
		found, err := queryOne(ctx, w.Pool,
			`SELECT from_status, to_status, cause, actor, extract(epoch FROM lateness)::float8, at, detail
			   FROM ordertimeout.order_events($1)
			  WHERE event_id = $2`,
			[]any{a.OrderID, a.EventID},
			&ev.FromStatus, &ev.ToStatus, &ev.Cause, &ev.Actor, &lateness, &ev.At, &ev.Detail)
		if sqlstate.Is(err, sqlstate.UnknownOrder) {
			w.outcome(job.Kind, "unknown_order")
			return river.JobCancel(fmt.Errorf("webhook for event %d: %w", a.EventID, errUnknownOrder))
		}
		if err != nil {
			return retry(ctx, w.Deps, job, false, fmt.Errorf("read event %d: %w", a.EventID, err))
		}
		if !found {
			w.outcome(job.Kind, "unknown_event")
			return river.JobCancel(fmt.Errorf("event %d of order %q is unknown", a.EventID, a.OrderID))
		}
		ev.ID = fmt.Sprintf("evt_%d", a.EventID)
		ev.OrderID = a.OrderID
		ev.EventID = a.EventID
		ev.LatenessSeconds = lateness
		ev.Type = eventType(ev)
	}

	if w.WebhookURL == "" {
		return retry(ctx, w.Deps, job, false, errors.New("settings.webhooks is on but the sidecar has no webhook URL (--webhook-url)"))
	}
	body, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode webhook: %w", err)
	}
	if err := w.post(ctx, body, ev.ID); err != nil {
		return retry(ctx, w.Deps, job, false, err)
	}
	w.outcome(job.Kind, "delivered")
	return nil
}

// maxReadBody is the largest answer body of a receiver that a delivery
// reads (to reuse the connection); a larger one, or one of unknown length,
// is not read.
const maxReadBody = 4 << 10

// bodyWait bounds reading a receiver's answer body once its status is in.
const bodyWait = 200 * time.Millisecond

func (w *WebhookWorker) post(ctx context.Context, body []byte, id string) error {
	// The answer's body, once its status is in, gets bodyWait of its own
	// and no more (see below): cancelling ctx ends a read that trickles.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.WebhookURL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("build webhook request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Ordertimeout-Event-Id", id)
	if w.WebhookSecret != "" {
		req.Header.Set(webhook.SignatureHeader, webhook.Sign(w.WebhookSecret, body, w.now()))
	}
	resp, err := w.WebhookClient.Do(req)
	if err != nil {
		// net/http's error quotes the whole URL, whose path or query often
		// holds the receiver's token; it goes to River's errors of the job
		// and to the logs. Name the receiver by scheme and host only.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("deliver webhook %s to %s://%s: %w", id, req.URL.Scheme, req.URL.Host, err)
	}
	defer resp.Body.Close()
	// The status is the answer. The body is read only when it is small and
	// of a known length, to keep the connection for the next delivery, and
	// for bodyWait at most: a body that trickles in would hold the worker
	// until the delivery's timeout for an answer already given.
	if resp.ContentLength >= 0 && resp.ContentLength <= maxReadBody {
		stop := time.AfterFunc(bodyWait, cancel)
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxReadBody))
		stop.Stop()
	}
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		return fmt.Errorf("deliver webhook %s: receiver answered HTTP %d (a redirect, not followed: the webhook goes to --webhook-url only)", id, resp.StatusCode)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("deliver webhook %s: receiver answered HTTP %d", id, resp.StatusCode)
	}
	return nil
}

// eventType names an event of the order history for receivers. The cause
// decides first: a conflict's events keep the order's status (CANCELLED ->
// CANCELLED), so a choice by to_status would call them cancels.
func eventType(ev Event) string {
	from := ""
	if ev.FromStatus != nil {
		from = *ev.FromStatus
	}
	switch ev.Cause {
	case "conflict":
		var d struct {
			Resolution    string `json:"resolution"`
			HandedOverWhy string `json:"handed_over_why"`
		}
		_ = json.Unmarshal(ev.Detail, &d)
		switch {
		case ev.ToStatus == "PAID" && from != "PAID":
			return TypeReinstated
		case d.Resolution == "refunding":
			return TypeRefunding
		case d.Resolution == "" && d.HandedOverWhy != "":
			// Not resolved: the sidecar left it to a person
			// (hand_over_conflict).
			return TypeHandedOver
		default:
			return TypeConflictResolved
		}
	case "payment", "reconcile":
		var d struct {
			ConflictID *int64 `json:"conflict_id"`
		}
		_ = json.Unmarshal(ev.Detail, &d)
		switch {
		case d.ConflictID != nil:
			return TypeConflict
		case ev.ToStatus == "PAID" && from != "PAID":
			return TypePaid
		default:
			return TypeChanged
		}
	}
	if ev.ToStatus == "CANCELLED" && (from == "PENDING" || from == "PAYING") {
		return TypeCancelled
	}
	return TypeChanged
}
