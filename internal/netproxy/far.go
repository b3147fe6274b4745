package netproxy

import (
	"context"
	"net"
	"net/http"
)

// FarClient is an HTTP client whose connections have a receive buffer of
// readBuffer bytes: it stands for a client far away, which a server
// cannot push tens of megabytes into as it can over loopback.
func FarClient(readBuffer int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DisableCompression: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err == nil {
				c.(*net.TCPConn).SetReadBuffer(readBuffer)
			}
			return c, err
		},
	}}
}
