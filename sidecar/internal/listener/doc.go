// Package listener holds the sidecar's one LISTEN connection and turns
// unresolved conflicts into River jobs.
//
// A Listener LISTENs with pgxlisten on ConflictChannel and on every channel
// given to Handle (the sidecar adds the sweep's ordertimeout_wake), all on one
// connection: one connection per sidecar, however many channels.
//
// ordertimeout.confirm_payment writes a conflict row for money an order cannot
// take, and resolve_conflict(id, 'refund') claims one for a refund; both send
// NOTIFY ordertimeout_conflict with an empty payload. The notification is only
// a wake-up: any role that can connect can send one, so its payload is never
// read and never creates work. For each wake-up (coalesced: a burst of
// notifications makes one scan) the Listener reads the conflicts that need
// the sidecar from the table and inserts one ordertimeout_resolve_conflict job for each. NOTIFY is not
// durable, so the same scan runs after every (re)connect — LISTEN first, then
// the scan — and every Rescan: a notification missed while the connection was
// down loses nothing. The jobs are unique by their arguments among live jobs
// (worker.ResolveConflictArgs), so repeats from wake-ups, rescans and other
// sidecars collapse into one job per conflict.
package listener
