// Package console is the operator console of ordertimeout: server-rendered
// HTML pages, served by the sidecar at /console/, for the people who decide
// about money.
//
// Pages: the overview (orders by state, the sweep's health, open conflicts,
// the cancel lag of the last hour as an SVG chart), the conflicts (late,
// double and mismatched payments, oldest first, with the actions reinstate,
// refund and manual), one order (state, deadlines, payments, holds and
// releases, its whole event timeline) and the settings, with the pause
// switch. Everything is
// embedded in the binary; the pages need no JavaScript and fetch nothing
// from elsewhere.
//
// Two kinds of users sign in with HTTP basic auth: viewers, who read, and
// operators, who may also resolve conflicts and pause. A resolution goes
// through ordertimeout.resolve_conflict, the same exactly-once path the
// sidecar uses, and a pause through ordertimeout.configure, each with actor
// "console:<user>". Every POST must carry the form's CSRF
// token (an HMAC of the user and the time, keyed by the user's password)
// and come from this server's own origin; a viewer's POST is refused.
package console
