// Package webhook signs and verifies ordertimeout's webhook deliveries.
//
// Every delivery is a POST of a JSON body with the header
//
//	Ordertimeout-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>
//
// A receiver calls Verify with the shared secret, the header, the raw body and
// a tolerance: a signature older (or further in the future) than the
// tolerance is refused, so a captured delivery cannot be replayed later.
// Deliveries are at least once: a receiver deduplicates by the body's "id".
//
// The package is outside internal/ so that receivers written in Go can import
// it.
package webhook
