// Package listener turns late-payment conflicts into River jobs.
//
// ordertimeout.confirm_payment on a cancelled (or already paid) order writes a
// conflict row and sends NOTIFY ordertimeout_conflict '<conflict_id>'. A
// Listener LISTENs on that channel with pgxlisten and inserts one
// ordertimeout_resolve_conflict job per notification. NOTIFY is not durable,
// so after every (re)connect — LISTEN first, then the backlog — it also
// inserts a job for every row of ordertimeout.open_conflicts(): a notification
// missed while the connection was down loses nothing. The jobs are unique by
// their arguments (worker.ResolveConflictArgs), so repeats from notifications,
// backlogs and other sidecars collapse into one job per conflict.
package listener
