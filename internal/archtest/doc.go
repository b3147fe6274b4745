// Package archtest holds the architecture tests of the module: which
// packages may import the JetStream API and Pebble, that no service
// imports another service, that cmd/ imports no package below a
// service's root, that nothing under pkg/ imports internal/, and that
// pkg/client builds in a module of its own.
package archtest
