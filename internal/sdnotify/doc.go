// Package sdnotify tells systemd (or any supervisor speaking its protocol)
// how a daemon is doing, for units with Type=notify: READY=1 once it serves,
// STOPPING=1 when it begins a clean stop. The protocol is one datagram of
// newline-separated KEY=VALUE lines to the unixgram socket named by
// $NOTIFY_SOCKET (a path, or an abstract name starting with @), so it needs no
// library. Without $NOTIFY_SOCKET (not under systemd, or another Type) it
// does nothing.
package sdnotify
