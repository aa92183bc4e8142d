// Command ordertimeout is the ordertimeout sidecar: it drives the in-database
// cancel sweep, works the River jobs that need the payment gateway, resolves
// late payments, and serves metrics and River's UI. It also migrates the
// database, prints its status, pauses and resumes timeout cancels, and
// reconciles a gateway's file. (The fake payment gateway of the demo and the
// tests is a binary of its own, ordertimeout-fakegateway.)
//
//	ordertimeout [run] [flags]        run the sidecar (the default)
//	ordertimeout migrate up|down|version [flags]
//	ordertimeout status [flags]
//	ordertimeout pause|resume [flags]
//	ordertimeout reconcile --file F --format csv|wechat [flags]
//
// Run `ordertimeout <subcommand> --help` for each subcommand's flags.
package main
