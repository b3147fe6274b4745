package main

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	natsauth "github.com/sessionlog/sessionlog/deploy/nats"
	"github.com/sessionlog/sessionlog/internal/natsconn"
	"github.com/sessionlog/sessionlog/internal/upusers"
)

// upConns opens up's in-process connections to the embedded server, as
// up's service user or its eraser user, and closes them after the group
// has stopped.
type upConns struct {
	ns *server.Server
	// svc and eraser are the logins of connect and connectEraser.
	svc, eraser natsconn.Config

	mu    sync.Mutex
	conns []*nats.Conn
}

func newUpConns(ns *server.Server, opts *server.Options, svcUser *server.User, log *slog.Logger) *upConns {
	c := &upConns{ns: ns}
	// The services connect in-process as up's own service user (none when
	// NATS is open), with the services' inbox prefix.
	c.svc = natsconn.Config{Inbox: natsauth.ServiceInboxPrefix, Log: log}
	if svcUser != nil {
		c.svc.User, c.svc.Password = svcUser.Username, svcUser.Password
	}
	// The eraser (and the repairer, as before the eraser was a service of
	// its own) logs in as up's eraser user where there is one.
	c.eraser = c.svc
	if er := upusers.Find(opts, upusers.Eraser); er != nil {
		c.eraser.User, c.eraser.Password = er.Username, er.Password
	}
	return c
}

// connect opens a connection as up's service user, named name.
func (c *upConns) connect(name string) (*nats.Conn, error) { return c.connectAs(&c.svc, name) }

// connectEraser opens a connection as up's eraser user, named name.
func (c *upConns) connectEraser(name string) (*nats.Conn, error) {
	return c.connectAs(&c.eraser, name)
}

func (c *upConns) connectAs(cfg *natsconn.Config, name string) (*nats.Conn, error) {
	o, err := cfg.Options(name)
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(c.ns.ClientURL(), append(o, nats.InProcessServer(c.ns))...)
	if err != nil {
		return nil, fmt.Errorf("in-process nats connection: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.conns = append(c.conns, nc)
	return nc, nil
}

// closeAll closes the connections, the last opened first.
func (c *upConns) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.conns) - 1; i >= 0; i-- {
		// Flush what services published last, bounded.
		_ = c.conns[i].FlushTimeout(2 * time.Second)
		c.conns[i].Close()
	}
	c.conns = nil
}
