// Package gateway is the sidecar's view of the payment gateway: the
// Gateway interface its workers use, the driver for the JSON contract below
// (Client, --gateway http), and a rate limit around any driver (Limited).
// The Stripe driver is package gateway/stripe (--gateway stripe).
//
// The gateway is the outside world's truth about money: before a timeout
// cancels an order whose payment may have been started, the sidecar asks it;
// after such a cancel, it closes the payment there; a late payment that cannot
// be reinstated is refunded there. The contract is small JSON over HTTP
// (all bodies application/json):
//
//	GET  /v1/orders/{order_id}
//	     200 {"order_id": "A1", "status": "paid"|"pending"|"failed"|"none",
//	          "payment_id": "P1", "amount": "12.50", "currency": "EUR"}
//	     status none: the gateway knows no payment for the order.
//	     payment_id, amount and currency are set when status is paid.
//	     A payment refunded since, by anyone (the sidecar, or a person in
//	     the gateway's dashboard), is answered as what the gateway still
//	     holds of it: failed when refunded in full, paid with the amount
//	     left when in part. Before a late payment is reinstated the
//	     sidecar asks, and reinstates no payment the gateway answers that
//	     way (worker.CheckHeld).
//
//	     none is unknown, never unpaid. The Chinese gateways answer "order
//	     not found" (Alipay's TRADE_NOT_EXIST, WeChat Pay's ORDERNOTEXIST)
//	     until the buyer scans the QR code; an adapter answers none then.
//	     The sidecar takes none for "not paid" only when the gateway can
//	     no longer take a payment: once the expiry the shop gave the
//	     gateway (gateway_expire_at from begin_payment) has passed by the
//	     database's clock, or, for an order without one, after asking
//	     worker.NoneAsks times with a growing pause (about 3 s). Acting on
//	     it is still safe: a cancel is followed by a close, and money that
//	     arrives later is a late-payment conflict, resolved by policy.
//
//	POST /v1/orders/{order_id}/close
//	     200 {"status": "closed"}
//	     200 {"status": "paid", "payment_id": "P1", "amount": "12.50",
//	          "currency": "EUR"}
//	     closed: no payment can complete for the order any more (also
//	     returned for an order the gateway never saw). paid: too late, the
//	     buyer has paid. Repeating a close gives the same answer.
//
//	     An adapter maps the gateways' close errors onto these: closing an
//	     order already closed (Alipay's TRADE_STATUS_ERROR on a closed
//	     trade, WeChat Pay's ORDERCLOSED) is closed, success; a close
//	     refused because the buyer paid (WeChat Pay's ORDERPAID, Alipay's
//	     TRADE_SUCCESS) is paid with the payment: the sidecar confirms it,
//	     which on a cancelled order records a late-payment conflict.
//
//	POST /v1/refunds
//	     {"order_id": "A1", "payment_id": "P1", "amount": "12.50",
//	      "idempotency_key": "P1"}
//	     200 {"refund_id": "R1", "status": "refunded"}
//	     The same idempotency_key again returns the same refund and moves no
//	     money.
//
//	GET  /v1/payments?since=2026-12-01T10:00:00Z&limit=100
//	     200 {"payments": [{"payment_id": "P1", "order_id": "A1",
//	          "amount": "12.50", "currency": "EUR", "status": "paid",
//	          "at": "2026-12-01T10:00:03Z"}, ...], "has_more": false}
//	     The gateway's records for reconciliation (Client.Payments): every
//	     payment it took and every refund it made (status "refunded", the
//	     same payment_id, amount the amount refunded), also those whose
//	     callback never arrived and payments the shop never started (a QR
//	     code paid directly), with at (RFC 3339, a zone offset of at most
//	     15:59 east or west: CheckZoneOffset) at or after since, oldest
//	     first (by at, then payment_id), at most limit (1 to 1000) of them.
//	     has_more says whether more follow: ask again with since = the last
//	     at. amount, currency and at are required here.
//
// {order_id} is one path segment, escaped with PathSegment: every byte but
// the unreserved ones is percent-encoded ("a/b" is a%2Fb, "100%" is 100%25),
// and the ids "." and ".." are sent as %2E and %2E%2E, never as dot
// segments. A gateway (or adapter) decodes the segment to get the id back.
//
// Answers are read strictly; anything else is ErrBadAnswer:
//
//   - the body is exactly one JSON object in UTF-8, at most MaxAnswerBytes,
//     with nothing after it but white space;
//   - no object, at any depth, has a key twice ({"status": "failed",
//     "status": "paid"} says nothing), and no key differs from a contract
//     field only in case ("Status"); other unknown keys are ignored, so a
//     gateway may add fields;
//   - status is one of the values above, exactly (lower case);
//   - a paid status has a payment_id, and a refund a refund_id, of 1 to 128
//     characters, not "." or "..", without control, format (bidi,
//     zero-width) or line separator characters;
//   - amount, when present and not null, is a JSON string or number in the
//     grammar (0|[1-9][0-9]*)(\.[0-9]+)? with at most 15 integer and 6
//     fraction digits: never negative, NaN, Infinity, an exponent ("1e3")
//     or hex ("0x1p3"); see ParseAmount;
//   - currency, when present and not null, is three upper-case letters
//     (ISO 4217, "EUR").
//
// The sidecar sends no refund whose amount is outside that grammar.
//
// A 5xx, 429, 408, timeout or refused connection is ErrUnavailable (worth
// asking again later); a 3xx (redirects are never followed, so neither the
// token nor a body goes anywhere but BaseURL), a 4xx, or an answer breaking
// the rules above is ErrBadAnswer (the answer says nothing about the money;
// the caller changes no state). Every request has its own timeout and is
// retried a couple of times while the gateway is unavailable; the POSTs are
// safe to repeat by the contract above.
//
// Rate limit (--gateway-rate, --gateway-burst; Limited): calls wait for a
// token of a bucket refilled at the rate, up to MaxWait; a call that would
// wait longer is not sent (ErrThrottled); with a Ticket in its context it
// keeps its token reserved ahead, and its job snoozes until it is due, so a
// backlog (10,000 flash-sale orders expiring in
// one second, each with a close) drains at the rate without holding River's
// workers. Metrics: ordertimeout_gateway_throttled_total{op,result} and
// ordertimeout_gateway_throttle_wait_seconds{op}.
package gateway
