package embednats

import (
	"fmt"
	"net"
	"regexp"
	"strconv"

	"github.com/nats-io/nats-server/v2/server"
)

// ConfigFile reads a nats-server configuration file as nats-server does,
// naming in its error the environment variable the file references but
// the environment lacks (nats-server reports it only as a parse error).
func ConfigFile(path string) (*server.Options, error) {
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		return nil, configError(path, err)
	}
	return opts, nil
}

// missingVar finds the variable nats-server's parser could not resolve.
var missingVar = regexp.MustCompile(`variable reference for '([^']+)'`)

func configError(path string, err error) error {
	if m := missingVar.FindStringSubmatch(err.Error()); m != nil {
		return fmt.Errorf("--nats-config %s: environment variable %s is not set; the config references it (%v)", path, m[1], err)
	}
	return fmt.Errorf("--nats-config %s: %w", path, err)
}

// Loopback says whether host is an address only this host can reach.
func Loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ClientURL is the URL a client on this host connects to the server with.
func ClientURL(ns *server.Server) string {
	if a, ok := ns.Addr().(*net.TCPAddr); ok {
		return "nats://" + DisplayAddr(a)
	}
	return ns.ClientURL()
}

// DisplayAddr turns a wildcard bind address into one a browser can open.
func DisplayAddr(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	host := tcp.IP.String()
	if tcp.IP == nil || tcp.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, strconv.Itoa(tcp.Port))
}

// SplitHostPort splits a listen address host:port, the port a number
// from 0 to 65535.
func SplitHostPort(addr string) (string, int, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port %q", p)
	}
	return h, port, nil
}
