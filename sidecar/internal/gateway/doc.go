// Package gateway is the sidecar's HTTP client for the payment gateway.
//
// The gateway is the outside world's truth about money: before a timeout
// cancels an order whose payment may have been started, the sidecar asks it;
// after such a cancel, it closes the payment there; a late payment that cannot
// be reinstated is refunded there. The contract is small JSON over HTTP
// (all bodies application/json):
//
//	GET  /v1/orders/{order_id}
//	     200 {"order_id": "A1", "status": "paid"|"pending"|"failed"|"none",
//	          "payment_id": "P1", "amount": "12.50"}
//	     status none: the gateway knows no payment for the order.
//	     payment_id and amount are set when status is paid.
//
//	POST /v1/orders/{order_id}/close
//	     200 {"status": "closed"}
//	     200 {"status": "paid", "payment_id": "P1", "amount": "12.50"}
//	     closed: no payment can complete for the order any more (also
//	     returned for an order the gateway never saw). paid: too late, the
//	     buyer has paid. Repeating a close gives the same answer.
//
//	POST /v1/refunds
//	     {"order_id": "A1", "payment_id": "P1", "amount": "12.50",
//	      "idempotency_key": "P1"}
//	     200 {"refund_id": "R1", "status": "refunded"}
//	     The same idempotency_key again returns the same refund and moves no
//	     money.
//
// Amounts are decimal strings (or JSON numbers) and may be absent. Any other
// answer is an error: a 5xx, 429, timeout or refused connection is
// ErrUnavailable (worth asking again later); a 4xx, malformed JSON or an
// unknown status is ErrBadAnswer (the answer says nothing about the money; the
// caller changes no state). Every request has its own timeout and is retried a
// couple of times while the gateway is unavailable; the POSTs are safe to
// repeat by the contract above.
package gateway
