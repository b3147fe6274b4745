// Package archtest holds the architecture tests of the module: which
// packages may import the JetStream API and Pebble, that no service
// imports another service, that cmd/ imports no package below a
// service's root, that nothing under pkg/ imports internal/, that the
// services which declare what they need of the log hold it as that
// interface and not as a *logstore.Store, and that pkg/client builds in a
// module of its own.
package archtest
