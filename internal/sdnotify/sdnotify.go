package sdnotify

import (
	"fmt"
	"net"
	"os"
)

// The states the daemons send.
const (
	Ready    = "READY=1"
	Stopping = "STOPPING=1"
)

// Notify sends state (one or more KEY=VALUE lines) to $NOTIFY_SOCKET. It
// returns false, nil when the variable is unset: nobody is listening.
func Notify(state string) (bool, error) {
	return notify(os.Getenv("NOTIFY_SOCKET"), state)
}

func notify(socket, state string) (bool, error) {
	if socket == "" {
		return false, nil
	}
	name := socket
	if name[0] == '@' {
		// An abstract socket: Go spells its leading NUL as @ too.
		name = "@" + name[1:]
	} else if name[0] != '/' {
		return false, fmt.Errorf("NOTIFY_SOCKET=%q: want an absolute path or an @abstract name", socket)
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		return false, fmt.Errorf("sd_notify: %w", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		return false, fmt.Errorf("sd_notify: %w", err)
	}
	return true, nil
}
