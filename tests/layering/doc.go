// Package layering checks the shape of the tree: that no package imports
// one its layer must not (core never reaches gRPC, the network, the
// broker's network layer or the controller; internal/ holds leaf libraries
// only; nothing but cmd/ imports cmd/ and nothing outside tests/ imports
// tests/), that the package map in docs/design.md lists every package
// directory of the tree and nothing else, and that docs/kafka-tests.md
// names only tests and scenario files that exist.
//
// It reads the sources with go/parser (imports only), so it needs no build
// and fails with the file and import that break a rule. The rules are in
// layering_test.go, each with the reason it exists; docs/design.md's
// "Package map" states them for readers.
package layering
