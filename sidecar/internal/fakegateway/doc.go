// Package fakegateway is a payment gateway for tests and demos: a real HTTP
// server that speaks the contract of package gateway and whose behaviour per
// order and as a whole is set over HTTP.
//
// The gateway API (see package gateway):
//
//	GET  /v1/orders/{order_id}
//	POST /v1/orders/{order_id}/close
//	POST /v1/refunds
//	GET  /v1/payments?since=<RFC 3339>&limit=N
//
// A refund, the sidecar's or a person's, changes what the order's payment
// holds, as the contract says: refunded in full, GET /v1/orders/{order_id}
// answers failed; in part, paid with the rest.
//
// GET /v1/payments lists every payment the fake took, silent ones included
// (their callback never comes; a payment set without an amount is not
// listed, as the contract requires one), and every refund it made, each
// once, stamped with this host's clock when it happened (a payment set with
// paid_at, with that), in its currency or DefaultCurrency (EUR).
//
// The control API, for tests and demos:
//
//	POST /_fake/orders/{order_id}
//	     {"behaviour": "instant"|"late"|"silent"|"decline"|"qr"|
//	                    "pay_on_close"|"down"|"slow",
//	      "delay_ms": 0, "payment_id": "P1", "amount": "12.50",
//	      "currency": "EUR", "none_queries": 0,
//	      "paid_at": "2026-12-01T10:00:00Z"}
//	     Sets how the gateway treats the order. With payment_id, the buyer
//	     pays now (payment behaviours only); paid_at, if given, is when
//	     the answers about the order (a query's, a close's) say that
//	     payment was taken (they do not say otherwise):
//	       instant  paid at once; the callback confirms the payment at once
//	       late     the payment completes after delay_ms (typically after the
//	                shop cancelled); until then the gateway knows no payment;
//	                then it is paid and the callback confirms it. An order
//	                closed before that refuses the payment.
//	       silent   paid at once at the gateway; no callback ever (only a
//	                query finds it)
//	       decline  the payment fails; the callback reports the failure
//	       qr       Alipay's QR code: the first none_queries queries answer
//	                none (TRADE_NOT_EXIST: not scanned yet), then the
//	                payment is there, paid; no callback ever (a close
//	                before the scan closes it: the code is then refused)
//	       pay_on_close  WeChat Pay's ORDERPAID: queries answer pending;
//	                the buyer pays as the first close arrives, which
//	                answers paid (a payment, not a failed close)
//	     A close of an order already closed answers closed again: closing
//	     twice is success.
//	     Answer behaviours, for the gateway API about this order:
//	       down     503 Service Unavailable
//	       slow     answers after delay_ms
//	POST /_fake/orders/{order_id}/refund  {"amount": "4.00"}
//	     A person refunds the order's paid payment at the gateway (its
//	     dashboard), without the shop: all of it, or amount of it. 409 when
//	     the order has no paid payment or amount is more than it holds.
//	     POST /v1/refunds answers 409 the same way for a new refund of the
//	     order's payment (a repeat of a key answers its refund as always).
//	GET  /_fake/orders/{order_id}   what the fake knows about the order
//	POST /_fake/gateway {"behaviour": "normal"|"down"|"slow", "delay_ms": 0}
//	     the whole gateway's answers
//	GET  /_fake/stats               counters: queries, closes, refunds (one per
//	                                idempotency key), refund_requests, callbacks
//
// {order_id} is one escaped path segment (gateway.PathSegment): the fake
// matches these routes on the escaped path and decodes the segment, so ids
// such as "a/b", ".." or "100%" reach their own order.
//
// The callback is what a shop's payment callback handler does: with a
// database (Server.DB), it calls ordertimeout.confirm_payment or
// ordertimeout.fail_payment. Without one, there are no callbacks.
//
// The fake is deterministic: nothing is random, and "instant" and "decline"
// callbacks have finished when the control request returns.
package fakegateway
