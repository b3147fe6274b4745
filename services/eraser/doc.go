// Package eraser erases sessions (DESIGN.md section 14): it serves
// sessions.api.erase, runs each erase as a job its record in
// SESSION_ERASED describes (resumed on start and on every sweep, so a job
// cut short finishes by itself), and with RetainClosed erases sessions
// closed for longer than that after archiving them. Its NATS user is the
// one that may delete stored messages (deploy/nats, "eraser").
package eraser
